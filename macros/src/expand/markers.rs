//! Markers and rules as OpenAPI schema keys (a schemars `extend`), and as the `Checks` literal
//! of the client-side validation.

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::{Map, Value, json};
use syn::LitStr;

use crate::keys::{Keyed, Number};
use crate::markers::Markers;
use crate::model::Rule;

/// The marker key of `required` / `optional` (and `optional_spec`), read by the structural pass.
pub(super) const REQUIRED: &str = "x-kubeforge-required";

/// The key of the groups of `exactly_one_of` & co., read by the structural pass.
pub(super) const ONE_OF: &str = "x-kubeforge-one-of";

/// The key prefix of a type's own markers (one key per type), merged by the structural pass.
pub(super) const TYPE_MARKERS: &str = "x-kubeforge-type-markers:";

/// The key of a rule's estimated cost (before cardinality), read by the runtime's cost check.
pub(super) const RULE_COST: &str = "x-kubeforge-cost";

/// The key of a rule's message expression's estimated cost.
pub(super) const MESSAGE_EXPRESSION_COST: &str = "x-kubeforge-message-expression-cost";

/// A rule as an `x-kubernetes-validations` entry.
pub(super) fn rule_json(rule: &Rule) -> Value {
    let mut m = Map::new();
    m.insert("rule".to_owned(), Value::String(rule.cel.value()));
    let mut put = |k: &str, v: &Option<LitStr>| {
        if let Some(v) = v {
            m.insert(k.to_owned(), Value::String(v.value()));
        }
    };
    put("message", &rule.message);
    put("messageExpression", &rule.message_expression);
    put("reason", &rule.reason);
    put("fieldPath", &rule.field_path);
    if let Some(o) = rule.optional_old_self {
        m.insert("optionalOldSelf".to_owned(), Value::Bool(o));
    }
    // The typed estimate, for the runtime's CRD-wide cost check (removed from the CRD there).
    if let Some(costs) = rule.costs.get() {
        m.insert(RULE_COST.to_owned(), json!(costs.rule));
        if let Some(c) = costs.message_expression {
            m.insert(MESSAGE_EXPRESSION_COST.to_owned(), json!(c));
        }
    }
    Value::Object(m)
}

/// The schema keys a field's markers add (as a schemars `extend`).
pub(super) fn marker_schema(m: &Markers) -> Map<String, Value> {
    let mut s = Map::new();
    value_keys(m, &mut s);
    structure_keys(m, &mut s);
    s
}

/// The constraints on the value itself: bounds, lengths, counts, pattern, enum, format.
fn value_keys(m: &Markers, s: &mut Map<String, Value>) {
    let mut put = |k: &str, v: Value| {
        s.insert(k.to_owned(), v);
    };
    for (k, n) in [("minimum", &m.minimum), ("maximum", &m.maximum)] {
        if let Some(n) = n {
            put(k, Value::Number(n.value.clone()));
        }
    }
    if Markers::is_set(&m.exclusive_minimum) {
        put("exclusiveMinimum", json!(true));
    }
    if Markers::is_set(&m.exclusive_maximum) {
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
}

/// Rules, defaults, the `x-kubernetes-*` extensions, list and map semantics, and `items(..)`.
fn structure_keys(m: &Markers, s: &mut Map<String, Value>) {
    let mut put = |k: &str, v: Value| {
        s.insert(k.to_owned(), v);
    };
    // The apiserver rejects `uniqueItems: true` (quadratic cost); a set list is its equivalent.
    if Markers::is_set(&m.unique_items) && m.list_type.is_none() {
        put("x-kubernetes-list-type", json!("set"));
    }
    let mut rules: Vec<Value> = m.rules.iter().map(rule_json).collect();
    if Markers::is_set(&m.immutable) {
        rules.push(json!({"rule": "self == oldSelf", "message": "is immutable"}));
    }
    if !rules.is_empty() {
        put("x-kubeforge-validations", Value::Array(rules));
    }
    // Under a key of its own: the structural pass drops the `default` schemars derives from
    // `#[serde(default)]` and keeps only this one.
    if let Some(d) = &m.default {
        put("x-kubeforge-default", d.value.clone());
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
        ("x-kubeforge-no-format", &m.no_format),
    ] {
        if Markers::is_set(f) {
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
    for (key, nested) in [
        ("x-kubeforge-items", &m.items),
        ("x-kubeforge-values", &m.values),
    ] {
        if let Some(nested) = nested {
            put(key, Value::Object(marker_schema(&nested.value)));
        }
    }
    if let Some(t) = &m.type_ {
        put("x-kubeforge-type", json!(t.value()));
    }
    if let Some(t) = &m.title {
        put("x-kubeforge-title", json!(t.value()));
    }
    if let Some(e) = &m.example {
        put("x-kubeforge-example", e.value.clone());
    }
    // `optional` wins only where `required` is not set (both are an error).
    if let Some(required) = presence(m) {
        put(REQUIRED, json!(required));
    }
    if let Some(docs) = &m.external_docs {
        let mut d = Map::new();
        for (k, v) in [
            ("url", &docs.value.url),
            ("description", &docs.value.description),
        ] {
            if let Some(v) = v {
                d.insert(k.to_owned(), json!(v.value()));
            }
        }
        put("externalDocs", Value::Object(d));
    }
}

/// `Some(true)` for `required`, `Some(false)` for `optional`, `None` when serde decides.
fn presence(m: &Markers) -> Option<bool> {
    if Markers::is_set(&m.required) {
        Some(true)
    } else if Markers::is_set(&m.optional) {
        Some(false)
    } else {
        None
    }
}

pub(super) fn extend_attr(schema: &Map<String, Value>) -> Option<TokenStream> {
    if schema.is_empty() {
        return None;
    }
    let pairs = schema.iter().map(|(k, v)| {
        let v = super::json_tokens(v);
        quote!(#k = #v)
    });
    Some(quote!(#[schemars(extend(#(#pairs),*))]))
}

fn opt_f64(n: &Option<Number>) -> TokenStream {
    match n.as_ref().and_then(|n| n.value.as_f64()) {
        Some(v) => quote!(::core::option::Option::Some(#v)),
        None => quote!(::core::option::Option::None),
    }
}

fn opt_u64(n: &Option<Keyed<u64>>) -> TokenStream {
    match n {
        Some(v) => {
            let v = v.value;
            quote!(::core::option::Option::Some(#v))
        }
        None => quote!(::core::option::Option::None),
    }
}

/// Whether any marker has a client-side check.
pub(super) fn has_checks(m: &Markers) -> bool {
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
        || Markers::is_set(&m.unique_items)
        || m.list_type.as_ref().is_some_and(|t| t.value() == "set")
        || m.min_properties.is_some()
        || m.max_properties.is_some()
        || m.items.as_ref().is_some_and(|i| has_checks(&i.value))
        || m.values.as_ref().is_some_and(|v| has_checks(&v.value))
        || m.client_type.is_some()
        || Markers::is_set(&m.required)
}

pub(super) fn checks_const(m: &Markers, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let fields = checks_fields(m, krate);
    quote! {
        const __CHECKS: #p::Checks = #fields;
    }
}

/// The `Checks { .. }` literal of `m` (recursing into `items(..)`).
fn checks_fields(m: &Markers, krate: &syn::Path) -> TokenStream {
    let p = quote!(#krate::crd::__checks);
    let minimum = opt_f64(&m.minimum);
    let maximum = opt_f64(&m.maximum);
    let multiple_of = opt_f64(&m.multiple_of);
    let exclusive_minimum = Markers::is_set(&m.exclusive_minimum);
    let exclusive_maximum = Markers::is_set(&m.exclusive_maximum);
    let min_length = opt_u64(&m.min_length);
    let max_length = opt_u64(&m.max_length);
    let min_items = opt_u64(&m.min_items);
    let max_items = opt_u64(&m.max_items);
    let min_properties = opt_u64(&m.min_properties);
    let max_properties = opt_u64(&m.max_properties);
    let unique_items = Markers::is_set(&m.unique_items)
        || m.list_type.as_ref().is_some_and(|t| t.value() == "set");
    let pattern = super::opt_str(m.pattern.as_ref().map(LitStr::value));
    let format = super::opt_str(m.format.as_ref().map(LitStr::value));
    let enum_values = super::opt_str(
        m.enum_values
            .as_ref()
            .map(|e| Value::Array(e.value.clone()).to_string()),
    );
    let nested = |n: &Option<Keyed<Box<Markers>>>| match n {
        Some(n) => {
            let inner = checks_fields(&n.value, krate);
            quote!(::core::option::Option::Some(&#inner))
        }
        None => quote!(::core::option::Option::None),
    };
    let items = nested(&m.items);
    let values = nested(&m.values);
    let type_ = super::opt_str(m.client_type.clone());
    let required = Markers::is_set(&m.required);
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
            values: #values,
            type_: #type_,
            required: #required,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_schema_should_use_openapi_names() {
        let attr: syn::Attribute = syn::parse_quote!(#[validate(minimum = 1, exclusive_maximum, maximum = 5, list_type = "map", list_map_keys = ["name"], rule(cel = "self > 0", message = "m"))]);
        let mut m = Markers::default();
        let mut errors = crate::errors::Errors::default();
        crate::markers::parse(&attr, &mut m, &mut errors);
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
