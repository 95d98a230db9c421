//! The compatibility gate (`crdgen --compat`, [`kubeforge::crd::compat`]) checked against the
//! apiserver (issue #48): for each evolution case, the gate's verdict on the two CRDs is compared
//! with what the apiserver then does to objects stored under the old CRD.
//!
//! Each case has its own CRD group (`<case>.<run>.oracle.kubeforge.dev`), so the cases run
//! concurrently. The oracle:
//!
//! 1. applies the old CRD and stores the case's objects (valid under it) through every version it
//!    serves;
//! 2. applies the new CRD (an update the apiserver refuses is an outcome: `scope-changed`; so is
//!    a CRD it does not serve, `NamesAccepted` False: `plural-changed`), or deletes the old one
//!    (`crd-removed`), and waits until every served version serves the new CRD (a printer column
//!    that only the new CRD has shows in a Table);
//! 3. for every object and every served version of the new CRD: reads it (it must hold what was
//!    stored), writes it back unchanged (nothing may be lost, read back through the version it
//!    was created in), creates a copy of what it read, reads `/scale` where the old CRD had it;
//!    creates the original request again (the same values must be stored); then updates a field
//!    through every served version, by a merge patch of the spec and by server-side apply of a
//!    second field manager (with the status; through `/status` where the old version had that
//!    subresource), and checks the update is there and nothing else was lost; finally lists
//!    through every served version (the list's kind).
//!
//! The 90 cases take 47–57 s on the shared plane, 8 at a time, 68 s for two runs at once at a
//! load of 12 on 2 cores (each CRD is served within a second or two; a wait is bounded at 90 s).
//!
//! Observed class: `breaking` when a step was refused or data was lost or changed, else
//! `needs-migration` when `status.storedVersions` still lists a version that is no longer the
//! storage version (the objects work now, but the old version cannot be dropped before a
//! migration), else `safe`. Values the new schema adds (defaults) are not a loss; a stored `null`
//! read back as absent is not a loss (a `null` read back as a value is). The gate's class is the
//! most severe of its findings (`safe` when none); it must equal the observed one, except
//! `needs-review`, which the gate says when it cannot decide (two regexes) and which matches
//! either: those cases show both outcomes.
//!
//! The table of cases and outcomes is `docs/src/reference/compat-oracle.md`, checked against the
//! run (`KUBEFORGE_BLESS=1` rewrites it).

mod cases;
mod steps;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::DeleteParams;
use kube::{Api, Client};
use kubeforge::crd::compat::{Class, Finding, RULES, compare};
use kubeforge::testing::TestNamespace;
use serde_json::Value;

use cases::{Case, cases};
use steps::{Oracle, Shape, apply, delete, instantiate, probed, said, served, store};

/// The domain under which every case's group lives.
const DOMAIN: &str = "oracle.kubeforge.dev";
/// The label on every CRD this suite creates (value: the run), for clean-up by hand.
const LABEL: &str = "kubeforge.dev/compat-oracle";
/// The (rule, class) pairs of [`RULES`] no case covers, and why.
const NOT_COVERED: &[(&str, Class, &str)] = &[(
    "field-removed",
    Class::NeedsMigration,
    "a field removed from a version converted by a webhook: the outcome is the webhook's, which \
     the conversion tests cover (tests/integration/conversion.rs, upgrade.rs)",
)];
/// How many cases run at once.
const CONCURRENCY: usize = 8;
/// The bound of each wait for the apiserver (a CRD served, a CRD gone): generous for a loaded
/// 2-core machine, where a CRD is usually served within a second.
const WAIT: Duration = Duration::from_secs(90);

/// What one case did: the gate's findings and class, what the apiserver did.
struct Row {
    findings: Vec<Finding>,
    gate: Class,
    observed: Class,
    /// What happened, in a few words (the first problem, or what went through).
    what: String,
    problems: Vec<String>,
}

/// Runs one case on the plane, then deletes its CRDs (their objects go with them), whatever
/// happened.
async fn run(case: &Case, client: &Client, ns: &str, run: &str) -> Result<Row, String> {
    let group = format!("{}.{run}.{DOMAIN}", case.name);
    let names: Vec<String> = [&case.old, &case.new]
        .into_iter()
        .flatten()
        .filter_map(|crd| {
            instantiate(crd, &group)["metadata"]["name"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    let row = observe(case, client, ns, run).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        let _ = crds.delete(&name, &DeleteParams::background()).await;
    }
    row
}

/// One case: the gate's verdict, then the oracle's steps.
async fn observe(case: &Case, client: &Client, ns: &str, run: &str) -> Result<Row, String> {
    let context = |what: String| format!("{}: {what}", case.name);
    let group = format!("{}.{run}.{DOMAIN}", case.name);
    let old = case.old.as_ref().map(|c| instantiate(c, &group));
    let new = case.new.as_ref().map(|c| instantiate(c, &group));
    let parse = |v: &Option<Value>| -> Vec<CustomResourceDefinition> {
        (v.iter().map(|v| serde_json::from_value(v.clone()).unwrap())).collect()
    };
    let findings = compare(&parse(&old), &parse(&new));
    let gate = (findings.iter().map(|f| f.class).min()).unwrap_or(Class::Safe);

    // The old CRD and its objects.
    let old_shape = old.as_ref().map(Shape::of);
    let mut stored = Vec::new();
    if let (Some(old), Some(shape)) = (&old, &old_shape) {
        (apply(client, &probed(old, 1), run).await)
            .map_err(|e| context(format!("applying the old CRD: {e}")))?;
        if let Some(refused) = served(client, ns, shape, 1).await? {
            return Err(context(refused));
        }
        stored = store(client, ns, case, shape).await.map_err(context)?;
    }

    // The new CRD: applied, or the old one deleted.
    let mut problems = Vec::new();
    let new_shape = match &new {
        None => {
            let mut gone = old_shape.clone().unwrap();
            delete(client, &gone.name).await.map_err(context)?;
            // Nothing is served any more: the objects are looked for through the old versions.
            for v in &mut gone.versions {
                v.1 = true;
            }
            gone
        }
        Some(new) => {
            let shape = Shape::of(new);
            if let Err(e) = apply(client, &probed(new, 2), run).await {
                let message = match &e {
                    kube::Error::Api(status) => status.message.clone(),
                    other => other.to_string(),
                };
                let refused = format!("the apiserver refuses the new CRD ({})", said(&e));
                problems.push(format!("{refused}: {message}"));
            } else if let Some(refused) = served(client, ns, &shape, 2).await? {
                problems.push(refused);
            }
            shape
        }
    };
    let refused = !problems.is_empty();
    let mut oracle = Oracle {
        client,
        ns,
        case,
        old: old_shape.as_ref(),
        new: &new_shape,
        versions: if refused {
            Vec::new()
        } else {
            new_shape.served()
        },
        problems,
    };
    for object in &stored {
        for v in oracle.versions.clone() {
            oracle.round_trip(object, &v).await;
        }
        oracle.create_again(object).await;
        for v in oracle.versions.clone() {
            oracle.update(object, &v).await;
        }
    }
    oracle.lists().await;
    let problems = oracle.problems;
    let migration = if !refused && new.is_some() {
        migration(client, &new_shape).await.map_err(context)?
    } else {
        None
    };

    let stable = |text: &str| text.replace(&format!(".{run}.{DOMAIN}"), &format!(".{DOMAIN}"));
    let problems: Vec<String> = problems.iter().map(|p| stable(p)).collect();
    let (observed, what) = if let Some(first) = problems.first() {
        (Class::Breaking, first.clone())
    } else if let Some(migration) = migration {
        (Class::NeedsMigration, migration)
    } else if stored.is_empty() {
        (Class::Safe, "nothing was stored before".to_owned())
    } else {
        let intact = "every step accepted; every object intact through every served version";
        (Class::Safe, intact.to_owned())
    };
    Ok(Row {
        findings,
        gate,
        observed,
        what,
        problems,
    })
}

/// A migration still to do: `status.storedVersions` lists a version besides the storage one.
async fn migration(client: &Client, shape: &Shape) -> Result<Option<String>, String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let live = crds.get(&shape.name).await.map_err(|e| e.to_string())?;
    let storage = shape.storage();
    let stored_versions = (live.status.and_then(|s| s.stored_versions)).unwrap_or_default();
    let behind: Vec<_> = stored_versions.iter().filter(|v| **v != storage).collect();
    Ok((!behind.is_empty()).then(|| {
        format!(
            "every step works; status.storedVersions still lists {behind:?} besides {storage}: \
             the objects stored as the old version must be migrated before it is dropped"
        )
    }))
}

/// Whether the gate's class agrees with the apiserver's behaviour.
fn agrees(row: &Row) -> bool {
    row.gate == row.observed || row.gate == Class::NeedsReview
}

/// The book's table of the cases and their outcomes.
fn table(cases: &[Case], rows: &[Row]) -> String {
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from(
        "<!-- generated by tests/integration/compat_oracle/mod.rs (KUBEFORGE_BLESS=1 rewrites it) -->\n\
         # Compatibility verdicts checked against the apiserver\n\n\
         Each row is one case of the oracle test `compat_oracle::gate_should_match_the_apiserver` \
         (see [Checking compatibility between releases](../webhooks.md#checking-compatibility-between-releases)): \
         the old CRD is applied and objects valid under it are stored, the new CRD is applied, then \
         each object is read through every served version, written back unchanged, copied, created \
         again, and updated through every served version. *Gate* is `crdgen --compat`'s class (the \
         most severe finding); *apiserver* is what happened: `breaking` when a step was refused or \
         data was lost or changed, `needs-migration` when everything works but \
         `status.storedVersions` still lists the old storage version (a migration is due before \
         it is dropped), `safe` otherwise. A value the new schema defaults is not a loss, nor is a \
         stored `null` read back as absent (a `null` read back as a value is a change). \
         `needs-review` is the gate's answer where it cannot decide (two regexes); those cases show \
         both outcomes. The objects are `o<i>-<version>` (created through that version); the \
         update through a version is `patch` (a merge patch) or `apply` (server-side apply by a \
         second field manager). Generated by the test; on Kubernetes 1.37.\n\n\
         | case | change | gate's findings | gate | apiserver | what happened |\n\
         |---|---|---|---|---|---|\n",
    );
    for (case, row) in cases.iter().zip(rows) {
        let findings: BTreeSet<String> = (row.findings.iter())
            .map(|f| format!("`{}` ({})", f.rule, f.class))
            .collect();
        let findings = if findings.is_empty() {
            "none".to_owned()
        } else {
            findings.into_iter().collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            case.name,
            cell(case.change),
            findings,
            row.gate,
            row.observed,
            cell(&row.what)
        ));
    }
    out.push_str(
        "\nEvery rule of `kubeforge::crd::compat::RULES` is reported, in each of its classes, by \
         at least one case, except:\n\n",
    );
    for (rule, class, why) in NOT_COVERED {
        out.push_str(&format!("- `{rule}` ({class}): {why}.\n"));
    }
    out
}

#[tokio::test]
async fn gate_should_match_the_apiserver() {
    let ns = TestNamespace::new().await.unwrap();
    let client = ns.client();
    let run_id = ns.name().to_owned();
    let cases = cases();
    let started = Instant::now();
    let rows: Vec<Result<Row, String>> = futures::stream::iter(&cases)
        .map(|case| run(case, &client, ns.name(), &run_id))
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let mut failures = Vec::new();
    let mut done = Vec::new();
    for (case, row) in cases.iter().zip(rows) {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                failures.push(format!("{}: the case could not run: {e}", case.name));
                continue;
            }
        };
        if !agrees(&row) {
            failures.push(format!(
                "{}: the gate says {} ({}), the apiserver {}: {}",
                case.name,
                row.gate,
                (row.findings.iter())
                    .map(|f| format!("{} {}", f.class, f.rule))
                    .collect::<Vec<_>>()
                    .join(", "),
                row.observed,
                row.problems.join("; ")
            ));
        }
        for (rule, class) in &case.rules {
            if !row
                .findings
                .iter()
                .any(|f| f.rule == *rule && f.class == *class)
            {
                failures.push(format!(
                    "{}: the gate reports no {class} {rule} (it reports {})",
                    case.name,
                    (row.findings.iter())
                        .map(|f| format!("{} {}", f.class, f.rule))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        done.push((case, row));
    }
    eprintln!("compat oracle: {} cases in {elapsed:.1?}", cases.len());
    assert!(
        failures.is_empty(),
        "{} case(s) disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let rows: Vec<Row> = done.into_iter().map(|(_, row)| row).collect();
    // Every rule in each of its classes has a case.
    let reported: BTreeSet<(&str, Class)> = (rows.iter().flat_map(|r| &r.findings))
        .map(|f| (f.rule, f.class))
        .collect();
    let uncovered: Vec<String> = (RULES.iter())
        .flat_map(|(rule, classes)| classes.iter().map(move |class| (*rule, *class)))
        .filter(|pair| !reported.contains(pair))
        .filter(|(rule, class)| !NOT_COVERED.iter().any(|(r, c, _)| r == rule && c == class))
        .map(|(rule, class)| format!("{class} {rule}"))
        .collect();
    assert!(uncovered.is_empty(), "no case reports {uncovered:?}");
    check_table(&table(&cases, &rows));
}

/// Compares the table with the book's, or writes it with `KUBEFORGE_BLESS=1`.
fn check_table(rendered: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/src/reference/compat-oracle.md");
    if std::env::var_os("KUBEFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/src/reference/compat-oracle.md is stale: run KUBEFORGE_BLESS=1 cargo test -p kubeforge-tests -- compat_oracle\n{}",
        (committed.lines().zip(rendered.lines()))
            .find(|(a, b)| a != b)
            .map_or_else(String::new, |(a, b)| format!("- {a}\n+ {b}"))
    );
}
