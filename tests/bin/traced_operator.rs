//! An operator of `Rollout`s (`kubeforge_tests::rollout`) with the standard flags, for the
//! tracing test: run with `--otlp-traces` and the `OTEL_*` variables, its reconciles reach the
//! test's Jaeger.

use kubeforge::cli::or_exit;
use kubeforge_tests::rollout::RolloutController;

#[tokio::main]
async fn main() {
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    or_exit(manager.controller(RolloutController).run().await);
}
