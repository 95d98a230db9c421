//! The static description of a kind that `#[custom_resource]` emits, and the CRD built from it.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation,
    JSONSchemaProps, SelectableField,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::structural::{FIELD_VALIDATIONS, structural_schema};

/// Everything `#[custom_resource(...)]` says about one version of a kind, as static data.
///
/// Generated code builds one of these per annotated struct; read it through
/// [`CustomResource::INFO`](super::CustomResource::INFO).
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    /// API group, e.g. `apps.example.com`.
    pub group: &'static str,
    /// Version name, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `WebApp`.
    pub kind: &'static str,
    /// Plural resource name, e.g. `webapps`.
    pub plural: &'static str,
    /// Singular resource name, e.g. `webapp`.
    pub singular: &'static str,
    /// Short names (`kubectl get wa`).
    pub short_names: &'static [&'static str],
    /// Categories (`kubectl get all`).
    pub categories: &'static [&'static str],
    /// Namespaced (`true`) or cluster-scoped.
    pub namespaced: bool,
    /// Whether this version is served.
    pub served: bool,
    /// Whether this version is the storage version.
    pub storage: bool,
    /// `Some(warning)` when the version is deprecated (the warning may be empty: default text).
    pub deprecated: Option<&'static str>,
    /// Whether the status subresource is enabled (a status type was given).
    pub status_subresource: bool,
    /// The scale subresource, if any.
    pub scale: Option<ScaleInfo>,
    /// Additional printer columns.
    pub printer_columns: &'static [PrinterColumnInfo],
    /// JSONPaths of selectable fields.
    pub selectable_fields: &'static [&'static str],
    /// Labels of the CRD object.
    pub labels: &'static [(&'static str, &'static str)],
    /// Annotations of the CRD object.
    pub annotations: &'static [(&'static str, &'static str)],
}

/// The scale subresource's paths.
#[derive(Debug, Clone, Copy)]
pub struct ScaleInfo {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas_path: &'static str,
    /// `statusReplicasPath`, e.g. `.status.replicas`.
    pub status_replicas_path: &'static str,
    /// `labelSelectorPath`, e.g. `.status.selector`.
    pub label_selector_path: Option<&'static str>,
}

/// One additional printer column.
#[derive(Debug, Clone, Copy)]
pub struct PrinterColumnInfo {
    /// Column header.
    pub name: &'static str,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: &'static str,
    /// JSONPath relative to the object, e.g. `.spec.replicas`.
    pub json_path: &'static str,
    /// Optional OpenAPI format.
    pub format: Option<&'static str>,
    /// Optional description.
    pub description: Option<&'static str>,
    /// Priority: 0 is shown in the default view, higher only with `-o wide`.
    pub priority: i32,
}

impl KindInfo {
    /// The CRD's name, `<plural>.<group>`.
    #[must_use]
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// `<group>/<version>`.
    #[must_use]
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The schema of `T` as schemars generates it for kubeforge: subschemas inlined, no meta-schema,
/// before the structural pass.
#[must_use]
pub fn raw_schema<T: JsonSchema + ?Sized>() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.root_schema_for::<T>().to_value()
}

/// The structural `openAPIV3Schema` of a kind with the raw schemas (see [`raw_schema`]) of its
/// spec and (if any) status, and the CEL rules on its root (`root_rule(..)`: entries of
/// `x-kubernetes-validations`, whose `self` is the whole object).
#[must_use]
pub fn kind_schema(spec: Value, status: Option<Value>, root_rules: Vec<Value>) -> Value {
    let mut properties = Map::new();
    properties.insert("apiVersion".to_owned(), json!({"type": "string"}));
    properties.insert("kind".to_owned(), json!({"type": "string"}));
    properties.insert("spec".to_owned(), spec);
    if let Some(status) = status {
        properties.insert("status".to_owned(), status);
    }
    let mut root = json!({
        "type": "object",
        "required": ["spec"],
        "properties": properties,
    });
    if !root_rules.is_empty()
        && let Some(root) = root.as_object_mut()
    {
        // As a field's rules travel: the structural pass makes them the node's
        // `x-kubernetes-validations`.
        root.insert(FIELD_VALIDATIONS.to_owned(), Value::Array(root_rules));
    }
    let mut schema = structural_schema(root);
    // After the rewrite, which would open an object without properties: the apiserver fixes
    // the root `metadata` and refuses anything but `type: object` there.
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("metadata".to_owned(), json!({"type": "object"}));
    }
    schema
}

fn owned(list: &[&str]) -> Option<Vec<String>> {
    (!list.is_empty()).then(|| list.iter().map(|s| (*s).to_owned()).collect())
}

fn owned_map(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    })
}

/// Builds the single-version CRD of `info` with the (structural) `schema`.
#[must_use]
pub fn build_crd(info: &KindInfo, schema: Value) -> CustomResourceDefinition {
    // The structural pass only emits keys and value types that JSONSchemaProps models, so this
    // cannot fail; a schema that does not deserialize would be a bug in the pass.
    let schema: JSONSchemaProps = serde_json::from_value(schema)
        .expect("invariant: the structural pass emits valid JSONSchemaProps");
    let scale = info.scale.map(|s| CustomResourceSubresourceScale {
        spec_replicas_path: s.spec_replicas_path.to_owned(),
        status_replicas_path: s.status_replicas_path.to_owned(),
        label_selector_path: s.label_selector_path.map(str::to_owned),
    });
    let status = info
        .status_subresource
        .then(|| CustomResourceSubresourceStatus(json!({})));
    let subresources = (scale.is_some() || status.is_some())
        .then_some(CustomResourceSubresources { scale, status });
    let columns: Vec<CustomResourceColumnDefinition> = info
        .printer_columns
        .iter()
        .map(|c| CustomResourceColumnDefinition {
            name: c.name.to_owned(),
            type_: c.type_.to_owned(),
            json_path: c.json_path.to_owned(),
            format: c.format.map(str::to_owned),
            description: c.description.map(str::to_owned),
            priority: (c.priority != 0).then_some(c.priority),
        })
        .collect();
    let selectable: Vec<SelectableField> = info
        .selectable_fields
        .iter()
        .map(|p| SelectableField {
            json_path: (*p).to_owned(),
        })
        .collect();
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(info.crd_name()),
            labels: owned_map(info.labels),
            annotations: owned_map(info.annotations),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: info.group.to_owned(),
            names: CustomResourceDefinitionNames {
                kind: info.kind.to_owned(),
                plural: info.plural.to_owned(),
                singular: Some(info.singular.to_owned()),
                short_names: owned(info.short_names),
                categories: owned(info.categories),
                list_kind: None,
            },
            scope: if info.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            }
            .to_owned(),
            versions: vec![CustomResourceDefinitionVersion {
                name: info.version.to_owned(),
                served: info.served,
                storage: info.storage,
                deprecated: info.deprecated.map(|_| true),
                deprecation_warning: info.deprecated.filter(|w| !w.is_empty()).map(str::to_owned),
                additional_printer_columns: (!columns.is_empty()).then_some(columns),
                selectable_fields: (!selectable.is_empty()).then_some(selectable),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources,
            }],
            conversion: None,
            preserve_unknown_fields: None,
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: KindInfo = KindInfo {
        group: "t.kubeforge.dev",
        version: "v1alpha1",
        kind: "Box",
        plural: "boxes",
        singular: "box",
        short_names: &["bx"],
        categories: &[],
        namespaced: false,
        served: false,
        storage: true,
        deprecated: Some("old"),
        status_subresource: false,
        scale: None,
        printer_columns: &[PrinterColumnInfo {
            name: "Size",
            type_: "integer",
            json_path: ".spec.size",
            format: None,
            description: None,
            priority: 0,
        }],
        selectable_fields: &[".spec.size"],
        labels: &[("app.kubernetes.io/part-of", "t")],
        annotations: &[],
    };

    /// schemars marks sets `uniqueItems`, which the apiserver rejects; the pass rewrites it.
    #[test]
    fn raw_schema_of_a_set_should_become_a_set_list() {
        let raw = raw_schema::<std::collections::BTreeSet<String>>();
        assert_eq!(raw["uniqueItems"], true);
        let structural = crate::crd::structural_schema(raw);
        assert_eq!(structural["x-kubernetes-list-type"], "set");
        assert!(structural.get("uniqueItems").is_none());
    }

    #[test]
    fn kind_schema_should_put_root_rules_on_the_root() {
        let rule = json!({"rule": "self.metadata.name.size() <= 10", "message": "short names"});
        let schema = kind_schema(json!({"type": "object"}), None, vec![rule.clone()]);
        assert_eq!(schema["x-kubernetes-validations"], json!([rule]));
        assert!(schema.get(FIELD_VALIDATIONS).is_none());
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
        let without = kind_schema(json!({"type": "object"}), None, Vec::new());
        assert!(without.get("x-kubernetes-validations").is_none());
    }

    #[test]
    fn build_crd_should_carry_every_kind_option() {
        let crd = build_crd(
            &INFO,
            kind_schema(json!({"type": "object"}), None, Vec::new()),
        );
        assert_eq!(crd.metadata.name.as_deref(), Some("boxes.t.kubeforge.dev"));
        assert_eq!(
            crd.metadata.labels.unwrap()["app.kubernetes.io/part-of"],
            "t"
        );
        assert_eq!(crd.metadata.annotations, None);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, Some(vec!["bx".to_owned()]));
        assert_eq!(crd.spec.names.categories, None);
        let version = &crd.spec.versions[0];
        assert_eq!((version.served, version.storage), (false, true));
        assert_eq!(version.deprecated, Some(true));
        assert_eq!(version.deprecation_warning.as_deref(), Some("old"));
        assert_eq!(version.subresources, None);
        let columns = version.additional_printer_columns.as_ref().unwrap();
        assert_eq!(
            (columns[0].priority, columns[0].type_.as_str()),
            (None, "integer")
        );
        assert_eq!(
            version.selectable_fields.as_ref().unwrap()[0].json_path,
            ".spec.size"
        );
        let schema = version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap();
        assert_eq!(schema.required, Some(vec!["spec".to_owned()]));
    }
}
