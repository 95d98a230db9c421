//! Operator binaries present themselves, not kubeforge (issue 12, item 10: `--version` and
//! `--help` showed kubeforge's version and description). Runs the test operators of this
//! package; no cluster needed, `--version` and `--help` exit before connecting.

use std::process::Command;

/// Runs `binary` with `flag`, checks it succeeded, returns its stdout.
fn run(binary: &str, flag: &str) -> String {
    let output = Command::new(binary)
        .arg(flag)
        .output()
        .expect("the test operator starts");
    assert!(
        output.status.success(),
        "{binary} {flag}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("clap prints UTF-8")
}

#[test]
fn operator_version_should_be_the_binary_name_and_its_package_version() {
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        run(env!("CARGO_BIN_EXE_fencing-operator"), "--version"),
        format!("fencing-operator {version}\n")
    );
    assert_eq!(
        run(env!("CARGO_BIN_EXE_signal-operator"), "-V"),
        format!("signal-operator {version}\n")
    );
}

#[test]
fn operator_help_should_start_with_its_package_description() {
    let help = run(env!("CARGO_BIN_EXE_fencing-operator"), "--help");
    assert!(
        help.starts_with(concat!(
            env!("CARGO_PKG_DESCRIPTION"),
            "\n\nUsage: fencing-operator [OPTIONS]"
        )),
        "{help}"
    );
    assert!(
        !help.contains("Declarative Kubernetes operators"),
        "kubeforge's own description: {help}"
    );
    assert!(help.contains("--leader-elect"), "{help}");
}
