//! The typed model of a view: its full type, and each field's layers (`Option`, `Vec`,
//! `BTreeMap`) down to the type projected from the full field's.

use syn::{GenericArgument, Ident, ItemStruct, PathArguments, Type};

use super::attrs::ViewAttrs;
use crate::errors::Errors;

/// A checked `#[kubeforge::view]`.
pub struct View {
    pub ident: Ident,
    pub of: Type,
    pub krate: syn::Path,
    pub fields: Vec<Field>,
    /// Whether the view has `metadata`: a view of a kind, which can be watched.
    pub is_kind: bool,
}

/// One field of a view.
pub struct Field {
    pub ident: Ident,
    pub shape: Shape,
}

/// How a view field's type is projected from the full field's.
pub enum Shape {
    /// `Option<..>`: the full field is an `Option` of what the inner shape projects.
    Option(Box<Shape>),
    /// `Vec<..>`.
    Vec(Box<Shape>),
    /// `BTreeMap<K, ..>`: the keys are copied.
    Map(Box<Shape>),
    /// Any other type: the full field's type itself or a view of it (`ViewOf`).
    Leaf(Box<Type>),
}

impl Shape {
    fn of(ty: &Type) -> Shape {
        let layer = |name: &str, arg: usize| -> Option<&Type> {
            let Type::Path(path) = ty else { return None };
            if path.qself.is_some() {
                return None;
            }
            let last = path.path.segments.last()?;
            if last.ident != name {
                return None;
            }
            let PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            let types: Vec<&Type> = args
                .args
                .iter()
                .filter_map(|a| match a {
                    GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect();
            (types.len() == arg + 1).then(|| types[arg])
        };
        if let Some(inner) = layer("Option", 0) {
            Shape::Option(Box::new(Shape::of(inner)))
        } else if let Some(inner) = layer("Vec", 0) {
            Shape::Vec(Box::new(Shape::of(inner)))
        } else if let Some(inner) = layer("BTreeMap", 1) {
            Shape::Map(Box::new(Shape::of(inner)))
        } else {
            Shape::Leaf(Box::new(ty.clone()))
        }
    }
}

/// Reads the view's model off `item`, reporting what is wrong. `None` without `of` (no
/// projection can be generated).
pub fn build(attrs: ViewAttrs, item: &ItemStruct, errors: &mut Errors) -> Option<View> {
    if !item.generics.params.is_empty() {
        errors.spanned(
            &item.generics,
            "#[kubeforge::view] does not take generic parameters: a view projects one full type",
        );
    }
    let mut fields = Vec::new();
    let mut is_kind = false;
    for field in &item.fields {
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        if ident == "metadata" {
            is_kind = true;
            if !is_object_meta(&field.ty) {
                errors.spanned(
                    &field.ty,
                    "a view's `metadata` is `ObjectMeta` (k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta): the runtime reads names, labels and owners from it",
                );
            }
        }
        fields.push(Field {
            ident,
            shape: Shape::of(&field.ty),
        });
    }
    let krate = attrs
        .crate_path
        .unwrap_or_else(|| syn::parse_quote!(::kubeforge));
    let of = attrs.of?;
    Some(View {
        ident: item.ident.clone(),
        of,
        krate,
        fields,
        is_kind,
    })
}

fn is_object_meta(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "ObjectMeta" && s.arguments.is_none()))
}
