//! The tokens of a view: serde, the projection from the full type (which is also the
//! compile-time check of every field), and for a view of a kind `kube::Resource` and `View`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use super::model::{Shape, View};

/// The derives and serde attributes put on the user's struct (also when it has errors, so that
/// its `#[serde(..)]` field attributes stay known).
pub fn derives(krate: &syn::Path) -> TokenStream {
    let private = quote!(#krate::__private);
    let serde_crate = crate::expand::crate_str(krate, "serde");
    quote! {
        #[derive(
            ::core::clone::Clone,
            ::core::fmt::Debug,
            ::core::default::Default,
            ::core::cmp::PartialEq,
            #private::serde::Serialize,
            #private::serde::Deserialize
        )]
        #[serde(crate = #serde_crate, rename_all = "camelCase", default)]
    }
}

/// The impls of a checked view.
pub fn impls(view: &View) -> TokenStream {
    let View {
        ident, of, krate, ..
    } = view;
    let views = quote!(#krate::views);
    let full = format_ident!("__full");
    let fields = view.fields.iter().map(|field| {
        let name = &field.ident;
        // Spanned at the field: a misspelled or mismatched field is reported there.
        let at_field = proc_macro2::Ident::new("__full", name.span());
        let access = quote_spanned!(name.span()=> &#at_field.#name);
        let value = project(&views, &field.shape, access, name.span(), 0);
        quote!(#name: #value)
    });
    let resource = view.is_kind.then(|| resource(view));
    quote! {
        impl #views::ViewOf<#of> for #ident {
            fn project(#full: &#of) -> Self {
                Self { #(#fields),* }
            }
        }

        impl #ident {
            /// The view's fields of `full` (every other field left out).
            #[allow(dead_code)]
            pub fn project(full: &#of) -> Self {
                <Self as #views::ViewOf<#of>>::project(full)
            }
        }

        impl ::core::convert::From<&#of> for #ident {
            fn from(full: &#of) -> Self {
                <Self as #views::ViewOf<#of>>::project(full)
            }
        }

        #resource
    }
}

/// The projection of one field's value at `access` (a `&` of the full field's value), layer by
/// layer; each layer's call and value are spanned at the field, so a mismatch points at it.
fn project(
    views: &TokenStream,
    shape: &Shape,
    access: TokenStream,
    span: proc_macro2::Span,
    depth: usize,
) -> TokenStream {
    let each = format_ident!("__v{depth}", span = span);
    let inner = |inner: &Shape| project(views, inner, quote!(#each), span, depth + 1);
    match shape {
        Shape::Leaf(ty) => quote_spanned!(span=> #views::__leaf::<_, #ty>(#access)),
        Shape::Option(inner_shape) => {
            let inner = inner(inner_shape);
            quote_spanned!(span=> #views::__option(#access, |#each| #inner))
        }
        Shape::Vec(inner_shape) => {
            let inner = inner(inner_shape);
            quote_spanned!(span=> #views::__vec(#access, |#each| #inner))
        }
        Shape::Map(inner_shape) => {
            let inner = inner(inner_shape);
            quote_spanned!(span=> #views::__map(#access, |#each| #inner))
        }
    }
}

/// `kube::Resource` (the full kind's names and scope) and `View` of a view with `metadata`.
fn resource(view: &View) -> TokenStream {
    let View {
        ident, of, krate, ..
    } = view;
    let kube = quote!(#krate::__private::kube);
    let meta =
        quote!(#krate::__private::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta);
    let cow = quote!(::std::borrow::Cow<'_, str>);
    quote! {
        impl #kube::Resource for #ident {
            type DynamicType = ();
            type Scope = <#of as #kube::Resource>::Scope;

            fn kind(_: &()) -> #cow {
                <#of as #kube::Resource>::kind(&())
            }
            fn group(_: &()) -> #cow {
                <#of as #kube::Resource>::group(&())
            }
            fn version(_: &()) -> #cow {
                <#of as #kube::Resource>::version(&())
            }
            fn api_version(_: &()) -> #cow {
                <#of as #kube::Resource>::api_version(&())
            }
            fn plural(_: &()) -> #cow {
                <#of as #kube::Resource>::plural(&())
            }
            fn meta(&self) -> &#meta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut #meta {
                &mut self.metadata
            }
        }

        impl #krate::views::View for #ident {
            type Full = #of;
        }
    }
}
