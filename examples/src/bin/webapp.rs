//! The WebApp operator (`examples/src/webapp_operator.rs`) as a binary, with controller-runtime's
//! flags (`--help`). Install the CRD first: `cargo run --bin crdgen | kubectl apply -f -`.

use std::sync::Arc;

use kubeforge::cli::{self, or_exit};
use kubeforge_examples::webapp_operator::WebAppController;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() {
    let options = cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    // From the manager: its writes are fenced under leader election, like the reconcilers'.
    let recorder = Arc::new(manager.recorder("webapp-operator"));
    or_exit(
        manager
            .controller(WebAppController { recorder })
            .run()
            .await,
    );
}
