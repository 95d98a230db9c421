//! The Database operator (`examples/src/database.rs`) as a binary, with controller-runtime's
//! flags (`--help`). Install the CRD first: `cargo run --bin crdgen | kubectl apply -f -`.

use kubeforge::cli::{self, or_exit};
use kubeforge_examples::database::DatabaseController;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() {
    let options = cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(DatabaseController).run().await);
}
