//! The variables of a ValidatingAdmissionPolicy expression (`admission_rule(..)` on a kind), as
//! the apiserver binds them (k8s.io/apiserver/pkg/admission/plugin/policy/validating): `object`
//! and `oldObject` (the kind: `apiVersion`, `kind`, `metadata`, `spec`, `status`), `request`
//! (the admission request's attributes) and `namespaceObject` (the object's Namespace).
//! `params` (a `paramKind`), `authorizer` and `variables` are not declared: kubeforge's policies
//! have none of them.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::types::{Kind, Object, Ty};

fn object(name: &str, fields: Vec<(&str, Ty)>) -> Ty {
    Ty::new(Kind::Object(Rc::new(Object {
        name: name.to_owned(),
        fields: fields
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
        open: false,
        absent: Vec::new(),
    })))
}

fn string() -> Ty {
    Ty::new(Kind::String)
}

fn map_of(value: Ty) -> Ty {
    Ty::new(Kind::Map(Box::new(string()), Box::new(value)))
}

/// `metadata` of an object: the fields of `ObjectMeta` (the server-set ones untyped where their
/// CEL type depends on the object's schema).
fn metadata() -> Ty {
    object(
        "ObjectMeta",
        vec![
            ("name", string()),
            ("generateName", string()),
            ("namespace", string()),
            ("uid", string()),
            ("resourceVersion", string()),
            ("generation", Ty::new(Kind::Int)),
            ("labels", map_of(string())),
            ("annotations", map_of(string())),
            ("finalizers", Ty::list(string())),
            ("ownerReferences", Ty::list(Ty::dynamic())),
            ("creationTimestamp", Ty::dynamic()),
            ("deletionTimestamp", Ty::dynamic()),
            ("deletionGracePeriodSeconds", Ty::new(Kind::Int)),
            ("managedFields", Ty::list(Ty::dynamic())),
        ],
    )
}

/// `request`: the admission request (`admission.k8s.io/v1` `AdmissionRequest` without the
/// objects, which are `object` and `oldObject`).
fn request() -> Ty {
    let gvk = |last: &str| {
        object(
            "GroupVersionKind",
            vec![("group", string()), ("version", string()), (last, string())],
        )
    };
    object(
        "AdmissionRequest",
        vec![
            ("uid", string()),
            ("kind", gvk("kind")),
            ("resource", gvk("resource")),
            ("subResource", string()),
            ("requestKind", gvk("kind")),
            ("requestResource", gvk("resource")),
            ("requestSubResource", string()),
            ("name", string()),
            ("namespace", string()),
            ("operation", string()),
            (
                "userInfo",
                object(
                    "UserInfo",
                    vec![
                        ("username", string()),
                        ("uid", string()),
                        ("groups", Ty::list(string())),
                        ("extra", map_of(Ty::list(string()))),
                    ],
                ),
            ),
            ("dryRun", Ty::new(Kind::Bool)),
            ("options", Ty::dynamic()),
        ],
    )
}

/// The variables of an admission rule on the kind `kind`, whose spec has the type `spec`.
pub fn vars(kind: &str, spec: Ty) -> Vec<(String, Ty)> {
    let the_object = object(
        kind,
        vec![
            ("apiVersion", string()),
            ("kind", string()),
            ("metadata", metadata()),
            ("spec", spec),
            ("status", Ty::dynamic()),
        ],
    );
    let namespace = object(
        "Namespace",
        vec![
            ("apiVersion", string()),
            ("kind", string()),
            ("metadata", metadata()),
            ("spec", Ty::dynamic()),
            ("status", Ty::dynamic()),
        ],
    );
    vec![
        ("object".to_owned(), the_object.clone()),
        ("oldObject".to_owned(), the_object),
        ("request".to_owned(), request()),
        ("namespaceObject".to_owned(), namespace),
    ]
}
