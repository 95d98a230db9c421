//! `crdgen --compat PREVIOUS [--format text|json] [--accept FILE]`: the CRDs this binary
//! generates against the released ones (a YAML file or a directory of them, as `--out` writes),
//! judged by [`crate::crd::compat`], with the operator's accept list.
//!
//! Exit status: 1 when a breaking or needs-review finding is not accepted (needs-review: kubeforge
//! cannot decide, so a person must, and records it in the accept list with the reason);
//! `needs-migration` findings alone pass
//! (exit 0) but are printed first after the breaking ones and summed up in a closing line that
//! says to run a storage migration, since they are the normal cost of moving the storage version;
//! stale acceptances (entries that match nothing) are reported and do not fail.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize as _;

use super::CrdgenError;
use crate::crd::compat::{Acceptance, Class, Finding, Judged, Report, compare, judge};

/// How `--compat` prints its findings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Format {
    /// One line per finding, then a summary.
    #[default]
    Text,
    /// A JSON array of findings.
    Json,
}

impl Format {
    /// `text` or `json`.
    pub(crate) fn parse(value: &str) -> Result<Self, CrdgenError> {
        match value {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(CrdgenError::Usage(format!(
                "--format takes text or json, not {other}"
            ))),
        }
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> CrdgenError {
    CrdgenError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn read(path: &Path) -> Result<String, CrdgenError> {
    std::fs::read_to_string(path).map_err(super::io(path))
}

/// The CRDs in `path`: a (multi-document) YAML file, or every `.yaml`/`.yml` file of a directory
/// (not its subdirectories). Documents that are not CRDs (a ClusterRole from `--all`) are skipped.
///
/// # Errors
///
/// [`CrdgenError::Io`] if a file cannot be read, [`CrdgenError::Invalid`] if one is not YAML or
/// holds a CustomResourceDefinition that does not decode.
pub fn read_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>, CrdgenError> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(super::io(path))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|p| p.is_file())
            .filter(|p| (p.extension()).is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut crds = Vec::new();
    for file in files {
        let text = read(&file)?;
        for (i, document) in serde_norway::Deserializer::from_str(&text).enumerate() {
            let value = serde_json::Value::deserialize(document)
                .map_err(|e| invalid(&file, format!("document {}: {e}", i + 1)))?;
            if value.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd = serde_json::from_value(value)
                .map_err(|e| invalid(&file, format!("document {}: {e}", i + 1)))?;
            crds.push(crd);
        }
    }
    Ok(crds)
}

/// An entry of the accept list as written: `reason` is checked, not defaulted.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    crd: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    path: Option<String>,
    rule: String,
    #[serde(default)]
    reason: Option<String>,
}

/// The accept list in `path`: a YAML list of entries with `crd`, `rule` and `reason` and,
/// optionally, `version` and `path` (absent: any).
///
/// ```yaml
/// - crd: webapps.apps.kubeforge.dev
///   version: v1
///   path: spec.replicas
///   rule: field-removed
///   reason: replaced by spec.instances in 2.0, announced in 1.4
/// ```
///
/// # Errors
///
/// [`CrdgenError::Io`] if it cannot be read, [`CrdgenError::Invalid`] if it is not such a list
/// (unknown keys included) or an entry has no reason.
pub fn read_accept(path: &Path) -> Result<Vec<Acceptance>, CrdgenError> {
    let text = read(path)?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let entries: Option<Vec<Entry>> =
        serde_norway::from_str(&text).map_err(|e| invalid(path, e.to_string()))?;
    let mut accepted = Vec::new();
    for (i, entry) in entries.unwrap_or_default().into_iter().enumerate() {
        let reason = entry.reason.unwrap_or_default();
        if reason.trim().is_empty() {
            return Err(invalid(
                path,
                format!(
                    "entry {} ({} {}): a reason is required; say why this break is deliberate",
                    i + 1,
                    entry.crd,
                    entry.rule
                ),
            ));
        }
        accepted.push(Acceptance {
            crd: entry.crd,
            version: entry.version,
            path: entry.path,
            rule: entry.rule,
            reason,
        });
    }
    Ok(accepted)
}

/// `crdgen --compat`: compares `current` with the CRDs in `previous`, applies the accept list,
/// prints the report to `out`; whether the gate passes.
pub(crate) fn run(
    previous: &Path,
    accept: Option<&Path>,
    format: Format,
    current: &[CustomResourceDefinition],
    out: &mut String,
) -> Result<bool, CrdgenError> {
    let released = read_crds(previous)?;
    if released.is_empty() {
        return Err(invalid(previous, "no CustomResourceDefinition found"));
    }
    let accepted = match accept {
        Some(path) => read_accept(path)?,
        None => Vec::new(),
    };
    let report = judge(compare(&released, current), &accepted);
    match format {
        Format::Text => text(previous, &report, out),
        Format::Json => json(&report, out)?,
    }
    Ok(report.passes())
}

/// A stale entry as a finding (`stale-acceptance`, safe), for the JSON array.
fn stale_finding(entry: &Acceptance) -> Finding {
    Finding {
        class: Class::Safe,
        crd: entry.crd.clone(),
        version: entry.version.clone(),
        path: entry.path.clone().unwrap_or_else(|| "*".to_owned()),
        rule: "stale-acceptance",
        message: format!(
            "the accept list's entry for {} matches no finding (reason: {}); remove it",
            entry.rule, entry.reason
        ),
    }
}

/// The JSON array: every finding (with `accepted` holding the reason when accepted), then the
/// stale acceptances as `stale-acceptance` findings.
fn json(report: &Report, out: &mut String) -> Result<(), CrdgenError> {
    let stale = report.stale.iter().map(|entry| Judged {
        finding: stale_finding(entry),
        accepted: None,
    });
    let all: Vec<Judged> = report.findings.iter().cloned().chain(stale).collect();
    let text = serde_json::to_string_pretty(&all).map_err(|e| CrdgenError::Invalid {
        path: PathBuf::from("<stdout>"),
        message: e.to_string(),
    })?;
    out.push_str(&text);
    out.push('\n');
    Ok(())
}

/// One line per finding (accepted ones marked, with their reason), the stale acceptances, a
/// summary and what to do.
fn text(previous: &Path, report: &Report, out: &mut String) {
    for judged in &report.findings {
        match &judged.accepted {
            Some(reason) => {
                let _ = writeln!(out, "accepted {} [reason: {reason}]", judged.finding);
            }
            None => {
                let _ = writeln!(out, "{}", judged.finding);
            }
        }
    }
    for entry in &report.stale {
        let finding = stale_finding(entry);
        let _ = writeln!(
            out,
            "stale: {} {}: {}",
            finding.crd, finding.path, finding.message
        );
    }
    let count = |class| report.open(class).count();
    let (breaking, review, migrations) = (
        count(Class::Breaking),
        count(Class::NeedsReview),
        count(Class::NeedsMigration),
    );
    let accepted = report
        .findings
        .iter()
        .filter(|j| j.accepted.is_some())
        .count();
    let _ = writeln!(
        out,
        "compat against {}: {breaking} breaking, {review} needs-review, {migrations} \
         needs-migration, {} safe, {accepted} accepted, {} stale acceptance(s)",
        previous.display(),
        count(Class::Safe),
        report.stale.len(),
    );
    if migrations > 0 {
        let _ = writeln!(
            out,
            "NEEDS MIGRATION: {migrations} change(s) keep working only after a storage migration \
             (kubeforge::crd::migrate_storage) or through the conversion webhook; plan it before \
             the previous version is dropped"
        );
    }
    if review > 0 {
        let _ = writeln!(
            out,
            "NEEDS REVIEW: {review} change(s) kubeforge cannot judge (two regular expressions); \
             check the values in use, then record each review with its reason in --accept FILE"
        );
    }
    if breaking > 0 {
        let _ = writeln!(
            out,
            "FAILED: {breaking} breaking change(s) against the previous release; fix them, or \
             accept a deliberate one with a reason in --accept FILE"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kubeforge-compat-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn read_accept_should_require_a_reason_and_refuse_unknown_keys() {
        let dir = temp("accept");
        let file = dir.join("accept.yaml");
        std::fs::write(
            &file,
            "- crd: a.example.dev\n  rule: field-removed\n  reason: announced in 1.4\n",
        )
        .unwrap();
        let entries = read_accept(&file).unwrap();
        assert_eq!(entries[0].reason, "announced in 1.4");
        assert_eq!(entries[0].version, None);
        for bad in [
            "- crd: a.example.dev\n  rule: field-removed\n",
            "- crd: a.example.dev\n  rule: field-removed\n  reason: ' '\n",
        ] {
            std::fs::write(&file, bad).unwrap();
            let error = read_accept(&file).unwrap_err().to_string();
            assert!(
                error.contains("entry 1 (a.example.dev field-removed): a reason is required"),
                "{error}"
            );
        }
        std::fs::write(&file, "- crd: a\n  rule: r\n  reasn: typo\n").unwrap();
        let error = read_accept(&file).unwrap_err().to_string();
        assert!(error.contains("reasn"), "{error}");
        std::fs::write(&file, "").unwrap();
        assert_eq!(read_accept(&file).unwrap(), []);
    }

    /// A CRD whose `spec.name` has `pattern`, as YAML.
    fn patterned(pattern: &str) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
             name: as.example.dev\nspec:\n  group: example.dev\n  names:\n    kind: A\n    \
             plural: as\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    \
             storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        \
             properties:\n          name:\n            type: string\n            pattern: \
             '{pattern}'\n"
        )
    }

    #[test]
    fn run_should_fail_on_needs_review_until_the_review_is_accepted() {
        let dir = temp("review");
        let previous = dir.join("as.example.dev.yaml");
        std::fs::write(&previous, patterned("^[a-z]+$")).unwrap();
        let current: Vec<CustomResourceDefinition> =
            vec![serde_norway::from_str(&patterned("^[a-z0-9]+$")).unwrap()];
        let mut out = String::new();
        let passes = run(&previous, None, Format::Text, &current, &mut out).unwrap();
        assert!(!passes, "needs-review must not pass silently: {out}");
        assert!(
            out.starts_with("needs-review: as.example.dev v1 name: pattern-changed: "),
            "{out}"
        );
        assert!(out.contains("0 breaking, 1 needs-review"), "{out}");
        assert!(out.contains("\nNEEDS REVIEW: 1 change(s)"), "{out}");
        let accept = dir.join("accept.yaml");
        std::fs::write(
            &accept,
            "- crd: as.example.dev\n  rule: pattern-changed\n  reason: only widens; names in \
             use checked\n",
        )
        .unwrap();
        let mut out = String::new();
        assert!(
            run(&previous, Some(&accept), Format::Text, &current, &mut out).unwrap(),
            "{out}"
        );
        assert!(!out.contains("NEEDS REVIEW"), "{out}");
        // A loosening it can see is safe.
        let current: Vec<CustomResourceDefinition> =
            vec![serde_norway::from_str(&patterned("[a-z]+")).unwrap()];
        let mut out = String::new();
        assert!(
            run(&previous, None, Format::Text, &current, &mut out).unwrap(),
            "{out}"
        );
        assert!(
            out.starts_with("safe: as.example.dev v1 name: pattern-loosened"),
            "{out}"
        );
    }

    #[test]
    fn read_crds_should_take_a_file_or_a_directory_and_skip_other_kinds() {
        let dir = temp("read");
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                   metadata:\n  name: bs.example.dev\nspec:\n  group: example.dev\n  \
                   names:\n    kind: B\n    plural: bs\n  scope: Namespaced\n  versions: []\n";
        let role =
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n";
        std::fs::write(dir.join("b.yaml"), format!("---\n{crd}---\n{role}")).unwrap();
        std::fs::write(
            dir.join("a.yml"),
            crd.replace("bs", "as").replace("B\n", "A\n"),
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "not yaml: [").unwrap();
        let names = |crds: Vec<CustomResourceDefinition>| -> Vec<String> {
            crds.into_iter().filter_map(|c| c.metadata.name).collect()
        };
        assert_eq!(
            names(read_crds(&dir).unwrap()),
            ["as.example.dev", "bs.example.dev"]
        );
        assert_eq!(
            names(read_crds(&dir.join("b.yaml")).unwrap()),
            ["bs.example.dev"]
        );
        std::fs::write(
            dir.join("c.yaml"),
            "kind: CustomResourceDefinition\nspec: 3\n",
        )
        .unwrap();
        let error = read_crds(&dir).unwrap_err().to_string();
        assert!(error.contains("c.yaml: document 1"), "{error}");
    }
}
