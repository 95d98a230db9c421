//! The type of `self` in a rule on the root of a CRD's schema (`root_rule(..)` on a kind), as the
//! apiserver declares it (`WithTypeAndObjectMeta` in k8s.io/apiextensions-apiserver/pkg/apiserver/
//! schema/cel/model): the object's `apiVersion` and `kind`, its `metadata` cut to `name` and
//! `generateName` (the only fields of it a CRD's rules see), its `spec` and its `status`.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::types::{Kind, MAX_REQUEST_SIZE_BYTES, Object, Size, Ty};

/// The fields of `ObjectMeta` a root rule cannot read, named in the error.
const HIDDEN_METADATA: &[&str] = &[
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// A string of the object no marker bounds: as long as fits in a request (no hint: nothing the
/// user writes can bound it).
fn string() -> Ty {
    Ty {
        kind: Kind::String,
        size: Size::exact(MAX_REQUEST_SIZE_BYTES - 2),
    }
}

fn object(name: &str, fields: Vec<(&str, Ty)>, absent: Vec<(String, String)>) -> Ty {
    Ty::new(Kind::Object(Rc::new(Object {
        name: name.to_owned(),
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
        open: false,
        absent,
    })))
}

/// `metadata` as a root rule sees it: `name` and `generateName`; any other field is an error
/// that says so.
fn metadata() -> Ty {
    let why = |field: Option<&str>| {
        let not = field.map(|f| format!(", not `{f}`")).unwrap_or_default();
        format!(
            "the apiserver exposes only `name` and `generateName` of `metadata` to a CRD's \
             validation rules{not} (an `admission_rule(..)` can read all of it)"
        )
    };
    let absent = HIDDEN_METADATA
        .iter()
        .map(|field| ((*field).to_owned(), why(Some(field))))
        .chain([("*".to_owned(), why(None))])
        .collect();
    object(
        "ObjectMeta",
        vec![("name", string()), ("generateName", string())],
        absent,
    )
}

/// The type of `self` in a root rule of the kind `kind`, whose spec has the type `spec` and whose
/// status (if it has one) the type `status`.
pub fn self_type(kind: &str, spec: Ty, status: Option<Ty>) -> Ty {
    let mut fields = vec![
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        ("spec", spec),
    ];
    let mut absent = Vec::new();
    match status {
        Some(status) => fields.push(("status", status)),
        None => absent.push((
            "status".to_owned(),
            format!(
                "the kind `{kind}` has no status: add `status = {kind}Status` to \
                 #[custom_resource(..)]"
            ),
        )),
    }
    object(kind, fields, absent)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;
    use crate::errors::Errors;
    use crate::model::Rule;

    fn spec_fields() -> Vec<crate::fields::Field> {
        let mut errors = Errors::default();
        let mut fields = syn::Fields::Named(syn::parse_quote!({
            replicas: i32,
            #[validate(max_length = 16)]
            image: Option<String>,
        }));
        let fields = crate::fields::fields(&mut fields, Some("camelCase"), &mut errors);
        assert!(errors.messages().is_empty());
        fields
    }

    /// The errors of `root_rule(cel = rule)` on `Web` with `status = WebStatus` (or none).
    fn errors_of(rule: &str, status: Option<syn::Type>) -> Vec<String> {
        let rule = Rule::from_attrs(crate::attrs::RuleAttrs {
            cel: Some(syn::LitStr::new(rule, proc_macro2::Span::call_site())),
            ..Default::default()
        })
        .expect("a rule");
        let spec: syn::Ident = syn::parse_quote!(WebSpec);
        let mut errors = Errors::default();
        super::super::check_untyped(std::slice::from_ref(&rule), &mut errors);
        super::super::check_root(
            std::slice::from_ref(&rule),
            "Web",
            (&spec, &spec_fields()),
            status.as_ref(),
            &mut errors,
        );
        errors.messages()
    }

    fn status() -> Option<syn::Type> {
        Some(syn::parse_quote!(WebStatus))
    }

    #[test]
    fn root_self_should_be_the_object_with_the_metadata_the_apiserver_exposes() {
        let status = super::super::types::of_type(&syn::parse_quote!(WebStatus));
        let spec: syn::Ident = syn::parse_quote!(WebSpec);
        let ty = self_type(
            "Web",
            super::super::types::of_struct(&spec.to_string(), &spec_fields()),
            Some(status),
        );
        let Kind::Object(root) = &ty.kind else {
            panic!("self is an object: {ty}");
        };
        let shown: Vec<String> = root
            .fields
            .iter()
            .map(|(name, ty)| format!("{name}: {ty}"))
            .collect();
        assert_eq!(
            shown,
            [
                "apiVersion: string",
                "kind: string",
                "metadata: object `ObjectMeta`",
                "spec: object `WebSpec`",
                "status: dyn",
            ]
        );
        let Kind::Object(metadata) = &root.fields["metadata"].kind else {
            panic!("metadata is an object");
        };
        assert_eq!(
            metadata.fields.keys().collect::<Vec<_>>(),
            ["generateName", "name"]
        );
        assert!(!root.open && !metadata.open);
    }

    #[test]
    fn root_rules_should_read_the_name_and_span_spec_and_status() {
        for rule in [
            "self.metadata.name.startsWith('web-')",
            "!has(self.metadata.generateName) || self.metadata.generateName.size() < 20",
            "self.apiVersion.startsWith('g.dev/') && self.kind == 'Web'",
            "!has(self.status) || self.status.replicas <= self.spec.replicas",
            "!has(self.spec.image) || self.spec.image.matches('^[a-z]+$')",
            "self.spec.replicas >= oldSelf.spec.replicas",
        ] {
            assert_eq!(errors_of(rule, status()), Vec::<String>::new(), "{rule}");
        }
    }

    #[test]
    fn root_rules_should_not_read_what_the_apiserver_hides_or_the_kind_lacks() {
        let only = "the apiserver exposes only `name` and `generateName` of `metadata` to a \
                    CRD's validation rules";
        let admission = "(an `admission_rule(..)` can read all of it)";
        let cases: Vec<(&str, Option<syn::Type>, String)> = vec![
            (
                "self.metadata.labels['team'] == 'a'",
                status(),
                format!("CEL rule reads `self.metadata.labels`, but {only}, not `labels` {admission}"),
            ),
            (
                "has(self.metadata.namespace)",
                status(),
                format!("CEL rule reads `self.metadata.namespace`, but {only}, not `namespace` {admission}"),
            ),
            (
                "self.metadata.owner == 'x'",
                status(),
                format!("CEL rule reads `self.metadata.owner`, but {only} {admission}"),
            ),
            (
                "self.metadata.nmae == 'x'",
                status(),
                "CEL rule reads `self.metadata.nmae`, but `ObjectMeta` has no field `nmae`; did you mean `name`?".to_owned(),
            ),
            (
                "!has(self.status) || self.status.ready",
                None,
                "CEL rule reads `self.status`, but the kind `Web` has no status: add `status = WebStatus` to #[custom_resource(..)]".to_owned(),
            ),
            (
                "self.spec.replica > 0",
                status(),
                "CEL rule reads `self.spec.replica`, but `WebSpec` has no field `replica`; did you mean `replicas`?".to_owned(),
            ),
            (
                "self.sepc.replicas > 0",
                status(),
                "CEL rule reads `self.sepc`, but `Web` has no field `sepc`; did you mean `spec`?".to_owned(),
            ),
            (
                "self.spec.replicas == self.metadata.name",
                status(),
                "CEL rule compares `self.spec.replicas` (int) with `self.metadata.name` (string)".to_owned(),
            ),
        ];
        for (rule, status, expected) in cases {
            let errors = errors_of(rule, status);
            assert!(
                errors.iter().any(|e| e.starts_with(&expected)),
                "{rule}: {errors:?}"
            );
        }
    }

    #[test]
    fn custom_resource_should_put_root_rules_on_the_schema_and_check_them_there() {
        let expand = |rule: &str| {
            crate::pipeline::custom_resource(
                quote!(group = "g.dev", version = "v1", kind = "Web", namespaced,
                    root_rule(cel = #rule, message = "m"),
                    rule(cel = "self.replicas >= 0")),
                quote!(
                    pub struct WebSpec {
                        pub replicas: i32,
                    }
                ),
            )
            .to_string()
        };
        let out = expand("self.metadata.name.size() <= 20");
        assert!(!out.contains("compile_error"), "{out}");
        let schema = out
            .split("fn schema ()")
            .nth(1)
            .expect("the schema function");
        assert!(
            schema.contains("\"self.metadata.name.size() <= 20\""),
            "{schema}"
        );
        assert!(!schema.contains("self.replicas"), "{schema}");
        let out = expand("self.metadata.labels.size() <= 20");
        assert!(
            out.contains("compile_error") && out.contains("not `labels`"),
            "{out}"
        );
    }
}
