//! Expand: emits tokens from the validated model. No decisions here beyond choosing templates.
//!
//! Every path goes through `<crate>::__private` (default `::kubeforge`), so the user's crate needs
//! no direct dependency on serde, schemars, garde, kube or inventory.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use serde_json::{Map, Value, json};
use syn::{ItemStruct, LitStr};

use crate::attrs::{RawMarkers, RawRule};
use crate::model::{Field, Kind, Scope, Shape};

fn json_tokens(value: &Value) -> TokenStream {
    // JSON text is a valid token stream for schemars' `extend` (a `json!`-like macro).
    serde_json::to_string(value)
        .ok()
        .and_then(|s| syn::parse_str(&s).ok())
        .unwrap_or_else(|| quote!(null))
}

fn rule_json(rule: &RawRule) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: &Option<LitStr>| {
        if let Some(v) = v {
            m.insert(k.to_owned(), Value::String(v.value()));
        }
    };
    put("rule", &rule.cel);
    put("message", &rule.message);
    put("messageExpression", &rule.message_expression);
    put("reason", &rule.reason);
    put("fieldPath", &rule.field_path);
    if let Some(o) = rule.optional_old_self {
        m.insert("optionalOldSelf".to_owned(), Value::Bool(o));
    }
    Value::Object(m)
}

/// The schema keys a field's markers add (as a schemars `extend`).
pub fn marker_schema(m: &RawMarkers) -> Map<String, Value> {
    let mut s = Map::new();
    let mut put = |k: &str, v: Value| {
        s.insert(k.to_owned(), v);
    };
    let flag = |f: &Option<crate::attrs::Keyed<bool>>| f.as_ref().is_some_and(|f| f.value);
    if let Some(n) = &m.minimum {
        put("minimum", Value::Number(n.value.clone()));
    }
    if let Some(n) = &m.maximum {
        put("maximum", Value::Number(n.value.clone()));
    }
    if flag(&m.exclusive_minimum) {
        put("exclusiveMinimum", json!(true));
    }
    if flag(&m.exclusive_maximum) {
        put("exclusiveMaximum", json!(true));
    }
    if let Some(n) = &m.multiple_of {
        put("multipleOf", Value::Number(n.value.clone()));
    }
    for (k, v) in [
        ("minLength", &m.min_length),
        ("maxLength", &m.max_length),
        ("minItems", &m.min_items),
        ("maxItems", &m.max_items),
        ("minProperties", &m.min_properties),
        ("maxProperties", &m.max_properties),
    ] {
        if let Some(v) = v {
            put(k, json!(v.value));
        }
    }
    if let Some(p) = &m.pattern {
        put("pattern", json!(p.value()));
    }
    if let Some(e) = &m.enum_values {
        put("enum", Value::Array(e.value.clone()));
    }
    if let Some(f) = &m.format {
        put("format", json!(f.value()));
    }
    // The apiserver rejects `uniqueItems: true` (quadratic cost); a set list is its equivalent.
    if flag(&m.unique_items) && m.list_type.is_none() {
        put("x-kubernetes-list-type", json!("set"));
    }
    if !m.rules.is_empty() {
        put(
            "x-kubeforge-validations",
            Value::Array(m.rules.iter().map(rule_json).collect()),
        );
    }
    if let Some(d) = &m.default {
        put("default", d.value.clone());
    }
    for (k, f) in [
        ("nullable", &m.nullable),
        (
            "x-kubernetes-preserve-unknown-fields",
            &m.preserve_unknown_fields,
        ),
        ("x-kubernetes-embedded-resource", &m.embedded_resource),
        ("x-kubeforge-int-or-string", &m.int_or_string),
        ("x-kubeforge-schemaless", &m.schemaless),
    ] {
        if flag(f) {
            put(k, json!(true));
        }
    }
    if let Some(t) = &m.list_type {
        put("x-kubernetes-list-type", json!(t.value()));
    }
    if !m.list_map_keys.is_empty() {
        put(
            "x-kubernetes-list-map-keys",
            Value::Array(m.list_map_keys.iter().map(|k| json!(k.value())).collect()),
        );
    }
    if let Some(t) = &m.map_type {
        put("x-kubernetes-map-type", json!(t.value()));
    }
    if let Some(items) = &m.items {
        put(
            "x-kubeforge-items",
            Value::Object(marker_schema(&items.value)),
        );
    }
    s
}

fn extend_attr(schema: &Map<String, Value>) -> Option<TokenStream> {
    if schema.is_empty() {
        return None;
    }
    let pairs = schema.iter().map(|(k, v)| {
        let v = json_tokens(v);
        quote!(#k = #v)
    });
    Some(quote!(#[schemars(extend(#(#pairs),*))]))
}

fn opt_f64(n: &Option<crate::attrs::Number>) -> TokenStream {
    match n.as_ref().and_then(|n| n.value.as_f64()) {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}

fn opt_u64(n: &Option<crate::attrs::Keyed<u64>>) -> TokenStream {
    match n {
        Some(v) => {
            let v = v.value;
            quote!(::core::option::Option::Some(#v))
        }
        None => quote!(::core::option::Option::None),
    }
}

fn opt_str(s: Option<String>) -> TokenStream {
    match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

/// Whether any marker has a client-side check.
fn has_checks(m: &RawMarkers) -> bool {
    m.minimum.is_some()
        || m.maximum.is_some()
        || m.multiple_of.is_some()
        || m.min_length.is_some()
        || m.max_length.is_some()
        || m.pattern.is_some()
        || m.enum_values.is_some()
        || m.format.is_some()
        || m.min_items.is_some()
        || m.max_items.is_some()
        || m.unique_items.as_ref().is_some_and(|u| u.value)
        || m.list_type.as_ref().is_some_and(|t| t.value() == "set")
        || m.min_properties.is_some()
        || m.max_properties.is_some()
        || m.items.as_ref().is_some_and(|i| has_checks(&i.value))
}

fn checks_const(m: &RawMarkers, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let fields = checks_fields(m, krate);
    quote! {
        const __CHECKS: #p::Checks = #fields;
    }
}

/// The `Checks { .. }` literal of `m` (recursing into `items(..)`).
fn checks_fields(m: &RawMarkers, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let flag = |f: &Option<crate::attrs::Keyed<bool>>| f.as_ref().is_some_and(|f| f.value);
    let minimum = opt_f64(&m.minimum);
    let maximum = opt_f64(&m.maximum);
    let multiple_of = opt_f64(&m.multiple_of);
    let exclusive_minimum = flag(&m.exclusive_minimum);
    let exclusive_maximum = flag(&m.exclusive_maximum);
    let min_length = opt_u64(&m.min_length);
    let max_length = opt_u64(&m.max_length);
    let min_items = opt_u64(&m.min_items);
    let max_items = opt_u64(&m.max_items);
    let min_properties = opt_u64(&m.min_properties);
    let max_properties = opt_u64(&m.max_properties);
    let unique_items =
        flag(&m.unique_items) || m.list_type.as_ref().is_some_and(|t| t.value() == "set");
    let pattern = opt_str(m.pattern.as_ref().map(LitStr::value));
    let format = opt_str(m.format.as_ref().map(LitStr::value));
    let enum_values = opt_str(
        m.enum_values
            .as_ref()
            .map(|e| Value::Array(e.value.clone()).to_string()),
    );
    let items = match &m.items {
        Some(items) => {
            let inner = checks_fields(&items.value, krate);
            quote!(::core::option::Option::Some(&#inner))
        }
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #p::Checks {
            minimum: #minimum,
            maximum: #maximum,
            exclusive_minimum: #exclusive_minimum,
            exclusive_maximum: #exclusive_maximum,
            multiple_of: #multiple_of,
            min_length: #min_length,
            max_length: #max_length,
            pattern: #pattern,
            enum_values: #enum_values,
            format: #format,
            min_items: #min_items,
            max_items: #max_items,
            unique_items: #unique_items,
            min_properties: #min_properties,
            max_properties: #max_properties,
            items: #items,
        }
    }
}

/// The body of `validate_into` for the fields of a struct.
fn validate_fields(fields: &[Field], krate: &syn::Path) -> TokenStream {
    validate_fields_with(fields, krate, &quote!(__parent), |f| {
        let ident = &f.ident;
        quote!(&self.#ident)
    })
}

/// Validation of `fields`, each reached through `access` (a reference expression), with paths
/// below the path closure `parent`.
fn validate_fields_with(
    fields: &[Field],
    krate: &syn::Path,
    parent: &TokenStream,
    access: impl Fn(&Field) -> TokenStream,
) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let per_field = fields.iter().filter(|f| !f.serde.skip).map(|f| {
        let value = access(f);
        let name = &f.json_name;
        let path = if f.serde.flatten || f.serde.transparent {
            quote!(let mut __path = || #parent();)
        } else {
            quote!(let mut __path = || #parent().join(#name);)
        };
        let checks = has_checks(&f.markers).then(|| {
            let constant = checks_const(&f.markers, krate);
            quote! {
                #constant
                let __value = #p::to_json(#value, &mut __path, __report);
                #p::check(&__value, &__CHECKS, &mut __path, __report);
            }
        });
        quote! {
            {
                #path
                #checks
                {
                    #[allow(unused_imports)]
                    use #p::{DiveNone as _, DiveValidate as _};
                    (&#p::Dive(#value)).dive(&mut __path, __report);
                }
            }
        }
    });
    quote!(#(#per_field)*)
}

fn validate_impl(ident: &syn::Ident, body: TokenStream, krate: &syn::Path) -> TokenStream {
    let g = quote!(#krate::__private::garde);
    quote! {
        impl #g::Validate for #ident {
            type Context = ();

            #[allow(unused_variables, unused_mut, clippy::redundant_closure)]
            fn validate_into(
                &self,
                __ctx: &(),
                __parent: &mut dyn ::core::ops::FnMut() -> #g::Path,
                __report: &mut #g::Report,
            ) {
                #body
            }
        }
    }
}

fn crate_str(krate: &syn::Path, module: &str) -> String {
    let module = format_ident!("{module}");
    quote!(#krate::__private::#module)
        .to_string()
        .replace(' ', "")
}

/// Adds the derives and schema attributes to a struct or enum (`item_attrs`) and returns them.
pub fn derive_attrs(krate: &syn::Path, rules: &[RawRule]) -> TokenStream {
    let serde_crate = crate_str(krate, "serde");
    let schemars_crate = crate_str(krate, "schemars");
    let rules = (!rules.is_empty()).then(|| {
        let v = json_tokens(&Value::Array(rules.iter().map(rule_json).collect()));
        quote!(#[schemars(extend("x-kubernetes-validations" = #v))])
    });
    quote! {
        #[derive(#krate::__private::serde::Serialize, #krate::__private::serde::Deserialize, #krate::__private::schemars::JsonSchema)]
        #[serde(crate = #serde_crate)]
        #[schemars(crate = #schemars_crate)]
        #rules
    }
}

/// Adds one `#[schemars(extend(..))]` per field with markers.
pub fn add_field_extends(item: &mut ItemStruct, fields: &[Field]) {
    for (field, model) in item.fields.iter_mut().zip(fields) {
        if let Some(extend) = extend_attr(&marker_schema(&model.markers)) {
            field.attrs.push(syn::parse_quote!(#extend));
        }
    }
}

/// A struct with markers: the struct (derives added, markers consumed) and its `Validate` impl.
pub fn schema_struct(
    item: &mut ItemStruct,
    fields: &[Field],
    rules: &[RawRule],
    krate: &syn::Path,
) -> TokenStream {
    add_field_extends(item, fields);
    let derives = derive_attrs(krate, rules);
    let body = validate_fields(fields, krate);
    let validate = validate_impl(&item.ident, body, krate);
    let json_fields = match fields {
        [only] if only.serde.transparent => transparent_paths(&item.ident, &only.inner_ty, krate),
        _ => json_field_impls(&item.ident, fields, krate),
    };
    quote! {
        #derives
        #item
        #validate
        #json_fields
    }
}

/// FNV-1a of a JSON name; must match `kubeforge::crd::__checks::name_hash`.
pub fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn shape_tokens(shape: Shape, krate: &syn::Path) -> TokenStream {
    let variant = format_ident!("{}", format!("{shape:?}"));
    quote!(#krate::crd::__checks::JsonShape::#variant)
}

/// One `JsonField` impl per serialized field, for compile-time JSONPath resolution. Flattened
/// and skipped fields have no own JSON name; transparent structs have no fields in JSON.
fn json_field_impls(ident: &syn::Ident, fields: &[Field], krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let impls = fields
        .iter()
        .filter(|f| !f.serde.skip && !f.serde.flatten && !f.serde.transparent)
        .map(|f| {
            let hash = name_hash(&f.json_name);
            let ty = &f.inner_ty;
            let shape = shape_tokens(f.shape, krate);
            quote! {
                impl #p::JsonField<#hash> for #ident {
                    type Ty = #ty;
                    const SHAPE: #p::JsonShape = #shape;
                }
            }
        });
    quote!(#(#impls)*)
}

/// A `const` block that resolves `path` through the `JsonField` impls of the spec or status type
/// and checks the leaf's shape; every token carries the path literal's span, so a typo or a
/// wrong type is reported at the literal.
pub fn path_check(
    kind: &Kind,
    spec: &syn::Ident,
    lit: &LitStr,
    allowed: &[Shape],
    message: &str,
) -> TokenStream {
    let krate = &kind.crate_path;
    let p = quote!(#krate::crd::__checks);
    if kind.unchecked.contains(&lit.value()) {
        return quote!();
    }
    let Some(steps) = crate::validate::parse_path(&lit.value()) else {
        return quote!();
    };
    let span = lit.span();
    // Re-spanned so that an unknown first field is reported at the literal, not at the type.
    let root = match steps.first().map(|s| s.name.as_str()) {
        Some("spec") => respan(quote!(#spec), span),
        Some("status") => match &kind.status {
            Some(status) => respan(quote!(#status), span),
            None => return quote!(),
        },
        // `.metadata` is ObjectMeta: known to Kubernetes, not to kubeforge's tables.
        _ => return quote!(),
    };
    if steps.len() == 1 {
        return quote!();
    }
    let mut ty = root;
    let mut shape = quote!(#p::JsonShape::Other);
    for step in &steps[1..] {
        let hash = name_hash(&step.name);
        shape = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::SHAPE);
        ty = quote_spanned!(span=> <#ty as #p::JsonField<#hash>>::Ty);
        for _ in 0..step.indexes {
            ty = quote_spanned!(span=> <#ty as #p::JsonElement>::Elem);
            shape = quote!(#p::JsonShape::Other);
        }
    }
    let allowed = allowed.iter().map(|s| shape_tokens(*s, krate));
    quote_spanned! {span=>
        const _: () = {
            // Resolving the type fails to compile when a step names no field.
            let _ = ::core::marker::PhantomData::<#ty>;
            if !#shape.is_one_of(&[#(#allowed),*]) {
                ::core::panic!(#message);
            }
        };
    }
}

/// An enum: derives, markers of struct-variant fields as schema extensions, and a `Validate`
/// impl that checks them and dives into every variant's fields, at the paths serde's tagging
/// gives them.
pub fn schema_enum(
    item: &mut syn::ItemEnum,
    model: &crate::model::Enum,
    rules: &[RawRule],
    krate: &syn::Path,
) -> TokenStream {
    use crate::model::Tagging;

    let derives = derive_attrs(krate, rules);
    let p = quote!(#krate::crd::__checks);
    for (variant, vm) in item.variants.iter_mut().zip(&model.variants) {
        for (field, fm) in variant.fields.iter_mut().zip(&vm.fields) {
            if let Some(extend) = extend_attr(&marker_schema(&fm.markers)) {
                field.attrs.push(syn::parse_quote!(#extend));
            }
        }
    }
    let arms = item.variants.iter().zip(&model.variants).map(|(v, vm)| {
        let name = &v.ident;
        let tag = &vm.json_name;
        let count = v.fields.len();
        // Where the variant's content is: externally tagged under its name, adjacently tagged
        // under the content key, otherwise at the enum's own path.
        let prefix = match &model.tagging {
            Tagging::External => quote!(let mut __variant = || __parent().join(#tag);),
            Tagging::Adjacent { content } => {
                quote!(let mut __variant = || __parent().join(#content);)
            }
            Tagging::Internal | Tagging::Untagged => quote!(let mut __variant = || __parent();),
        };
        match &v.fields {
            syn::Fields::Unit => quote!(Self::#name => {}),
            syn::Fields::Unnamed(_) => {
                let binds: Vec<syn::Ident> = (0..count).map(|i| format_ident!("__f{i}")).collect();
                let dives = binds.iter().enumerate().map(|(i, b)| {
                    let path = if count == 1 {
                        quote!(let mut __path = || __variant();)
                    } else {
                        quote!(let mut __path = || __variant().join(#i);)
                    };
                    quote! { { #path (&#p::Dive(#b)).dive(&mut __path, __report); } }
                });
                quote! {
                    Self::#name(#(#binds),*) => {
                        #prefix
                        #(#dives)*
                    }
                }
            }
            syn::Fields::Named(_) => {
                let idents: Vec<&syn::Ident> = vm.fields.iter().map(|f| &f.ident).collect();
                let body = validate_fields_with(&vm.fields, krate, &quote!(__variant), |f| {
                    let ident = &f.ident;
                    quote!(#ident)
                });
                quote! {
                    Self::#name { #(#idents),* } => {
                        #prefix
                        #body
                    }
                }
            }
        }
    });
    let body = if item.variants.is_empty() {
        quote!()
    } else {
        quote! {
            #[allow(unused_imports)]
            use #p::{DiveNone as _, DiveValidate as _};
            match self { #(#arms)* }
        }
    };
    let validate = validate_impl(&item.ident, body, krate);
    quote! {
        #derives
        #item
        #validate
    }
}

/// A tuple struct: derives, and a `Validate` impl that dives into each field (a newtype is its
/// field in JSON, so the path does not change; other tuples are JSON arrays).
pub fn schema_tuple(item: &ItemStruct, rules: &[RawRule], krate: &syn::Path) -> TokenStream {
    let derives = derive_attrs(krate, rules);
    let p = quote!(#krate::crd::__checks);
    let newtype = item.fields.len() == 1;
    let dives = (0..item.fields.len()).map(|i| {
        let index = syn::Index::from(i);
        let path = if newtype {
            quote!(let mut __path = || __parent();)
        } else {
            quote!(let mut __path = || __parent().join(#i);)
        };
        quote! {
            {
                #path
                (&#p::Dive(&self.#index)).dive(&mut __path, __report);
            }
        }
    });
    let body = quote! {
        #[allow(unused_imports)]
        use #p::{DiveNone as _, DiveValidate as _};
        #(#dives)*
    };
    let validate = validate_impl(&item.ident, body, krate);
    let forward = match item.fields.iter().next() {
        Some(field) if newtype => transparent_paths(&item.ident, &field.ty, krate),
        _ => quote!(),
    };
    quote! {
        #derives
        #item
        #validate
        #forward
    }
}

/// JSONPath resolution through a type that is its only field in JSON (a newtype or a
/// `#[serde(transparent)]` struct): fields of the inner type, elements of an inner list.
fn transparent_paths(ident: &syn::Ident, inner: &syn::Type, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let inner = crate::model::inner_type(inner);
    let fields = quote! {
        impl<const __NAME: u64> #p::JsonField<__NAME> for #ident
        where
            #inner: #p::JsonField<__NAME>,
        {
            type Ty = <#inner as #p::JsonField<__NAME>>::Ty;
            const SHAPE: #p::JsonShape = <#inner as #p::JsonField<__NAME>>::SHAPE;
        }
    };
    let elements = (crate::model::shape(&inner) == Shape::Array).then(|| {
        quote! {
            impl #p::JsonElement for #ident {
                type Elem = <#inner as #p::JsonElement>::Elem;
            }
        }
    });
    quote!(#fields #elements)
}

/// The root type, its impls and its registration.
pub fn kind(kind: &Kind, spec: &ItemStruct, check_paths: bool) -> TokenStream {
    let krate = &kind.crate_path;
    let private = quote!(#krate::__private);
    let serde = quote!(#private::serde);
    let kube = quote!(#private::kube);
    let k8s = quote!(#private::k8s_openapi);
    let garde = quote!(#private::garde);
    let schemars = quote!(#private::schemars);
    let vis = &spec.vis;
    let spec_ty = &spec.ident;
    let root = syn::Ident::new(&kind.kind.value(), kind.kind.span());
    let kind_name = kind.kind.value();
    let group = kind.group.value();
    let version = kind.version.value();
    let api_version = format!("{group}/{version}");
    let plural = &kind.plural;
    let singular = &kind.singular;
    let meta = quote!(#k8s::apimachinery::pkg::apis::meta::v1::ObjectMeta);
    let scope = match kind.scope {
        Scope::Namespaced => quote!(#k8s::NamespaceResourceScope),
        Scope::Cluster => quote!(#k8s::ClusterResourceScope),
    };
    let namespaced = kind.scope == Scope::Namespaced;
    let doc = format!(
        "The `{kind_name}` kind (`{api_version}`), generated by `#[custom_resource]` from [`{spec_ty}`]."
    );

    let (status_field, status_ty, status_schema, status_ser, status_validate, has_status) =
        match &kind.status {
            Some(status) => (
                quote! {
                    /// The observed state, written by the controller through the status subresource.
                    #[serde(default, skip_serializing_if = "::core::option::Option::is_none")]
                    pub status: ::core::option::Option<#status>,
                },
                quote!(#status),
                quote!(::core::option::Option::Some(#krate::crd::raw_schema::<#status>())),
                quote! {
                    match &self.status {
                        ::core::option::Option::Some(status) => __s.serialize_field("status", status)?,
                        ::core::option::Option::None => __s.skip_field("status")?,
                    }
                },
                quote! {
                    {
                        let mut __path = || __parent().join("status");
                        #[allow(unused_imports)]
                        use #krate::crd::__checks::{DiveNone as _, DiveValidate as _};
                        (&#krate::crd::__checks::Dive(&self.status)).dive(&mut __path, __report);
                    }
                },
                true,
            ),
            None => (
                quote!(),
                quote!(()),
                quote!(::core::option::Option::None),
                quote!(),
                quote!(),
                false,
            ),
        };
    let status_new = has_status.then(|| quote!(status: ::core::option::Option::None,));
    // Spanned at the user's status type: a status that is not a JsonSchema is reported there.
    let status_schema_prop = kind.status.as_ref().map(|status| {
        quote_spanned!(syn::spanned::Spanned::span(status)=>
            "status": __generator.subschema_for::<::core::option::Option<#status>>(),)
    });
    let has_status_impl = has_status.then(|| {
        quote! {
            impl #kube::core::object::HasStatus for #root {
                type Status = #status_ty;
                fn status(&self) -> ::core::option::Option<&#status_ty> {
                    self.status.as_ref()
                }
                fn status_mut(&mut self) -> &mut ::core::option::Option<#status_ty> {
                    &mut self.status
                }
            }
        }
    });
    let serde_crate = crate_str(krate, "serde");
    let field_count = if has_status { 5usize } else { 4usize };

    let short_names = kind.shortnames.iter().map(LitStr::value);
    let short_names_again = short_names.clone();
    let crd_name = format!("{plural}.{group}");
    let categories = kind.categories.iter().map(LitStr::value);
    let selectable = kind.selectable_fields.iter().map(LitStr::value);
    let labels = kind.labels.iter().map(|(k, v)| {
        let (k, v) = (k.value(), v.value());
        quote!((#k, #v))
    });
    let annotations = kind.annotations.iter().map(|(k, v)| {
        let (k, v) = (k.value(), v.value());
        quote!((#k, #v))
    });
    let deprecated = opt_str(
        kind.deprecated
            .as_ref()
            .map(|w| w.as_ref().map(LitStr::value).unwrap_or_default()),
    );
    let served = kind.served;
    let storage = kind.storage;
    let scale = match &kind.scale {
        Some(s) => {
            let spec = s.spec.as_ref().map(LitStr::value).unwrap_or_default();
            let status = s.status.as_ref().map(LitStr::value).unwrap_or_default();
            let selector = opt_str(s.selector.as_ref().map(LitStr::value));
            quote!(::core::option::Option::Some(#krate::crd::ScaleInfo {
                spec_replicas_path: #spec,
                status_replicas_path: #status,
                label_selector_path: #selector,
            }))
        }
        None => quote!(::core::option::Option::None),
    };
    let columns = kind.printcolumns.iter().map(|c| {
        let s = |l: &Option<LitStr>| l.as_ref().map(LitStr::value).unwrap_or_default();
        let (name, type_, json_path) = (s(&c.name), s(&c.type_), s(&c.json_path));
        let format = opt_str(c.format.as_ref().map(LitStr::value));
        let description = opt_str(c.description.as_ref().map(LitStr::value));
        let priority = c
            .priority
            .as_ref()
            .map_or(0, |p| i32::try_from(p.value).unwrap_or(i32::MAX));
        quote!(#krate::crd::PrinterColumnInfo {
            name: #name,
            type_: #type_,
            json_path: #json_path,
            format: #format,
            description: #description,
            priority: #priority,
        })
    });

    let path_checks = check_paths.then(|| path_checks(kind, spec_ty));

    quote! {
        #path_checks

        #[doc = #doc]
        #[derive(::core::clone::Clone, ::core::fmt::Debug, #serde::Deserialize)]
        #[serde(crate = #serde_crate)]
        #vis struct #root {
            /// Standard object metadata (name, namespace, labels, ...).
            #[serde(default)]
            pub metadata: #meta,
            /// The desired state.
            pub spec: #spec_ty,
            #status_field
        }

        impl #root {
            /// A new object named `name` with `spec` and no status.
            #[must_use]
            pub fn new(name: &str, spec: #spec_ty) -> Self {
                Self {
                    metadata: #meta {
                        name: ::core::option::Option::Some(::std::string::ToString::to_string(name)),
                        ..::core::default::Default::default()
                    },
                    spec,
                    #status_new
                }
            }

            /// The CustomResourceDefinition of this version of the kind.
            #[must_use]
            pub fn crd() -> #k8s::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
                <Self as #krate::crd::CustomResource>::crd()
            }
        }

        impl #serde::Serialize for #root {
            fn serialize<__S: #serde::Serializer>(&self, __serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                use #serde::ser::SerializeStruct as _;
                let mut __s = __serializer.serialize_struct(#kind_name, #field_count)?;
                __s.serialize_field("apiVersion", #api_version)?;
                __s.serialize_field("kind", #kind_name)?;
                __s.serialize_field("metadata", &self.metadata)?;
                __s.serialize_field("spec", &self.spec)?;
                #status_ser
                __s.end()
            }
        }

        impl #schemars::JsonSchema for #root {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#kind_name)
            }

            fn json_schema(__generator: &mut #schemars::SchemaGenerator) -> #schemars::Schema {
                #schemars::json_schema!({
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": { "type": "string" },
                        "kind": { "type": "string" },
                        "metadata": __generator.subschema_for::<#meta>(),
                        "spec": __generator.subschema_for::<#spec_ty>(),
                        #status_schema_prop
                    }
                })
            }
        }

        impl #kube::Resource for #root {
            type DynamicType = ();
            type Scope = #scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(#kind_name)
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(#group)
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(#version)
            }
            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(#api_version)
            }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed(#plural)
            }
            fn meta(&self) -> &#meta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut #meta {
                &mut self.metadata
            }
        }

        impl #kube::CustomResourceExt for #root {
            fn crd() -> #k8s::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
                <Self as #krate::crd::CustomResource>::crd()
            }
            fn crd_name() -> &'static str {
                #crd_name
            }
            fn api_resource() -> #kube::core::ApiResource {
                #kube::core::ApiResource::erase::<Self>(&())
            }
            fn shortnames() -> &'static [&'static str] {
                &[#(#short_names_again),*]
            }
        }

        impl #kube::core::object::HasSpec for #root {
            type Spec = #spec_ty;
            fn spec(&self) -> &#spec_ty {
                &self.spec
            }
            fn spec_mut(&mut self) -> &mut #spec_ty {
                &mut self.spec
            }
        }

        #has_status_impl

        impl #krate::crd::CustomResource for #root {
            type Spec = #spec_ty;
            type Status = #status_ty;
            const INFO: #krate::crd::KindInfo = #krate::crd::KindInfo {
                group: #group,
                version: #version,
                kind: #kind_name,
                plural: #plural,
                singular: #singular,
                short_names: &[#(#short_names),*],
                categories: &[#(#categories),*],
                namespaced: #namespaced,
                served: #served,
                storage: #storage,
                deprecated: #deprecated,
                status_subresource: #has_status,
                scale: #scale,
                printer_columns: &[#(#columns),*],
                selectable_fields: &[#(#selectable),*],
                labels: &[#(#labels),*],
                annotations: &[#(#annotations),*],
            };

            fn schema() -> #private::serde_json::Value {
                #krate::crd::kind_schema(#krate::crd::raw_schema::<#spec_ty>(), #status_schema)
            }
        }

        impl #garde::Validate for #root {
            type Context = ();

            #[allow(clippy::redundant_closure)]
            fn validate_into(
                &self,
                __ctx: &(),
                __parent: &mut dyn ::core::ops::FnMut() -> #garde::Path,
                __report: &mut #garde::Report,
            ) {
                {
                    let mut __path = || __parent().join("spec");
                    #garde::Validate::validate_into(&self.spec, &(), &mut __path, __report);
                }
                #status_validate
            }
        }

        #private::inventory::submit! {
            #krate::crd::Registration {
                crd: <#root as #krate::crd::CustomResource>::crd,
            }
        }
    }
}

fn respan(tokens: TokenStream, span: proc_macro2::Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let proc_macro2::TokenTree::Group(g) = &tree {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tree = proc_macro2::TokenTree::Group(group);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// The compile-time checks of every JSONPath of the kind.
fn path_checks(kind: &Kind, spec: &syn::Ident) -> TokenStream {
    let mut out = TokenStream::new();
    for col in &kind.printcolumns {
        let (Some(path), Some(type_), Some(name)) = (&col.json_path, &col.type_, &col.name) else {
            continue;
        };
        let (allowed, noun): (&[Shape], &str) = match type_.value().as_str() {
            "integer" => (&[Shape::Integer], "an integer"),
            "number" => (&[Shape::Integer, Shape::Number], "a number"),
            "boolean" => (&[Shape::Bool], "a bool"),
            "date" => (&[Shape::String], "a date string"),
            _ => (&[Shape::String, Shape::IntOrString], "a string"),
        };
        let message = format!(
            "printer column `{}` has type {}, but `{}` is not {noun}",
            name.value(),
            type_.value(),
            path.value()
        );
        out.extend(path_check(kind, spec, path, allowed, &message));
    }
    if let Some(scale) = &kind.scale {
        for (path, what) in [
            (&scale.spec, "spec replicas"),
            (&scale.status, "status replicas"),
        ] {
            if let Some(path) = path {
                let message = format!(
                    "the scale {what} path `{}` must be an integer",
                    path.value()
                );
                out.extend(path_check(kind, spec, path, &[Shape::Integer], &message));
            }
        }
        if let Some(path) = &scale.selector {
            let message = format!(
                "the scale label selector path `{}` must be a string",
                path.value()
            );
            out.extend(path_check(kind, spec, path, &[Shape::String], &message));
        }
    }
    for path in &kind.selectable_fields {
        let message = format!(
            "selectable field `{}` must be a string, integer or bool",
            path.value()
        );
        let allowed = [Shape::String, Shape::Integer, Shape::Bool];
        out.extend(path_check(kind, spec, path, &allowed, &message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's `name_hash` test asserts the same value: both sides must agree.
    #[test]
    fn name_hash_should_be_fnv1a() {
        assert_eq!(name_hash("replicas"), 13652072405990351292);
    }

    #[test]
    fn marker_schema_should_use_openapi_names() {
        let attr: syn::Attribute = syn::parse_quote!(#[validate(minimum = 1, exclusive_maximum, maximum = 5, list_type = "map", list_map_keys = ["name"], rule(cel = "self > 0", message = "m"))]);
        let mut m = RawMarkers::default();
        let mut errors = crate::errors::Errors::default();
        crate::attrs::parse_markers(&attr, &mut m, &mut errors);
        assert_eq!(errors.messages(), Vec::<String>::new());
        assert_eq!(
            Value::Object(marker_schema(&m)),
            json!({
                "minimum": 1, "maximum": 5, "exclusiveMaximum": true,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "x-kubeforge-validations": [{"rule": "self > 0", "message": "m"}]
            })
        );
    }
}
