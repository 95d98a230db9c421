//! Printer columns with JSONPath filters against the real apiserver: the "Ready" column
//! (`.status.conditions[?(@.type=="Ready")].status`) shows the Ready condition's status in the
//! Table response; and a corpus of paths shows where the apiserver's table printer gives up (a
//! path it cannot parse drops its column and every column after it: `#[custom_resource]` refuses
//! those at compile time, see `macros/src/model/jsonpath.rs`).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use kubeforge::crd::{Conditions, READY};
use kubeforge::testing::{TestNamespace, apply_crds};
use serde_json::{Value, json};

const GROUP: &str = "columns-test.kubeforge.dev";

/// A port of the spec: a filter selects ports by their fields.
#[kubeforge::schema]
#[derive(Clone, Debug)]
pub struct Port {
    pub name: String,
    pub number: i32,
    pub public: bool,
}

/// The status: kubeforge's conditions.
#[kubeforge::schema]
#[derive(Clone, Debug, Default)]
pub struct DialStatus {
    pub conditions: Conditions,
}

#[kubeforge::custom_resource(
    group = "columns-test.kubeforge.dev",
    version = "v1",
    kind = "Dial",
    namespaced,
    status = DialStatus,
    printcolumn(name = "Ready", json_path = r#".status.conditions[?(@.type=="Ready")].status"#, type = "string"),
    printcolumn(name = "Reason", json_path = ".status.conditions[?(@.type == 'Ready')].reason", type = "string"),
    printcolumn(name = "Http", json_path = ".spec.ports[?(@.number >= 8000)].name", type = "string"),
    printcolumn(name = "Public", json_path = ".spec.ports[?(@.public == true)].number", type = "integer"),
    printcolumn(name = "Last", json_path = ".spec.ports[-1:].name", type = "string"),
)]
#[derive(Clone, Debug)]
pub struct DialSpec {
    pub ports: Vec<Port>,
}

fn port(name: &str, number: i32, public: bool) -> Port {
    Port {
        name: name.into(),
        number,
        public,
    }
}

/// The Table (`as=Table;v=v1;g=meta.k8s.io`) of the objects at `path`.
async fn table(ns: &TestNamespace, path: &str) -> Value {
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value =
        serde_json::from_str(&ns.client().request_text(request).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table", "{table}");
    table
}

fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

/// The cells of the row of object `name`, by column name.
fn row<'t>(table: &'t Value, name: &str) -> impl Fn(&str) -> &'t Value {
    let columns = column_names(table);
    let cells = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"]["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {table}"))["cells"]
        .as_array()
        .unwrap();
    move |column| &cells[columns.iter().position(|c| *c == column).unwrap()]
}

#[tokio::test]
async fn the_ready_column_should_show_the_status_of_the_ready_condition() {
    let ns = TestNamespace::new().await.unwrap();
    apply_crds(&ns.client(), [Dial::crd()], Duration::from_secs(30))
        .await
        .expect("the apiserver accepts the CRD");
    let api: Api<Dial> = ns.api();
    let ports = vec![
        port("metrics", 9090, false),
        port("web", 8080, true),
        port("admin", 7000, true),
    ];
    for (name, ready) in [("up", true), ("down", false)] {
        let dial = Dial::new(
            name,
            DialSpec {
                ports: ports.clone(),
            },
        );
        api.create(&PostParams::default(), &dial).await.unwrap();
        // Another condition first: the filter has to pick Ready out of the list.
        let mut conditions = Conditions::default();
        conditions.mark("Progressing", !ready, "Rolling", "", 1);
        let reason = if ready { "AllReady" } else { "Waiting" };
        conditions.mark(READY, ready, reason, "", 1);
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "conditions": conditions } })),
        )
        .await
        .unwrap();
    }
    let table = table(&ns, &Dial::url_path(&(), Some(ns.name()))).await;
    assert_eq!(
        column_names(&table),
        ["Name", "Ready", "Reason", "Http", "Public", "Last"]
    );
    let up = row(&table, "up");
    assert_eq!(up("Ready"), "True", "{table}");
    assert_eq!(up("Reason"), "AllReady");
    // The first port at or above 8000, the first public one, the last one.
    assert_eq!(up("Http"), "metrics");
    assert_eq!(up("Public"), 8080);
    assert_eq!(up("Last"), "admin");
    let down = row(&table, "down");
    assert_eq!(down("Ready"), "False", "{table}");
    assert_eq!(down("Reason"), "Waiting");
}

/// The apiserver accepts any printer column path that starts with `.`; its table printer then
/// parses each in order (client-go's JSONPath) and stops at the first that does not parse: that
/// column and the ones after it are not shown. One CRD per path, each kind's Table tells whether
/// its column was kept. `#[custom_resource]` refuses
/// the dropped ones at compile time, with the parser's message, and accepts the kept ones
/// (`..`, unions: with `unchecked`; `=` parses but never matches: refused as well).
#[tokio::test]
async fn a_column_the_table_printer_cannot_parse_should_be_dropped_with_the_next_ones() {
    let corpus: &[(&str, bool)] = &[
        (r#".status.conditions[?(@.type=="Ready")].status"#, true),
        (".spec.ports[?(@.number >= 8000)].name", true),
        (".spec.ports[*].name", true),
        (".spec.ports[-1:].name", true),
        (".spec.ports['web']", true),
        (r".metadata.labels.app\.kubernetes\.io/name", true),
        ("..name", true),
        (".spec.ports[0,1].name", true),
        (".spec.ports[?(@.number = 1)].name", true),
        (r#".status.conditions[?(@.type=="Ready").status"#, false),
        (r#".status.conditions[?(@.type=="Ready)].status"#, false),
        (".spec.ports[x].name", false),
        (".spec.ports[0]#", false),
        (".spec.ports[?(@.name == 'a\\q')]", false),
        ("....name", false),
    ];
    let ns = TestNamespace::new().await.unwrap();
    let crds: Vec<CustomResourceDefinition> = (0..corpus.len())
        .map(|i| probe_crd(i, corpus[i].0))
        .collect();
    apply_crds(&ns.client(), crds, Duration::from_secs(60))
        .await
        .expect("the apiserver accepts every path that starts with `.`");
    for (i, (path, kept)) in corpus.iter().enumerate() {
        let url = format!("/apis/{GROUP}/v1/namespaces/{}/probe{i}s", ns.name());
        let table = table(&ns, &url).await;
        let columns = column_names(&table);
        assert_eq!(
            columns.contains(&"Column"),
            *kept,
            "{path}: the table has {columns:?}"
        );
        assert_eq!(
            columns.contains(&"Always"),
            *kept,
            "{path}: a column that does not parse drops the next ones too: {columns:?}"
        );
    }
}

/// Kind `Probe{i}`: `Dial`'s schema with a column `Column` of `path` and, after it, a valid
/// column `Always`.
fn probe_crd(i: usize, path: &str) -> CustomResourceDefinition {
    let mut crd = Dial::crd();
    let kind = format!("Probe{i}");
    let plural = format!("probe{i}s");
    crd.metadata.name = Some(format!("{plural}.{GROUP}"));
    crd.spec.names.kind.clone_from(&kind);
    crd.spec.names.list_kind = Some(format!("{kind}List"));
    crd.spec.names.plural.clone_from(&plural);
    crd.spec.names.singular = Some(kind.to_lowercase());
    crd.spec.names.short_names = None;
    crd.spec.names.categories = None;
    let column = |name: &str, path: &str| CustomResourceColumnDefinition {
        name: name.into(),
        json_path: path.into(),
        type_: "string".into(),
        ..CustomResourceColumnDefinition::default()
    };
    crd.spec.versions[0].additional_printer_columns = Some(vec![
        column("Column", path),
        column("Always", ".metadata.name"),
    ]);
    crd
}
