//! An operator of `Rollout`s (`tests/rollout.rs`) with the standard flags, for the tracing
//! test: run with `--otlp-traces` and the `OTEL_*` variables, its reconciles reach the test's
//! Jaeger.

use kubeforge::cli::or_exit;

// Not in the package's library: every binary linking it would register the kind, and the
// webhook operator's `crdgen` prints exactly its own kinds.
#[path = "../rollout.rs"]
mod rollout;

use rollout::RolloutController;

#[tokio::main]
async fn main() {
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(RolloutController).run().await);
}
