//! The ConfigAudit watcher (`examples/src/config_audit.rs`) as a binary, with controller-runtime's
//! flags (`--help`): label a ConfigMap `audit.kubeforge.dev/enabled=true` and watch its events.

use std::sync::Arc;

use kubeforge::cli::{self, or_exit};
use kubeforge_examples::config_audit::ConfigAudit;

#[kubeforge::tokio::main(crate = "kubeforge::tokio")]
async fn main() {
    let options = cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client));
    // The manager's client: its writes are fenced under leader election.
    let recorder = Arc::new(manager.recorder("config-audit"));
    or_exit(manager.watcher(ConfigAudit { recorder }).run().await);
}
