//! The WebApp operator (`examples/src/webapp_operator.rs`) as a binary, with controller-runtime's
//! flags (`--help`). Install the CRD first: `cargo run --bin crdgen | kubectl apply -f -`.

use std::sync::Arc;

use clap::Parser;
use kubeforge::cli::{Options, or_exit};
use kubeforge::events::Recorder;
use kubeforge_examples::webapp_operator::WebAppController;

#[tokio::main]
async fn main() {
    let options = Options::parse();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let recorder = Arc::new(Recorder::new(client.clone(), "webapp-operator"));
    let manager = or_exit(options.manager(client));
    or_exit(
        manager
            .controller(WebAppController { recorder })
            .run()
            .await,
    );
}
