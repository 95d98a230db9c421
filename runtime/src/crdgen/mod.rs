//! `crdgen`: prints, writes or checks the CRDs of every kind linked into the binary, and the
//! RBAC and deploy manifests of every controller.
//!
//! Add a one-line binary to the crate that defines your kinds:
//!
//! ```no_run
//! // src/bin/crdgen.rs
//! fn main() -> std::process::ExitCode { kubeforge::crdgen::main!() }
//! ```
//!
//! | command | effect |
//! |---|---|
//! | `crdgen` | every CRD as multi-document YAML on stdout, sorted by name, byte-stable |
//! | `crdgen --out DIR` | one file per CRD, `DIR/<name>.yaml` |
//! | `crdgen --check DIR` | exit code 1 and a diff when a file in `DIR` is missing or out of date |
//! | `crdgen --compat PREVIOUS` | the current CRDs against the released ones (a file or a directory, as `--out` writes), per CRD and version ([`crate::crd::compat`]); exit code 1 on a breaking or needs-review change not accepted (`--accept FILE`, each entry with a reason); `--format json` for machines |
//! | `crdgen --rbac` | the ClusterRole with the rules every `#[controller]` needs and the Leases of leader election and shard membership, named after the operator |
//! | `crdgen --deploy --image IMAGE` | what a deploy needs besides the CRDs: Namespace, ServiceAccount, ClusterRole and binding, a Role and binding for the leader-election Lease, a Deployment (probes, metrics port, resource requests, restricted security context) and a metrics Service |
//! | `crdgen --all` | the CRDs, then the ClusterRole (with `--deploy`: the CRDs, then the deploy manifests) |
//!
//! Options: `--name NAME` (the operator's name; [`main!`] passes the crate's name),
//! `--namespace NS` (where it runs; default: its name), `--watch-namespace NS[,NS..]` (it watches
//! only those namespaces: its rules become a Role in each, and a ClusterRole only for
//! cluster-scoped kinds).
//!
//! Versions of one kind (several `#[custom_resource]` structs with the same group and kind) are
//! merged into one CRD; exactly one of them must be the storage version. When they differ in
//! shape the CRD always carries its conversion webhook (the Service `--deploy` prints,
//! `<name>-webhook` in `--namespace`; a locally run operator points it at itself), so no
//! output of `crdgen` can be applied without it; versions that differ in shape without a
//! `conversion(hub = ..)` are an error.
//!
//! Kinds with `admission_rule(..)`s add their `ValidatingAdmissionPolicy` and binding
//! ([`crd::admission_policies`](crate::crd::admission_policies)) after the CRDs, wherever the
//! CRDs go (`--out` writes `DIR/<plural>.<group>.policy.yaml`): they belong to the kind and are
//! applied with it; the operator needs no RBAC for them.
//!
//! Every RBAC output (`--rbac`, `--all`, `--deploy`) grants what the operator does, its webhook
//! server included ([`rbac::webhook_rules`](crate::rbac::webhook_rules)).

mod compat;
mod deploy;

pub use compat::{read_accept, read_crds};
pub use deploy::{DeployOptions, manifests};

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::crd::{MergeError, crds};

/// What can go wrong in `crdgen`.
#[derive(Debug, thiserror::Error)]
pub enum CrdgenError {
    /// The command line is not understood (its text ends with the [`usage`]).
    #[error("{0}\n\n{usage}", usage = usage())]
    Usage(String),
    /// Versions of a kind cannot be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// Two versions of a kind declare admission rules.
    #[error(transparent)]
    Policy(#[from] crate::crd::PolicyError),
    /// The versions of a kind differ in shape and none converts.
    #[error(
        "CRD {crd}: its versions differ in shape, so the apiserver cannot convert between them \
         without dropping fields; give the versions that are not the storage version \
         `conversion(hub = ..)`"
    )]
    Unconverted {
        /// The CRD's name.
        crd: String,
    },
    /// A CRD does not serialize to YAML.
    #[error("serializing {name} to YAML: {source}")]
    Yaml {
        /// The CRD's name.
        name: String,
        /// The serializer's error.
        source: serde_norway::Error,
    },
    /// A file read by `--compat` (the released CRDs, the accept list) is not what it should be.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where in the file.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The YAML of one CRD, with `apiVersion` and `kind` first.
///
/// # Errors
///
/// [`CrdgenError::Yaml`] if the CRD does not serialize.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdgenError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    // `CustomResourceDefinition` serializes apiVersion and kind itself, first.
    serde_norway::to_string(crd).map_err(|source| CrdgenError::Yaml { name, source })
}

/// All registered CRDs, merged and sorted, as `(file name, YAML)`, for the operator
/// [`CLUSTER_ROLE`] in its namespace of the same name (see [`render_for`]).
///
/// # Errors
///
/// As [`render_for`].
pub fn render() -> Result<Vec<(String, String)>, CrdgenError> {
    render_for(CLUSTER_ROLE, CLUSTER_ROLE)
}

/// All registered CRDs, merged and sorted, as `(file name, YAML)`, for the operator `name`
/// running in `namespace`: a CRD whose versions convert carries the conversion webhook at the
/// Service `crdgen --deploy` prints (`<name>-webhook` in `namespace`); a locally run operator
/// points it at itself when it starts. Nothing the apiserver could apply converts lossily.
///
/// # Errors
///
/// [`CrdgenError::Merge`] if the versions of a kind disagree, [`CrdgenError::Unconverted`] if
/// they differ in shape and none declares `conversion(hub = ..)`, [`CrdgenError::Yaml`] if a CRD
/// does not serialize.
pub fn render_for(name: &str, namespace: &str) -> Result<Vec<(String, String)>, CrdgenError> {
    let mut files = crds_for(name, namespace)?
        .iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            Ok((format!("{name}.yaml"), to_yaml(crd)?))
        })
        .collect::<Result<Vec<_>, CrdgenError>>()?;
    files.extend(policy_files()?);
    Ok(files)
}

/// The admission policies of the kinds with `admission_rule(..)`s, after the CRDs: one file
/// `<plural>.<group>.policy.yaml` per kind with the policy and its binding.
fn policy_files() -> Result<Vec<(String, String)>, CrdgenError> {
    crate::crd::admission_policies()?
        .iter()
        .map(|p| {
            let error = |source| CrdgenError::Yaml {
                name: p.name().to_owned(),
                source,
            };
            let policy = serde_norway::to_string(&p.policy).map_err(error)?;
            let binding = serde_norway::to_string(&p.binding).map_err(error)?;
            let text = format!("{policy}---\n{binding}");
            Ok((format!("{}.policy.yaml", p.name()), text))
        })
        .collect()
}

/// The CRDs of [`render_for`].
///
/// # Errors
///
/// As [`render_for`], but for serializing.
pub fn crds_for(name: &str, namespace: &str) -> Result<Vec<CustomResourceDefinition>, CrdgenError> {
    let conversions = crate::webhook::registered_conversions();
    let configurations = crate::webhook::Configurations {
        name: name.to_owned(),
        endpoint: crate::webhook::Endpoint::Service {
            namespace: namespace.to_owned(),
            name: format!("{name}-webhook"),
            port: 443,
        },
        namespace_selector: None,
        ca_bundle: None,
    };
    let mut out = crds()?;
    for crd in &mut out {
        let converts = conversions
            .iter()
            .find(|c| c.hub.group == crd.spec.group && c.hub.plural == crd.spec.names.plural);
        match converts {
            Some(kind) => {
                // The admission API's client config and the CRD's have the same fields.
                let client_config =
                    serde_json::to_value(configurations.client_config(&kind.path()))
                        .and_then(serde_json::from_value)
                        .unwrap_or_default();
                crd.spec.conversion =
                    Some(crate::crd::conversion::webhook_conversion(client_config));
            }
            None if crd.spec.conversion.is_some() => {
                return Err(CrdgenError::Unconverted {
                    crd: crd.metadata.name.clone().unwrap_or_default(),
                });
            }
            None => {}
        }
    }
    Ok(out)
}

/// What `crdgen` should do.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Print,
    Out(PathBuf),
    Check(PathBuf),
    Compat(PathBuf),
    Rbac,
    All,
    Deploy,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    /// `--help`: print the [`usage`].
    Help,
    /// Generate.
    Run(Args),
}

/// The command line: a mode and the deploy options.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    mode: Mode,
    /// `--all` with `--deploy`: the CRDs and the deploy manifests.
    all: bool,
    name: Option<String>,
    image: Option<String>,
    namespace: Option<String>,
    watch_namespace: Option<String>,
    /// `--format` of `--compat`.
    format: Option<compat::Format>,
    /// `--accept FILE` of `--compat`.
    accept: Option<PathBuf>,
}

/// The name of the ClusterRole `crdgen --rbac` prints when it is not told the operator's name.
pub const CLUSTER_ROLE: &str = "kubeforge-manager";

/// The ClusterRole of every registered controller, named `name`, as YAML.
///
/// # Errors
///
/// [`CrdgenError::Yaml`] if it does not serialize.
pub fn rbac_yaml_named(name: &str) -> Result<String, CrdgenError> {
    let role = crate::rbac::cluster_role(name);
    serde_norway::to_string(&role).map_err(|source| CrdgenError::Yaml {
        name: name.to_owned(),
        source,
    })
}

/// [`rbac_yaml_named`] with the name [`CLUSTER_ROLE`].
///
/// # Errors
///
/// [`CrdgenError::Yaml`] if it does not serialize.
pub fn rbac_yaml() -> Result<String, CrdgenError> {
    rbac_yaml_named(CLUSTER_ROLE)
}

/// What `crdgen` does, first in its [`usage`].
const ABOUT: &str = "crdgen: prints, writes or checks the CRDs of every kind linked into this \
                     binary, and the RBAC and deploy manifests of its controllers.";

/// One line of crdgen's [`usage`] (and of the book's `crdgen` reference): what is typed, and
/// what it does.
pub(crate) struct Line {
    /// As typed, such as `--out DIR`.
    pub(crate) usage: &'static str,
    /// What it does.
    pub(crate) help: &'static str,
}

impl Line {
    /// [`Line::usage`], or `(no mode)` for the default mode.
    pub(crate) fn typed(&self) -> &'static str {
        if self.usage.is_empty() {
            "(no mode)"
        } else {
            self.usage
        }
    }
}

/// The modes, at most one per run (`--all` also goes with `--deploy`).
pub(crate) const MODES: &[Line] = &[
    Line {
        usage: "",
        help: "every CRD as multi-document YAML on stdout, sorted by name, byte-stable",
    },
    Line {
        usage: "--out DIR",
        help: "one file per CRD, DIR/<name>.yaml",
    },
    Line {
        usage: "--check DIR",
        help: "exit status 1 and a diff when a file in DIR is missing or out of date",
    },
    Line {
        usage: "--compat PREVIOUS",
        help: "compare the CRDs with the released ones in PREVIOUS (a YAML file or a directory \
               as --out writes it), per CRD and version: each finding breaking, needs-review, \
               needs-migration or safe, with its path and rule; exit status 1 on a breaking or \
               needs-review one not accepted",
    },
    Line {
        usage: "--rbac",
        help: "the ClusterRole with the rules every controller, the webhook server and the \
               Leases (leader election, shard membership) need, named after the operator",
    },
    Line {
        usage: "--deploy --image IMAGE",
        help: "what a deploy needs besides the CRDs: Namespace, ServiceAccount, ClusterRole and \
               binding, a Role and binding for the leader-election Lease, a Deployment and a \
               metrics Service",
    },
    Line {
        usage: "--all",
        help: "the CRDs, then the ClusterRole; with --deploy: the CRDs, then the deploy manifests",
    },
];

/// The options, with any mode.
pub(crate) const OPTIONS: &[Line] = &[
    Line {
        usage: "--name NAME",
        help: "the operator's name: names the ClusterRole, the deploy objects and the \
               conversion webhook's Service (default: the crate's name)",
    },
    Line {
        usage: "--namespace NS",
        help: "the namespace the operator runs in (default: its name)",
    },
    Line {
        usage: "--watch-namespace NS",
        help: "the operator watches only NS (comma-separated: a set): its rules become a Role in \
               each, and a ClusterRole only for cluster-scoped kinds",
    },
    Line {
        usage: "--format FORMAT",
        help: "with --compat: text (the default: one line per finding, then a summary) or json \
               (an array of findings)",
    },
    Line {
        usage: "--accept FILE",
        help: "with --compat: the deliberate breaks, a YAML list of entries with crd, rule, \
               reason (required) and optionally version and path; accepted findings do not fail, \
               entries that match nothing are reported as stale",
    },
    Line {
        usage: "-h, --help",
        help: "print this help and exit",
    },
];

/// What crdgen's exit status says.
pub(crate) const EXIT_STATUS: &str = "0 on success, 1 when --check finds a file missing or out \
                                      of date or --compat a breaking or needs-review change not \
                                      accepted (needs-review: kubeforge cannot decide, such as two \
                                      regular expressions; review it and accept it with the \
                                      reason; needs-migration findings alone exit 0, printed with \
                                      a closing NEEDS MIGRATION line), 2 on a bad command line or \
                                      an error";

/// The text `crdgen --help` prints: every mode and option, one line each; a bad command line
/// prints it after the complaint.
#[must_use]
pub fn usage() -> String {
    let width = MODES
        .iter()
        .chain(OPTIONS)
        .map(|line| line.typed().len())
        .max()
        .unwrap_or(0);
    let mut text = format!("{ABOUT}\n\nUsage: crdgen [MODE] [OPTIONS]\n");
    for (title, lines) in [("Modes (at most one)", MODES), ("Options", OPTIONS)] {
        let _ = writeln!(text, "\n{title}:");
        for line in lines {
            let _ = writeln!(text, "  {:<width$}  {}", line.typed(), line.help);
        }
    }
    let _ = writeln!(text, "\nExit status: {EXIT_STATUS}.");
    text
}

fn parse_args(args: &[String]) -> Result<Command, CrdgenError> {
    let usage = |m: String| Err(CrdgenError::Usage(m));
    let mut parsed = Args {
        mode: Mode::Print,
        all: false,
        name: None,
        image: None,
        namespace: None,
        watch_namespace: None,
        format: None,
        accept: None,
    };
    let mut modes = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let mut value = || -> Result<String, CrdgenError> {
            match inline.clone().or_else(|| rest.next().cloned()) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(CrdgenError::Usage(format!("{flag} needs a value"))),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--out" => modes.push(Mode::Out(value()?.into())),
            "--check" => modes.push(Mode::Check(value()?.into())),
            "--compat" => modes.push(Mode::Compat(value()?.into())),
            "--format" => parsed.format = Some(compat::Format::parse(&value()?)?),
            "--accept" => parsed.accept = Some(value()?.into()),
            "--rbac" => modes.push(Mode::Rbac),
            "--deploy" => modes.push(Mode::Deploy),
            "--all" => parsed.all = true,
            "--name" => parsed.name = Some(value()?),
            "--image" => parsed.image = Some(value()?),
            "--namespace" => parsed.namespace = Some(value()?),
            "--watch-namespace" => parsed.watch_namespace = Some(value()?),
            other => return usage(format!("unexpected argument: {other}")),
        }
    }
    parsed.mode = match (modes.len(), parsed.all) {
        (0, false) => Mode::Print,
        (0, true) => Mode::All,
        (1, _) => modes.remove(0),
        _ => return usage("choose one of --out, --check, --compat, --rbac, --deploy".to_owned()),
    };
    let compat_options = parsed.format.is_some() || parsed.accept.is_some();
    if compat_options && !matches!(parsed.mode, Mode::Compat(_)) {
        return usage("--format and --accept go with --compat".to_owned());
    }
    if parsed.all && !matches!(parsed.mode, Mode::All | Mode::Deploy) {
        return usage("--all goes alone or with --deploy".to_owned());
    }
    if parsed.mode == Mode::Deploy && parsed.image.is_none() {
        return usage("--deploy needs --image IMAGE".to_owned());
    }
    Ok(Command::Run(parsed))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CrdgenError + '_ {
    move |source| CrdgenError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A unified diff of `old` → `new` (empty when equal).
#[must_use]
pub fn diff(name: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

/// Runs crdgen with `args` (without the program name), writing to `out`; returns whether the
/// check passed (always `true` for printing and writing). The operator's name is `--name`, else
/// `default_name`, else [`CLUSTER_ROLE`].
///
/// # Errors
///
/// [`CrdgenError`] on bad arguments, unmergeable versions and I/O errors.
pub fn run_named(
    args: &[String],
    default_name: Option<&str>,
    out: &mut String,
) -> Result<bool, CrdgenError> {
    let args = match parse_args(args)? {
        Command::Help => {
            out.push_str(&usage());
            return Ok(true);
        }
        Command::Run(args) => args,
    };
    let name = args
        .name
        .clone()
        .or_else(|| default_name.map(str::to_owned))
        .unwrap_or_else(|| CLUSTER_ROLE.to_owned());
    let namespace = args.namespace.clone().unwrap_or_else(|| name.clone());
    if let Mode::Compat(previous) = &args.mode {
        let current = crds_for(&name, &namespace)?;
        let format = args.format.unwrap_or_default();
        return compat::run(previous, args.accept.as_deref(), format, &current, out);
    }
    let files = render_for(&name, &namespace)?;
    let crds = |out: &mut String| {
        for (_, yaml) in &files {
            out.push_str("---\n");
            out.push_str(yaml);
        }
    };
    match args.mode {
        Mode::Rbac => {
            out.push_str("---\n");
            out.push_str(&rbac_yaml_named(&name)?);
            Ok(true)
        }
        Mode::All => {
            crds(out);
            out.push_str("---\n");
            out.push_str(&rbac_yaml_named(&name)?);
            Ok(true)
        }
        Mode::Deploy => {
            if args.all {
                crds(out);
            }
            let options = DeployOptions {
                namespace,
                name,
                image: args.image.clone().unwrap_or_default(),
                watch_namespace: args.watch_namespace.clone(),
            };
            for manifest in manifests(&options) {
                let yaml =
                    serde_norway::to_string(&manifest).map_err(|source| CrdgenError::Yaml {
                        name: manifest["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        source,
                    })?;
                out.push_str("---\n");
                out.push_str(&yaml);
            }
            Ok(true)
        }
        Mode::Print => {
            crds(out);
            Ok(true)
        }
        Mode::Out(dir) => {
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            for (name, yaml) in &files {
                let path = dir.join(name);
                std::fs::write(&path, yaml).map_err(io(&path))?;
                let _ = writeln!(out, "wrote {}", path.display());
            }
            Ok(true)
        }
        Mode::Check(dir) => check(&dir, &files, out),
        // Answered above, before rendering.
        Mode::Compat(_) => Ok(true),
    }
}

/// `crdgen --check DIR`: whether every file of `files` in `dir` is current; a diff per stale
/// one, and what to run, in `out`.
fn check(dir: &Path, files: &[(String, String)], out: &mut String) -> Result<bool, CrdgenError> {
    let mut ok = true;
    for (name, yaml) in files {
        let path = dir.join(name);
        let current = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(&path)(e)),
        };
        let d = diff(name, &current, yaml);
        if !d.is_empty() {
            ok = false;
            out.push_str(&d);
        }
    }
    if !ok {
        let _ = writeln!(
            out,
            "CRDs in {} are out of date; run crdgen --out {}",
            dir.display(),
            dir.display()
        );
    }
    Ok(ok)
}

/// [`run_named`] without a default name.
///
/// # Errors
///
/// As [`run_named`].
pub fn run(args: &[String], out: &mut String) -> Result<bool, CrdgenError> {
    run_named(args, None, out)
}

/// The whole `crdgen` binary for the operator `name` (what [`main!`] calls with the crate's
/// name): reads `std::env::args`, prints to stdout, errors to stderr.
#[must_use]
pub fn main_named(name: &str) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = String::new();
    let result = run_named(&args, Some(name), &mut out);
    print!("{out}");
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::from(2)
        }
    }
}

/// The whole `crdgen` binary without the operator's name (`--name`, else
/// [`CLUSTER_ROLE`]); prefer [`main!`], which names it after the crate.
#[must_use]
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = String::new();
    let result = run(&args, &mut out);
    print!("{out}");
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::from(2)
        }
    }
}

#[doc(hidden)]
#[macro_export]
macro_rules! __kubeforge_crdgen_main {
    () => {
        $crate::crdgen::main_named(::core::env!("CARGO_PKG_NAME"))
    };
}

/// The whole `crdgen` binary, for the operator named after the calling crate
/// (`CARGO_PKG_NAME`): `fn main() -> ExitCode { kubeforge::crdgen::main!() }`.
pub use crate::__kubeforge_crdgen_main as main;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parse_args_should_accept_the_modes_and_the_deploy_options() {
        let mode = |a: &[&str]| match parse_args(&args(a)) {
            Ok(Command::Run(parsed)) => Some(parsed.mode),
            _ => None,
        };
        assert_eq!(mode(&[]), Some(Mode::Print));
        assert_eq!(mode(&["--out", "d"]), Some(Mode::Out("d".into())));
        assert_eq!(mode(&["--check=d"]), Some(Mode::Check("d".into())));
        assert_eq!(mode(&["--all"]), Some(Mode::All));
        assert!(parse_args(&args(&["--nope"])).is_err());
        assert!(parse_args(&args(&["--deploy"])).is_err(), "needs an image");
        assert!(parse_args(&args(&["--rbac", "--deploy", "--image", "i"])).is_err());
        let deploy = parse_args(&args(&[
            "--deploy",
            "--all",
            "--image",
            "i:1",
            "--name=op",
            "--watch-namespace",
            "shop",
        ]))
        .ok();
        assert_eq!(
            deploy,
            Some(Command::Run(Args {
                mode: Mode::Deploy,
                all: true,
                name: Some("op".into()),
                image: Some("i:1".into()),
                namespace: None,
                watch_namespace: Some("shop".into()),
                format: None,
                accept: None,
            }))
        );
    }

    /// Issue 33, item 4: `crdgen --help` said "unexpected argument: --help" and exited 2.
    #[test]
    fn help_should_print_every_mode_and_option_and_succeed() {
        for help in [&["--help"][..], &["-h"], &["--out", "d", "--help"]] {
            let mut out = String::new();
            assert!(run(&args(help), &mut out).unwrap(), "{help:?}");
            assert_eq!(out, usage(), "{help:?}");
        }
        let usage = usage();
        assert!(usage.starts_with("crdgen: "), "{usage}");
        for line in MODES.iter().chain(OPTIONS) {
            let shown = format!("  {:<22}  {}\n", line.typed(), line.help);
            assert!(usage.contains(&shown), "{shown:?} in\n{usage}");
        }
    }

    #[test]
    fn a_bad_command_line_should_say_what_is_wrong_then_the_usage() {
        let error = run(&args(&["--nope"]), &mut String::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("unexpected argument: --nope\n\n{}", usage())
        );
    }

    /// The book's `crdgen` reference, from the lines `--help` prints.
    fn reference() -> String {
        let escape = crate::text::table_cell;
        let mut page = String::from(
            "<!-- generated by kubeforge's crdgen::tests::reference_page_should_be_current \
             (runtime/src/crdgen/mod.rs); do not edit -->\n\
             # `crdgen`\n\n\
             `crdgen` prints, writes or checks the CRDs of every kind linked into the binary, and \
             the RBAC and deploy manifests of its controllers. It is a one-line binary in the \
             crate that defines your kinds, `src/bin/crdgen.rs`:\n\n\
             ```rust,no_run\n\
             fn main() -> std::process::ExitCode { kubeforge::crdgen::main!() }\n\
             ```\n\n\
             Run it with `cargo run --bin crdgen -- [MODE] [OPTIONS]`; `--help` prints the lists \
             below.\n",
        );
        let sections = [
            (
                "Modes",
                "At most one; `--all` also goes with `--deploy`.",
                "mode",
                MODES,
            ),
            ("Options", "With any mode.", "option", OPTIONS),
        ];
        for (title, intro, column, lines) in sections {
            let _ = write!(
                page,
                "\n## {title}\n\n{intro}\n\n| {column} | effect |\n|---|---|\n"
            );
            for line in lines {
                let typed = match line.usage {
                    "" => "*(none)*".to_owned(),
                    usage => format!("`{usage}`"),
                };
                let _ = writeln!(page, "| {typed} | {} |", escape(line.help));
            }
        }
        let _ = writeln!(page, "\n## Exit status\n\n{}.", escape(EXIT_STATUS));
        page
    }

    #[test]
    fn reference_page_should_be_current() {
        crate::text::check_generated(
            "docs/src/reference/crdgen.md",
            &reference(),
            "crdgen::tests::reference_page_should_be_current",
        );
    }

    /// `--compat` through the entry point: the exit status (`Ok(false)` is 1, an error 2), the
    /// accept list, stale entries and the JSON format.
    #[test]
    fn compat_should_fail_on_a_breaking_change_unless_it_is_accepted() {
        let dir =
            std::env::temp_dir().join(format!("kubeforge-crdgen-compat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A released CRD that this binary no longer generates.
        let released = dir.join("gones.example.dev.yaml");
        std::fs::write(
            &released,
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
             name: gones.example.dev\nspec:\n  group: example.dev\n  names:\n    kind: Gone\n    \
             plural: gones\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    \
             storage: true\n",
        )
        .unwrap();
        let previous = released.to_string_lossy().into_owned();
        let compat = |extra: &[&str], out: &mut String| {
            let mut all = args(&["--compat", &previous]);
            all.extend(args(extra));
            run(&all, out)
        };

        let mut out = String::new();
        assert!(!compat(&[], &mut out).unwrap(), "{out}");
        assert!(
            out.starts_with("breaking: gones.example.dev <crd>: crd-removed: "),
            "{out}"
        );
        assert!(out.contains("\nFAILED: 1 breaking change(s)"), "{out}");

        let mut out = String::new();
        assert!(!compat(&["--format", "json"], &mut out).unwrap());
        let findings: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(findings[0]["class"], "breaking");
        assert_eq!(findings[0]["rule"], "crd-removed");
        assert_eq!(findings[0]["crd"], "gones.example.dev");

        let accept = dir.join("accept.yaml");
        std::fs::write(
            &accept,
            "- crd: gones.example.dev\n  rule: crd-removed\n  reason: replaced by Went in 2.0\n\
             - crd: gones.example.dev\n  version: v1\n  rule: field-removed\n  reason: old\n",
        )
        .unwrap();
        let accept = accept.to_string_lossy().into_owned();
        let mut out = String::new();
        assert!(compat(&["--accept", &accept], &mut out).unwrap(), "{out}");
        assert!(
            out.starts_with(
                "accepted breaking: gones.example.dev <crd>: crd-removed: the CRD is no longer"
            ),
            "{out}"
        );
        assert!(out.contains("[reason: replaced by Went in 2.0]"), "{out}");
        assert!(
            out.contains("\nstale: gones.example.dev *: the accept list's entry for field-removed"),
            "{out}"
        );
        assert!(!out.contains("FAILED"), "{out}");
        let mut out = String::new();
        assert!(compat(&["--accept", &accept, "--format=json"], &mut out).unwrap());
        let findings: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(findings[0]["accepted"], "replaced by Went in 2.0");
        assert_eq!(
            findings.as_array().unwrap().last().unwrap()["rule"],
            "stale-acceptance"
        );

        // Errors (exit status 2): an entry without a reason, a bad format, options without
        // --compat, nothing to compare with.
        std::fs::write(&accept, "- crd: gones.example.dev\n  rule: crd-removed\n").unwrap();
        let error = compat(&["--accept", &accept], &mut String::new()).unwrap_err();
        assert!(
            error.to_string().contains("a reason is required"),
            "{error}"
        );
        assert!(matches!(
            compat(&["--format", "xml"], &mut String::new()),
            Err(CrdgenError::Usage(_))
        ));
        let error = run(&args(&["--accept", &accept]), &mut String::new()).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("--format and --accept go with --compat"),
            "{error}"
        );
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let error = run(
            &args(&["--compat", &empty.to_string_lossy()]),
            &mut String::new(),
        );
        assert!(
            matches!(error, Err(CrdgenError::Invalid { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn diff_should_be_empty_for_equal_texts_and_unified_otherwise() {
        assert_eq!(diff("x", "a\n", "a\n"), "");
        let d = diff("x.yaml", "a\nb\n", "a\nc\n");
        assert!(d.contains("-b\n") && d.contains("+c\n"), "{d}");
    }
}
