//! `cargo kubeforge`: `init` creates a new operator project on kubeforge, `create api` adds a
//! kind and its controller to it. Install with `cargo install --path scaffold`, or run from the
//! repository with `cargo run -p kubeforge-scaffold -- init ...`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kubeforge_scaffold::{ApiOptions, Generated, InitOptions, Scope, create_api, init};

/// Creates kubeforge operator projects and adds kinds to them.
#[derive(Parser)]
#[command(name = "cargo-kubeforge", bin_name = "cargo kubeforge", version)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Creates a new operator project in DIR: a kind and its controller, the operator and crdgen
    /// binaries, an integration test, a sample, a README.
    Init {
        /// The project's directory (missing or empty).
        dir: PathBuf,
        /// The first kind's API group, a DNS subdomain (`example.com`).
        #[arg(long)]
        group: String,
        /// The first kind, UpperCamelCase (`Database`).
        #[arg(long)]
        kind: String,
        /// The first kind's version (`v1`, `v1beta1`, `v2alpha1`).
        #[arg(long, default_value = "v1")]
        version: String,
        /// The package name, which also names the operator's Kubernetes objects (default: the
        /// directory's name).
        #[arg(long)]
        name: Option<String>,
        /// Where kubeforge comes from: a kubeforge checkout (or its runtime/ directory), or a
        /// registry version (default: the checkout this command was built from).
        #[arg(long, value_name = "PATH_OR_VERSION")]
        kubeforge: Option<String>,
        /// Whether the first kind is `namespaced` or `cluster`-scoped.
        #[arg(long, value_enum, default_value_t = ScopeArg::Namespaced)]
        scope: ScopeArg,
    },
    /// Adds to a generated project.
    #[command(subcommand)]
    Create(Create),
}

#[derive(Subcommand)]
enum Create {
    /// Adds a kind and its controller to the project in the current directory (or above it):
    /// src/<kind>.rs, registered in src/lib.rs and src/main.rs, and its test and sample.
    Api {
        /// The kind, UpperCamelCase (`Cache`).
        #[arg(long)]
        kind: String,
        /// Its API group (default: the project's, from Cargo.toml).
        #[arg(long)]
        group: Option<String>,
        /// Its version (default: the project's, from Cargo.toml).
        #[arg(long)]
        version: Option<String>,
        /// Whether the kind is `namespaced` or `cluster`-scoped.
        #[arg(long, value_enum, default_value_t = ScopeArg::Namespaced)]
        scope: ScopeArg,
    },
}

/// `--scope`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ScopeArg {
    /// Objects live in a namespace.
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

impl From<ScopeArg> for Scope {
    fn from(scope: ScopeArg) -> Self {
        match scope {
            ScopeArg::Namespaced => Scope::Namespaced,
            ScopeArg::Cluster => Scope::Cluster,
        }
    }
}

fn main() -> ExitCode {
    // `cargo kubeforge init` runs `cargo-kubeforge kubeforge init`: drop cargo's extra word.
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "kubeforge") {
        args.remove(1);
    }
    let result = match Cli::parse_from(args).command {
        Top::Init {
            scope,
            dir,
            group,
            kind,
            version,
            name,
            kubeforge,
        } => init(&InitOptions {
            dir,
            group,
            kind: kind.clone(),
            version,
            name,
            kubeforge,
            scope: scope.into(),
        })
        .map(|generated| report_init(&generated, &kind)),
        Top::Create(Create::Api {
            scope,
            kind,
            group,
            version,
        }) => create_api(&ApiOptions {
            dir: PathBuf::from("."),
            kind: kind.clone(),
            group,
            version,
            scope: scope.into(),
        })
        .map(|generated| report_api(&generated, &kind)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn report_init(generated: &Generated, kind: &str) {
    println!(
        "Created a kubeforge operator with the kind {kind} in {}:",
        generated.root.display()
    );
    list_files(generated);
    println!(
        "\nNext (README.md has more):\n  cd {}\n  cargo test    # the tests against the local \
         control plane (started on demand); writes deploy/\n  cargo run -- --help\n  \
         cargo kubeforge create api --kind Another",
        generated.root.display()
    );
}

fn report_api(generated: &Generated, kind: &str) {
    println!(
        "Added the kind {kind} and its controller to {}:",
        generated.root.display()
    );
    list_files(generated);
    println!(
        "\nNext: UPDATE_MANIFESTS=1 cargo test    # deploy/ with the new CRD, and the new test"
    );
}

fn list_files(generated: &Generated) {
    for path in &generated.written {
        println!("  new      {}", path.display());
    }
    for path in &generated.changed {
        println!("  changed  {}", path.display());
    }
    if let Some(why) = &generated.unformatted {
        println!("(not formatted: {why}; run `cargo fmt`)");
    }
}
