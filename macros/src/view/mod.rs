//! `#[kubeforge::view(of = Full)]`: a read-only projection of a kind (or of a part of one), the
//! same stages as the other macros: keys (`attrs.rs`, by the shared table parser) → typed model
//! (`model.rs`: the full type, each field's `Option` / `Vec` / `BTreeMap` layers) → expansion
//! (`expand.rs`). The macro checks nothing of the full type itself: it generates the projection
//! `ViewOf<Full>::project`, reading each field of the full type into the field's type layer by
//! layer, and the compiler types it, so a misspelled field or a mismatched type is an error at
//! the field. On any error the struct is still emitted with its derives.

mod attrs;
mod expand;
mod model;

pub use attrs::VIEW;

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Item, ItemStruct};

use crate::errors::Errors;

/// The derives the macro adds itself; a user's derive of one would conflict.
const DERIVED: &[&str] = &[
    "Clone",
    "Debug",
    "Default",
    "PartialEq",
    "Serialize",
    "Deserialize",
];

/// `#[kubeforge::view(args)] input`.
pub fn view(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let attrs = crate::keys::parse_args(args, &VIEW, &mut errors);
    let item = match syn::parse2::<Item>(input) {
        Ok(Item::Struct(s)) if matches!(s.fields, syn::Fields::Named(_)) => s,
        Ok(Item::Struct(s)) => {
            errors.spanned(
                &s.fields,
                "#[kubeforge::view] needs a struct with named fields, named as the full type's fields",
            );
            return finish(errors, quote!(#s));
        }
        Ok(other) => {
            errors.spanned(
                &other,
                "#[kubeforge::view] goes on a struct with named fields",
            );
            return finish(errors, quote!(#other));
        }
        Err(e) => {
            errors.push(e);
            return finish(errors, TokenStream::new());
        }
    };
    let mut item = item;
    remove_own_derives(&mut item, &mut errors);
    let krate = attrs
        .crate_path
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::kubeforge));
    let derives = expand::derives(&krate);
    let view = model::build(attrs, &item, &mut errors);
    let impls = match (&view, errors.is_empty()) {
        (Some(view), true) => expand::impls(view),
        _ => TokenStream::new(),
    };
    finish(
        errors,
        quote! {
            #derives
            #item
            #impls
        },
    )
}

/// `tokens` with the errors' `compile_error!`s.
fn finish(errors: Errors, tokens: TokenStream) -> TokenStream {
    match errors.check() {
        Ok(()) => tokens,
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#tokens #e)
        }
    }
}

/// Reports and removes the user's derives of what the macro derives itself.
fn remove_own_derives(item: &mut ItemStruct, errors: &mut Errors) {
    for attr in item
        .attrs
        .iter_mut()
        .filter(|a| a.path().is_ident("derive"))
    {
        let Ok(paths) = attr.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
        ) else {
            continue;
        };
        let kept: Vec<&syn::Path> = paths
            .iter()
            .filter(|path| match path.segments.last() {
                Some(last) if DERIVED.contains(&last.ident.to_string().as_str()) => {
                    errors.spanned(
                        path,
                        format!(
                            "remove this derive: #[kubeforge::view] derives `{}` itself",
                            last.ident
                        ),
                    );
                    false
                }
                _ => true,
            })
            .collect();
        if kept.len() != paths.len() {
            *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: TokenStream, input: TokenStream) -> String {
        view(args, input).to_string()
    }

    #[test]
    fn view_should_project_each_field_through_its_layers() {
        let out = expand(
            quote!(of = PodSpec),
            quote!(
                struct PodSpecView {
                    node_name: Option<String>,
                    containers: Vec<ContainerView>,
                    node_selector: Option<BTreeMap<String, String>>,
                }
            ),
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("impl :: kubeforge :: views :: ViewOf < PodSpec > for PodSpecView"));
        assert!(out.contains(
            "node_name : :: kubeforge :: views :: __option (& __full . node_name , | __v0 | :: kubeforge :: views :: __leaf :: < _ , String > (__v0))"
        ), "{out}");
        assert!(out.contains("containers : :: kubeforge :: views :: __vec (& __full . containers , | __v0 | :: kubeforge :: views :: __leaf :: < _ , ContainerView > (__v0))"), "{out}");
        assert!(out.contains(":: kubeforge :: views :: __option (& __full . node_selector , | __v0 | :: kubeforge :: views :: __map (__v0 , | __v1 |"), "{out}");
        assert!(out.contains("rename_all = \"camelCase\""), "{out}");
        // A part of a kind: no `kube::Resource`.
        assert!(!out.contains("Resource for PodSpecView"), "{out}");
    }

    #[test]
    fn view_should_expand_like_the_snapshot() {
        let out = view(
            quote!(of = Pod),
            quote!(
                pub struct PodView {
                    pub metadata: ObjectMeta,
                    pub spec: Option<PodSpecView>,
                    pub labels: BTreeMap<String, String>,
                }
            ),
        );
        crate::pipeline::tests::snapshot("view.rs", &crate::pipeline::tests::pretty(out));
    }

    #[test]
    fn view_with_metadata_should_be_a_kind_of_the_full_kinds_names() {
        let out = expand(
            quote!(of = Pod, crate = "kf"),
            quote!(
                pub struct PodView {
                    pub metadata: ObjectMeta,
                }
            ),
        );
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("impl kf :: __private :: kube :: Resource for PodView"));
        assert!(
            out.contains("type Scope = < Pod as kf :: __private :: kube :: Resource > :: Scope")
        );
        assert!(out.contains("< Pod as kf :: __private :: kube :: Resource > :: plural (& ())"));
        assert!(out.contains("impl kf :: views :: View for PodView { type Full = Pod ; }"));
        assert!(
            out.contains("serde (crate = \"kf::__private::serde\""),
            "{out}"
        );
    }

    #[test]
    fn view_should_report_every_misuse_and_still_emit_the_struct() {
        let out = expand(
            quote!(off = Pod),
            quote!(
                #[derive(Clone, Serialize)]
                struct V<T> {
                    metadata: String,
                    t: T,
                }
            ),
        );
        for message in [
            "unknown `view` key `off`; did you mean `of`?",
            "remove this derive: #[kubeforge::view] derives `Clone` itself",
            "remove this derive: #[kubeforge::view] derives `Serialize` itself",
            "does not take generic parameters",
            "a view's `metadata` is `ObjectMeta`",
        ] {
            assert!(out.contains(message), "{message}: {out}");
        }
        assert!(
            !out.contains("needs `of = FullType`"),
            "the misspelled key is the missing one: {out}"
        );
        assert!(out.contains("struct V"), "{out}");
        assert!(!out.contains("ViewOf"), "{out}");

        let missing = expand(
            quote!(),
            quote!(
                struct V {
                    a: String,
                }
            ),
        );
        assert!(missing.contains("needs `of = FullType`"), "{missing}");
        let tuple = expand(
            quote!(of = Pod),
            quote!(
                struct V(String);
            ),
        );
        assert!(
            tuple.contains("needs a struct with named fields"),
            "{tuple}"
        );
        let on_enum = expand(
            quote!(of = Pod),
            quote!(
                enum V {
                    A,
                }
            ),
        );
        assert!(
            on_enum.contains("goes on a struct with named fields"),
            "{on_enum}"
        );
    }
}
