//! `cargo run --bin static-site`: the StaticSite operator (`src/static_site.rs`) with
//! controller-runtime's command-line flags.

// ANCHOR: all
use kubeforge::cli::{self, or_exit};
use kubeforge_examples::static_site::StaticSiteController;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() {
    let options = cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(StaticSiteController).run().await);
}
// ANCHOR_END: all
