//! The SecretMirror operator (`examples/src/secret_mirror.rs`) as a binary, with
//! controller-runtime's flags (`--help`). Install the CRD first: `cargo run --bin crdgen`.

use clap::Parser;
use kubeforge::cli::{Options, or_exit};
use kubeforge_examples::secret_mirror::SecretMirrorController;

#[tokio::main]
async fn main() {
    let options = Options::parse();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(SecretMirrorController).run().await);
}
