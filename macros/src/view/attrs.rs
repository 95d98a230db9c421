//! `#[kubeforge::view(..)]`'s keys, read by the shared table parser (`keys.rs`).

use syn::{Path, Type};

use crate::keys::{Key, Table, Value};

/// The raw keys of `#[kubeforge::view(..)]`.
#[derive(Default)]
pub struct ViewAttrs {
    pub of: Option<Type>,
    pub crate_path: Option<Path>,
}

pub const VIEW: Table<ViewAttrs> = Table {
    what: "`view`",
    doc: "On a struct with named fields: a read-only projection of the full type `of` (a kind, \
          or a part of one such as `PodSpec`), holding only the fields it declares. Each field \
          must be a field of the full type, of its type or a view of it, inside the same \
          `Option`, `Vec` and `BTreeMap` layers (checked at compile time). A view with \
          `metadata: ObjectMeta` is a kind: it can be watched, cached and read, never written.",
    keys: &[
        Key::required(
            "of",
            Value::Type(|s: &mut ViewAttrs, v| s.of = Some(v)),
            "#[kubeforge::view] needs `of = FullType`, the type it projects (such as `of = k8s_openapi::api::core::v1::Pod`)",
        )
        .doc("the full type the view projects: a kind (`Pod`, a `#[custom_resource]` kind) or a part of one (`PodSpec`)"),
        Key::new(
            "crate",
            Value::CratePath(|s: &mut ViewAttrs, v| s.crate_path = Some(v)),
        )
        .doc("path of the kubeforge crate in generated code (default `::kubeforge`)"),
    ],
};
