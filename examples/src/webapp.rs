//! `WebApp`: a stateless web application (a Deployment plus a Service, once the operator of a
//! later example runs it). Shows the common kind-level options and field markers.

use std::collections::BTreeMap;

use kubeforge::crd::Conditions;
use kubeforge::k8s_openapi::api::core::v1::ResourceRequirements;
use kubeforge::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The desired state of a web application.
#[kubeforge::custom_resource(
    group = "apps.kubeforge.dev",
    version = "v1",
    kind = "WebApp",
    namespaced,
    status = WebAppStatus,
    shortname = "wa",
    category = "all",
    printcolumn(name = "Image", json_path = ".spec.image", type = "string"),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(name = "Ready", json_path = ".status.readyReplicas", type = "integer"),
    printcolumn(name = "Age", json_path = ".metadata.creationTimestamp", type = "date"),
    printcolumn(name = "Port", json_path = ".spec.port", type = "integer", priority = 1,
        description = "The container port"),
    scale(spec = ".spec.replicas", status = ".status.replicas", selector = ".status.selector"),
    rule(cel = "!has(self.minReplicas) || self.minReplicas <= self.replicas",
        message = "minReplicas must not exceed replicas", field_path = ".minReplicas"),
)]
#[derive(Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppSpec {
    /// Container image, e.g. `registry.example.com/shop:1.4`.
    #[validate(min_length = 1, pattern = r"^[a-z0-9][a-z0-9._/:@-]*$")]
    pub image: String,
    /// Number of pods.
    #[validate(minimum = 0, maximum = 100)]
    pub replicas: i32,
    /// Lower bound for autoscalers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(minimum = 0)]
    pub min_replicas: Option<i32>,
    /// The port the container listens on.
    #[serde(default = "default_port")]
    #[validate(minimum = 1, maximum = 65535)]
    pub port: i32,
    /// The port the Service targets: a number or the name of a container port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// Environment variables of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(max_items = 64, list_type = "map", list_map_keys = ["name"])]
    pub env: Vec<EnvVar>,
    /// How the application is exposed.
    #[serde(default)]
    pub exposure: Exposure,
    /// Compute resources of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Extra labels for the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[validate(max_properties = 16)]
    pub pod_labels: BTreeMap<String, String>,
}

fn default_port() -> i32 {
    8080
}

/// One environment variable.
#[kubeforge::schema]
#[derive(Clone, Debug, PartialEq)]
pub struct EnvVar {
    /// Variable name.
    #[validate(min_length = 1, pattern = "^[A-Za-z_][A-Za-z0-9_]*$")]
    pub name: String,
    /// Variable value.
    #[serde(default)]
    pub value: String,
}

/// How a web application is reachable.
#[kubeforge::schema]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exposure {
    /// Only inside the cluster (a ClusterIP Service).
    #[default]
    Internal,
    /// On every node's port (a NodePort Service).
    NodePort,
    /// Through a cloud load balancer.
    LoadBalancer,
}

/// The observed state of a web application.
#[kubeforge::schema]
#[derive(Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebAppStatus {
    /// Pods created.
    #[serde(default)]
    #[validate(minimum = 0)]
    pub replicas: i32,
    /// Pods ready.
    #[serde(default)]
    #[validate(minimum = 0)]
    pub ready_replicas: i32,
    /// Label selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The generation last acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, ...
    #[serde(default)]
    pub conditions: Conditions,
}

/// `WebApp` v2, a changed shape served next to v1 (the storage version): `replicas` is called
/// `instances`, `minReplicas` and `targetPort` are gone, and a `tier` is new. The conversions
/// both ways are generated (`conversion(hub = .., generate)`): what one version cannot hold is
/// kept in an annotation and comes back, and a generated test checks round trips of arbitrary
/// objects in `cargo test`.
pub mod v2 {
    use std::collections::BTreeMap;

    use super::{EnvVar, Exposure, WebAppStatus};

    /// The desired state of a web application (v2).
    #[kubeforge::custom_resource(
        group = "apps.kubeforge.dev",
        version = "v2",
        kind = "WebApp",
        namespaced,
        status = WebAppStatus,
        shortname = "wa",
        category = "all",
        storage = false,
        conversion(hub = super::WebApp, generate),
        printcolumn(name = "Image", json_path = ".spec.image", type = "string"),
        printcolumn(name = "Instances", json_path = ".spec.instances", type = "integer"),
        printcolumn(name = "Tier", json_path = ".spec.tier", type = "string"),
        // The same subresources as v1 (checked at compile time): `kubectl scale` goes through
        // v2, the version kubectl prefers.
        scale(spec = ".spec.instances", status = ".status.replicas", selector = ".status.selector"),
    )]
    #[derive(Clone, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub struct WebAppSpec {
        /// Container image.
        #[validate(min_length = 1, pattern = r"^[a-z0-9][a-z0-9._/:@-]*$")]
        pub image: String,
        /// Number of pods (`replicas` in v1).
        #[convert(from = "replicas")]
        #[validate(minimum = 0, maximum = 100)]
        pub instances: i32,
        /// The port the container listens on.
        #[serde(default = "super::default_port")]
        #[validate(minimum = 1, maximum = 65535)]
        pub port: i32,
        /// Environment variables of the container.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[validate(max_items = 64, list_type = "map", list_map_keys = ["name"])]
        pub env: Vec<EnvVar>,
        /// How the application is exposed.
        #[serde(default)]
        pub exposure: Exposure,
        /// Extra labels for the pods.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        #[validate(max_properties = 16)]
        pub pod_labels: BTreeMap<String, String>,
        /// Service tier (new in v2).
        #[serde(default = "standard")]
        #[validate(enum = ["standard", "premium"])]
        pub tier: String,
    }

    fn standard() -> String {
        "standard".to_owned()
    }
}

/// The ConfigMap (in the WebApp's namespace) listing the registries images may come from, under
/// the key `allowed`, comma-separated; without it every registry is allowed.
pub const REGISTRY_POLICY: &str = "webapp-registries";

/// Images only from allowed registries: a rule the schema cannot express (it reads another
/// object), served as a validating webhook. Implementing the trait is all the wiring; the
/// operator's manager serves it and registers the webhook configuration itself.
impl kubeforge::webhook::Validator for WebApp {
    async fn validate_create(
        &self,
        ctx: &kubeforge::webhook::AdmissionContext,
    ) -> kubeforge::webhook::Verdict {
        use kubeforge::webhook::Verdict;
        let Some(namespace) = ctx.namespace() else {
            return Verdict::allow();
        };
        let policies: kubeforge::kube::Api<kubeforge::k8s_openapi::api::core::v1::ConfigMap> =
            kubeforge::kube::Api::namespaced(ctx.client(), namespace);
        let allowed = match policies.get_opt(REGISTRY_POLICY).await {
            Ok(Some(policy)) => policy.data.unwrap_or_default().remove("allowed"),
            Ok(None) => None,
            Err(e) => return Verdict::deny(format!("cannot read {REGISTRY_POLICY}: {e}")),
        };
        let Some(allowed) = allowed else {
            return Verdict::allow();
        };
        let registry = registry_of(&self.spec.image);
        if allowed.split(',').map(str::trim).any(|r| r == registry) {
            Verdict::allow()
        } else {
            Verdict::deny(format!(
                "spec.image: registry {registry} is not allowed in this namespace (allowed: {allowed})"
            ))
        }
    }

    async fn validate_update(
        &self,
        old: &Self,
        ctx: &kubeforge::webhook::AdmissionContext,
    ) -> kubeforge::webhook::Verdict {
        // Only a changed image is checked: a policy tightened later does not block other edits.
        if old.spec.image == self.spec.image {
            return kubeforge::webhook::Verdict::allow();
        }
        self.validate_create(ctx).await
    }
}

/// The registry of an image reference (`docker.io` when it names none, as container runtimes
/// read it).
pub fn registry_of(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first
        }
        _ => "docker.io",
    }
}

#[cfg(test)]
mod registry_tests {
    use super::registry_of;

    #[test]
    fn registries_should_be_read_as_container_runtimes_do() {
        assert_eq!(
            registry_of("registry.example.com/shop:1.4"),
            "registry.example.com"
        );
        assert_eq!(registry_of("localhost:5000/shop"), "localhost:5000");
        assert_eq!(registry_of("nginx:1.27"), "docker.io");
        assert_eq!(registry_of("library/nginx"), "docker.io");
    }
}

#[cfg(test)]
mod tests {
    use kubeforge::crd::CustomResource;
    use kubeforge::serde_json;

    use super::*;

    /// Golden test: the committed CRD (`examples/crds/`, both versions merged) is what the code
    /// generates. After an intended change, regenerate it with
    /// `cargo run --bin crdgen -- --out examples/crds`.
    #[test]
    fn webapp_crd_should_match_the_committed_yaml() {
        // What this crate's `crdgen` prints (its conversion at the operator's Service).
        let crds = kubeforge::crdgen::crds_for("kubeforge-examples", "kubeforge-examples").unwrap();
        let webapps = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("webapps.apps.kubeforge.dev"))
            .unwrap();
        let yaml = kubeforge::crdgen::to_yaml(webapps).unwrap();
        let golden = include_str!("../crds/webapps.apps.kubeforge.dev.yaml");
        let diff = kubeforge::crdgen::diff("webapps.apps.kubeforge.dev.yaml", golden, &yaml);
        assert!(diff.is_empty(), "the generated CRD changed:\n{diff}");
    }

    #[test]
    fn crds_should_list_the_registered_kinds() {
        let names: Vec<_> = kubeforge::crd::crds()
            .unwrap()
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(
            names,
            [
                "databases.apps.kubeforge.dev",
                "guestbooks.tutorial.kubeforge.dev",
                "secretmirrors.apps.kubeforge.dev",
                "staticsites.apps.kubeforge.dev",
                "webapps.apps.kubeforge.dev"
            ]
        );
    }

    #[test]
    fn crdgen_should_be_byte_stable_and_detect_stale_files() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // As this crate's `crdgen` binary runs (named after the crate).
        let run = |args: &[String], out: &mut String| {
            kubeforge::crdgen::run_named(args, Some("kubeforge-examples"), out)
        };
        let (mut first, mut second) = (String::new(), String::new());
        assert!(run(&[], &mut first).unwrap());
        assert!(run(&[], &mut second).unwrap());
        assert_eq!(first, second);
        assert!(first.starts_with(
            "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        ));

        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/crds");
        let mut out = String::new();
        assert!(
            run(&args(&["--check", committed]), &mut out).unwrap(),
            "{out}"
        );

        let dir = std::env::temp_dir().join(format!("kubeforge-crdgen-{}", std::process::id()));
        let dir_arg = dir.to_string_lossy().into_owned();
        let mut out = String::new();
        assert!(run(&args(&["--out", &dir_arg]), &mut out).unwrap());
        let file = dir.join("webapps.apps.kubeforge.dev.yaml");
        let written = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, written.replace("shortNames", "shortNamez")).unwrap();
        let mut out = String::new();
        assert!(!run(&args(&["--check", &dir_arg]), &mut out).unwrap());
        assert!(out.contains("-    shortNamez:\n+    shortNames:"), "{out}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The compatibility gate against the committed CRDs (their own previous release):
    /// `cargo run --bin crdgen -- --compat examples/crds` finds nothing breaking.
    #[test]
    fn crdgen_compat_should_find_nothing_breaking_against_the_committed_crds() {
        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/crds").to_owned();
        let mut out = String::new();
        let passed = kubeforge::crdgen::run_named(
            &["--compat".to_owned(), committed],
            Some("kubeforge-examples"),
            &mut out,
        )
        .unwrap();
        assert!(passed, "{out}");
        assert!(!out.contains("breaking:"), "{out}");
    }

    #[test]
    fn webapp_should_serialize_with_api_version_and_kind() {
        let app = WebApp::new(
            "shop",
            WebAppSpec {
                image: "shop:1".into(),
                replicas: 2,
                min_replicas: None,
                port: 8080,
                target_port: Some(IntOrString::String("http".into())),
                env: vec![],
                exposure: Exposure::NodePort,
                resources: None,
                pod_labels: BTreeMap::new(),
            },
        );
        let json = serde_json::to_value(&app).unwrap();
        assert_eq!(json["apiVersion"], "apps.kubeforge.dev/v1");
        assert_eq!(json["kind"], "WebApp");
        assert_eq!(json["spec"]["targetPort"], "http");
        assert_eq!(json["spec"]["exposure"], "NodePort");
        assert!(json.get("status").is_none());
        let back: WebApp = serde_json::from_value(json).unwrap();
        assert_eq!(back.spec, app.spec);
        assert_eq!(WebApp::INFO.plural, "webapps");
        // kube's own trait agrees with kubeforge's.
        assert_eq!(
            <WebApp as kubeforge::kube::CustomResourceExt>::crd_name(),
            "webapps.apps.kubeforge.dev"
        );
        assert_eq!(
            <WebApp as kubeforge::kube::CustomResourceExt>::shortnames(),
            ["wa"]
        );
        let resource = <WebApp as kubeforge::kube::CustomResourceExt>::api_resource();
        assert_eq!(
            (resource.plural.as_str(), resource.api_version.as_str()),
            ("webapps", "apps.kubeforge.dev/v1")
        );
    }
}
