//! A test operator serving the admission and conversion webhooks of `Slot`
//! (`kubeforge_tests::slots`) and its controller, run by the webhook lifecycle fault tests under
//! exactly the RBAC it prints itself: `webhook-operator crdgen ARGS` is its `crdgen` (the same
//! binary, so the same kinds and controllers); any other arguments are the operator's flags.

use kubeforge::cli::or_exit;
use kubeforge_tests::slots::SlotController;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some("crdgen") {
        let rest: Vec<String> = args.collect();
        let mut out = String::new();
        let result = kubeforge::crdgen::run_named(&rest, Some("webhook-operator"), &mut out);
        print!("{out}");
        return match result {
            Ok(true) => std::process::ExitCode::SUCCESS,
            Ok(false) => std::process::ExitCode::FAILURE,
            Err(e) => {
                eprintln!("crdgen: {e}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let options = kubeforge::cli::parse!();
    options.init_tracing();
    let client = or_exit(options.client().await);
    let manager = or_exit(options.manager(client)).controller(SlotController);
    or_exit(manager.run().await);
    std::process::ExitCode::SUCCESS
}
