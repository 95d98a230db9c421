//! `cargo run --bin guestbook`: the book tutorial's operator (`src/guestbook.rs`), as
//! `cargo kubeforge init` writes an operator's binary.

// ANCHOR: all
use kubeforge::cli::{self, or_exit};
use kubeforge_examples::guestbook::GuestbookController;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() {
    let options = cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(GuestbookController).run().await);
}
// ANCHOR_END: all
