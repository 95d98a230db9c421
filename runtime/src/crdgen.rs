//! `crdgen`: prints, writes or checks the CRDs of every kind linked into the binary.
//!
//! Add a one-line binary to the crate that defines your kinds:
//!
//! ```no_run
//! // src/bin/crdgen.rs
//! fn main() -> std::process::ExitCode { kubeforge::crdgen::main() }
//! ```
//!
//! | command | effect |
//! |---|---|
//! | `crdgen` | every CRD as multi-document YAML on stdout, sorted by name, byte-stable |
//! | `crdgen --out DIR` | one file per CRD, `DIR/<name>.yaml` |
//! | `crdgen --check DIR` | exit code 1 and a diff when a file in `DIR` is missing or out of date |
//! | `crdgen --rbac` | the ClusterRole `kubeforge-manager` with the rules every `#[controller]` needs |
//! | `crdgen --all` | the CRDs, then the ClusterRole |
//!
//! Versions of one kind (several `#[custom_resource]` structs with the same group and kind) are
//! merged into one CRD; exactly one of them must be the storage version.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::crd::{MergeError, crds};

/// What can go wrong in `crdgen`.
#[derive(Debug, thiserror::Error)]
pub enum CrdgenError {
    /// The command line is not understood.
    #[error("{0}\nusage: crdgen [--out DIR | --check DIR | --rbac | --all]")]
    Usage(String),
    /// Versions of a kind cannot be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A CRD does not serialize to YAML.
    #[error("serializing {name} to YAML: {source}")]
    Yaml {
        /// The CRD's name.
        name: String,
        /// The serializer's error.
        source: serde_norway::Error,
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

/// All registered CRDs, merged and sorted, as `(file name, YAML)`.
///
/// # Errors
///
/// [`CrdgenError::Merge`] if the versions of a kind disagree, [`CrdgenError::Yaml`] if a CRD
/// does not serialize.
pub fn render() -> Result<Vec<(String, String)>, CrdgenError> {
    crds()?
        .iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            Ok((format!("{name}.yaml"), to_yaml(crd)?))
        })
        .collect()
}

/// What `crdgen` should do.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Print,
    Out(PathBuf),
    Check(PathBuf),
    Rbac,
    All,
}

/// The name of the ClusterRole `crdgen --rbac` prints.
pub const CLUSTER_ROLE: &str = "kubeforge-manager";

/// The ClusterRole of every registered controller, as YAML.
///
/// # Errors
///
/// [`CrdgenError::Yaml`] if it does not serialize.
pub fn rbac_yaml() -> Result<String, CrdgenError> {
    let role = crate::rbac::cluster_role(CLUSTER_ROLE);
    serde_norway::to_string(&role).map_err(|source| CrdgenError::Yaml {
        name: CLUSTER_ROLE.to_owned(),
        source,
    })
}

fn parse_args(args: &[String]) -> Result<Mode, CrdgenError> {
    match args {
        [] => Ok(Mode::Print),
        [flag, dir] if flag == "--out" => Ok(Mode::Out(dir.into())),
        [flag, dir] if flag == "--check" => Ok(Mode::Check(dir.into())),
        [flag] if flag == "--rbac" => Ok(Mode::Rbac),
        [flag] if flag == "--all" => Ok(Mode::All),
        other => Err(CrdgenError::Usage(format!(
            "unexpected arguments: {}",
            other.join(" ")
        ))),
    }
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
/// check passed (always `true` for printing and writing).
///
/// # Errors
///
/// [`CrdgenError`] on bad arguments, unmergeable versions and I/O errors.
pub fn run(args: &[String], out: &mut String) -> Result<bool, CrdgenError> {
    let mode = parse_args(args)?;
    let files = render()?;
    match mode {
        Mode::Rbac => {
            out.push_str("---\n");
            out.push_str(&rbac_yaml()?);
            Ok(true)
        }
        Mode::All => {
            for (_, yaml) in &files {
                out.push_str("---\n");
                out.push_str(yaml);
            }
            out.push_str("---\n");
            out.push_str(&rbac_yaml()?);
            Ok(true)
        }
        Mode::Print => {
            for (_, yaml) in &files {
                out.push_str("---\n");
                out.push_str(yaml);
            }
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
        Mode::Check(dir) => {
            let mut ok = true;
            for (name, yaml) in &files {
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
    }
}

/// The whole `crdgen` binary: reads `std::env::args`, prints to stdout, errors to stderr.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_args_should_accept_the_three_modes() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(parse_args(&args(&[])).ok(), Some(Mode::Print));
        assert_eq!(
            parse_args(&args(&["--out", "d"])).ok(),
            Some(Mode::Out("d".into()))
        );
        assert_eq!(
            parse_args(&args(&["--check", "d"])).ok(),
            Some(Mode::Check("d".into()))
        );
        assert!(parse_args(&args(&["--nope"])).is_err());
    }

    #[test]
    fn diff_should_be_empty_for_equal_texts_and_unified_otherwise() {
        assert_eq!(diff("x", "a\n", "a\n"), "");
        let d = diff("x.yaml", "a\nb\n", "a\nc\n");
        assert!(d.contains("-b\n") && d.contains("+c\n"), "{d}");
    }
}
