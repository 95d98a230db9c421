//! `cargo kubeforge` end to end: a generated project builds and passes its own tests against
//! the local control plane, and misuse is refused with a clear message.
//!
//! The generated project is built in the workspace's build directory (`target/`: the build-dir
//! `cargo metadata` reports) with a copy of the workspace's `Cargo.lock`, so it resolves the
//! same versions and reuses the dependencies the workspace has built: only the crates whose
//! features differ (kube's, kubeforge) and the project itself are compiled. Its final artifacts
//! go to `target/scaffold-ci/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const GENERATOR: &str = env!("CARGO_BIN_EXE_cargo-kubeforge");

/// A fresh directory under the system's temporary directory (outside this repository), removed
/// on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kubeforge-scaffold-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the scaffold crate is in the workspace")
}

/// Where the workspace keeps its intermediate build artifacts (`build.build-dir`: its target
/// directory unless configured otherwise), from `cargo metadata`.
fn workspace_build_dir(cargo: &std::ffi::OsStr) -> PathBuf {
    let metadata = Command::new(cargo)
        .current_dir(workspace())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .expect("running cargo metadata");
    assert!(metadata.status.success(), "{}", text(&metadata));
    let json: serde_json::Value =
        serde_json::from_slice(&metadata.stdout).expect("cargo metadata prints JSON");
    let dir = ["build_directory", "target_directory"]
        .iter()
        .find_map(|key| json[key].as_str())
        .expect("cargo metadata names the target directory");
    PathBuf::from(dir)
}

fn generate(dir: &Path, args: &[&str]) -> Output {
    Command::new(GENERATOR)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running cargo-kubeforge")
}

fn text(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn succeeds(output: &Output) {
    assert!(output.status.success(), "{}", text(output));
}

fn fails_saying(output: &Output, message: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains(message),
        "expected a failure saying {message:?}\n{}",
        text(output)
    );
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, step by step: generate a project, build it, run its tests and check each step's output"
)]
fn a_generated_project_should_build_and_pass_its_tests() {
    let scratch = Scratch::new("project");
    // As cargo runs a subcommand: `cargo kubeforge init` is `cargo-kubeforge kubeforge init`.
    succeeds(&generate(
        &scratch.0,
        &[
            "kubeforge",
            "init",
            "scaffold-ci-operator",
            "--group",
            "ci.kubeforge.dev",
            "--kind",
            "Database",
        ],
    ));
    let project = scratch.0.join("scaffold-ci-operator");
    // From a subdirectory of the project, with a kind of two words and another version.
    succeeds(&generate(
        &project.join("src"),
        &[
            "create",
            "api",
            "--kind",
            "WebCache",
            "--version",
            "v1alpha1",
            "--scope",
            "cluster",
        ],
    ));
    let sample = std::fs::read_to_string(project.join("samples/web_cache.yaml")).unwrap();
    assert!(sample.contains("  namespace: default"), "{sample}");

    std::fs::copy(workspace().join("Cargo.lock"), project.join("Cargo.lock"))
        .expect("copying the workspace's Cargo.lock");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let build_dir = workspace_build_dir(&cargo);
    let started = Instant::now();
    let test = Command::new(&cargo)
        .current_dir(&project)
        .args(["test", "--color", "never"])
        // The workspace's intermediate artifacts (deps, fingerprints, incremental state), so its
        // dependencies are reused; the final ones (the binaries `crdgen` and
        // `scaffold-ci-operator`) apart, so they do not replace the workspace's `crdgen`.
        .env("CARGO_BUILD_BUILD_DIR", &build_dir)
        .env("CARGO_TARGET_DIR", build_dir.join("scaffold-ci"))
        .output()
        .expect("running cargo test in the generated project");
    eprintln!(
        "the generated project's `cargo test` took {:.0?}",
        started.elapsed()
    );
    succeeds(&test);
    let stdout = String::from_utf8_lossy(&test.stdout);
    for test in [
        "database::database_should_own_a_config_map_and_become_ready ... ok",
        "web_cache::web_cache_should_own_a_config_map_and_become_ready ... ok",
        "manifests::deploy_manifests_should_be_up_to_date ... ok",
    ] {
        assert!(stdout.contains(test), "{test} did not pass:\n{stdout}");
    }

    // The first test run wrote the manifests, for both kinds.
    let crds = std::fs::read_to_string(project.join("deploy/crds.yaml")).expect("deploy/crds.yaml");
    for crd in [
        "name: databases.ci.kubeforge.dev",
        "name: webcaches.ci.kubeforge.dev",
        "scope: Namespaced",
        "scope: Cluster",
    ] {
        assert!(
            crds.contains(crd),
            "{crd} missing from deploy/crds.yaml:\n{crds}"
        );
    }
    let operator = std::fs::read_to_string(project.join("deploy/operator.yaml"))
        .expect("deploy/operator.yaml");
    for expected in [
        "kind: Deployment",
        "image: scaffold-ci-operator:latest",
        "- databases",
        "- webcaches",
    ] {
        assert!(operator.contains(expected), "{expected}:\n{operator}");
    }

    // The compatibility gate: the CRDs released, a bound tightened: `cargo test --lib` fails
    // naming the field and the rule, and passes once the break is accepted with a reason.
    std::fs::create_dir_all(project.join("deploy/released")).unwrap();
    std::fs::copy(
        project.join("deploy/crds.yaml"),
        project.join("deploy/released/crds.yaml"),
    )
    .unwrap();
    let kind = project.join("src/database.rs");
    let source = std::fs::read_to_string(&kind).unwrap();
    assert!(source.contains("max_length = 1024"), "{source}");
    std::fs::write(
        &kind,
        source.replace("max_length = 1024", "max_length = 512"),
    )
    .unwrap();
    let lib_tests = || {
        Command::new(&cargo)
            .current_dir(&project)
            .args(["test", "--lib", "--color", "never"])
            .env("UPDATE_MANIFESTS", "1")
            .env("CARGO_BUILD_BUILD_DIR", &build_dir)
            .env("CARGO_TARGET_DIR", build_dir.join("scaffold-ci"))
            .output()
            .expect("running cargo test --lib in the generated project")
    };
    let broken = lib_tests();
    let report = text(&broken);
    assert!(!broken.status.success(), "{report}");
    for expected in [
        "crds_should_stay_compatible_with_the_last_release ... FAILED",
        "breaking: databases.ci.kubeforge.dev v1 spec.message: max-length-tightened",
    ] {
        assert!(report.contains(expected), "{expected}:\n{report}");
    }
    std::fs::write(
        project.join("deploy/compat-accept.yaml"),
        "- crd: databases.ci.kubeforge.dev\n  rule: max-length-tightened\n  \
         reason: longer messages were never delivered\n",
    )
    .unwrap();
    succeeds(&lib_tests());

    // What the generator wrote is formatted as `cargo fmt` would (when rustfmt is installed).
    let fmt = Command::new(&cargo)
        .current_dir(&project)
        .args(["fmt", "--check"])
        .output()
        .expect("running cargo fmt");
    let no_rustfmt = String::from_utf8_lossy(&fmt.stderr).contains("not installed");
    assert!(fmt.status.success() || no_rustfmt, "{}", text(&fmt));
}

#[test]
fn misuse_should_be_refused_clearly_and_write_nothing() {
    let scratch = Scratch::new("misuse");
    let dir = &scratch.0;
    let init = |args: &[&str]| {
        let mut all = vec!["init"];
        all.extend(args);
        generate(dir, &all)
    };
    let valid = ["--group", "example.com", "--kind", "Database"];

    fails_saying(
        &init(&["op", "--group", "example.com", "--kind", "database"]),
        "invalid kind `database`: a kind is UpperCamelCase",
    );
    fails_saying(
        &init(&["op", "--group", "example", "--kind", "Database"]),
        "invalid group `example`: an API group is a DNS subdomain with at least one dot",
    );
    fails_saying(
        &init(&[
            "op",
            "--group",
            "example.com",
            "--kind",
            "Database",
            "--version",
            "1",
        ]),
        "invalid version `1`",
    );
    fails_saying(
        &init(&["op", "--group", "example.com", "--kind", "ConfigMap"]),
        "invalid kind `ConfigMap`: the generated code uses a type or value of that name",
    );
    let mut named = vec!["Op_Dir"];
    named.extend(valid);
    fails_saying(&init(&named), "(the name comes from the directory's)");
    let mut bad_source = vec!["op"];
    bad_source.extend(valid);
    bad_source.extend(["--kubeforge", "/nonexistent/kubeforge"]);
    fails_saying(&init(&bad_source), "neither a directory");
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        0,
        "nothing is written on bad input"
    );

    // Not in a project: a directory without Cargo.toml above it, and a crate that `init` did
    // not generate.
    fails_saying(
        &generate(dir, &["create", "api", "--kind", "Cache"]),
        "is not inside a Cargo project",
    );
    fails_saying(
        &generate(workspace(), &["create", "api", "--kind", "Cache"]),
        "is not a project that `cargo kubeforge init` generated",
    );

    let mut op = vec!["op"];
    op.extend(valid);
    succeeds(&init(&op));
    fails_saying(&init(&op), "exists and is not empty");
    let project = dir.join("op");
    fails_saying(
        &generate(&project, &["create", "api", "--kind", "Database"]),
        "the kind `Database` exists in this project: src/database.rs is there already",
    );

    // A removed marker line: refused before anything is written.
    let main = project.join("src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    let without_marker: String = source
        .lines()
        .filter(|l| !l.contains("// kubeforge:controllers"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&main, without_marker).unwrap();
    fails_saying(
        &generate(&project, &["create", "api", "--kind", "Cache"]),
        "no `// kubeforge:controllers` line",
    );
    assert!(!project.join("src/cache.rs").exists());
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
    assert!(!lib.contains("pub mod cache;"), "{lib}");
}
