//! Parses `#[controller(...)]`'s arguments into [`ControllerArgs`], keeping spans and collecting
//! every error.

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::{Ident, LitStr, Path, Token, Type};

use crate::errors::{Errors, did_you_mean};
use crate::keys::{self, Key, Keyed, Table, Value};

/// A `watches(Kind, map = path)` entry.
pub struct Watch {
    pub kind: Type,
    pub map: Path,
}

/// What the cache keeps of an owned kind: `owns(A, B(metadata), C(uncached))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    Full,
    Metadata,
    Uncached,
}

/// An `owns(...)` entry: the kind and its options.
pub struct Owned {
    pub kind: Type,
    pub weight: Weight,
    /// `any_owner`: every owner reference to the primary counts, not only the controller one.
    pub any_owner: bool,
}

/// The options an `owns(...)` entry takes in parentheses.
const OWNS_OPTIONS: &[&str] = &["full", "metadata", "uncached", "any_owner"];

/// A predicate named in `predicates(...)`.
pub enum PredicateArg {
    /// One of the built-ins, by its snake_case name.
    Builtin(Ident),
    /// A custom predicate function `fn(&K, &K) -> bool`.
    Custom(Path),
}

/// The keys of `#[controller(...)]`, with the span of each key for error messages.
#[derive(Default)]
pub struct ControllerArgs {
    pub for_kind: Option<Type>,
    pub owns: Vec<Owned>,
    pub watches: Vec<Watch>,
    pub concurrency: Option<Keyed<u64>>,
    pub finalizer: Option<LitStr>,
    pub predicates: Vec<PredicateArg>,
    pub name: Option<LitStr>,
    /// `crate = "path"`: how generated code names kubeforge.
    pub crate_path: Option<Path>,
}

/// The keys of `#[controller(...)]`, read by the macros' one key parser ([`crate::keys`]).
const CONTROLLER: Table<ControllerArgs> = Table {
    what: "#[controller]",
    keys: &[
        Key::new("for", Value::Type(|a, ty| a.for_kind = Some(ty))),
        Key::repeatable("owns", Value::Custom(owns)),
        Key::repeatable("watches", Value::Custom(watches)),
        Key::new(
            "concurrency",
            Value::Unsigned(|a, n| a.concurrency = Some(n)),
        ),
        Key::new("finalizer", Value::Str(|a, lit| a.finalizer = Some(lit))),
        Key::new("predicates", Value::Custom(predicates)),
        Key::new("name", Value::Str(|a, lit| a.name = Some(lit))),
        Key::new(
            "crate",
            Value::CratePath(|a, path| a.crate_path = Some(path)),
        ),
        Key::repeatable("owns_metadata", Value::Custom(renamed)),
        Key::repeatable("owns_uncached", Value::Custom(renamed)),
    ],
};

pub const BUILTIN_PREDICATES: &[&str] = &[
    "generation_changed",
    "labels_changed",
    "annotations_changed",
    "resource_version_changed",
];

impl ControllerArgs {
    /// Reads the arguments and checks each value on its own (the impl block is checked later).
    pub fn parse(args: TokenStream, errors: &mut Errors) -> Self {
        let args = keys::parse_args(args, &CONTROLLER, errors);
        if let Some(n) = &args.concurrency
            && n.value == 0
        {
            errors.at(n.key, "`concurrency` must be a whole number of at least 1");
        }
        if let Some(finalizer) = &args.finalizer
            && !valid_finalizer(&finalizer.value())
        {
            errors.at(
                finalizer.span(),
                "a finalizer must be a qualified name like `example.com/cleanup` (a DNS subdomain, `/`, a name)",
            );
        }
        if let Some(name) = &args.name
            && name.value().is_empty()
        {
            errors.at(name.span(), "the controller name must not be empty");
        }
        args
    }
}

/// `owns(A, B(metadata), C(uncached, any_owner))`.
fn owns(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let content;
    syn::parenthesized!(content in meta.input);
    let before = args.owns.len();
    while !content.is_empty() {
        let kind: Type = content.parse()?;
        let options = if content.peek(syn::token::Paren) {
            let options;
            syn::parenthesized!(options in content);
            Punctuated::<Ident, Token![,]>::parse_terminated(&options)?
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        args.owns.push(owned(kind, &options, errors));
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    if args.owns.len() == before {
        errors.spanned(&meta.path, "`owns(...)` needs at least one kind");
    }
    Ok(())
}

/// One `owns` entry: the kind and the options in parentheses after it.
fn owned(kind: Type, options: &[Ident], errors: &mut Errors) -> Owned {
    let mut entry = Owned {
        kind,
        weight: Weight::Full,
        any_owner: false,
    };
    let mut weights = Vec::new();
    for option in options {
        let name = option.to_string();
        match name.as_str() {
            "full" => weights.push((option, Weight::Full)),
            "metadata" => weights.push((option, Weight::Metadata)),
            "uncached" => weights.push((option, Weight::Uncached)),
            "any_owner" => entry.any_owner = true,
            _ => errors.at(
                option.span(),
                format!(
                    "unknown option `{name}` of an owned kind; expected one of {}{}",
                    OWNS_OPTIONS.join(", "),
                    did_you_mean(&name, OWNS_OPTIONS)
                ),
            ),
        }
    }
    if let [_, (second, _), ..] = weights.as_slice() {
        errors.at(
            second.span(),
            "an owned kind is cached one way: `full`, `metadata` or `uncached`",
        );
    }
    if let Some((_, weight)) = weights.first() {
        entry.weight = *weight;
    }
    entry
}

/// `watches(Kind, map = Self::mapper)`.
fn watches(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    _: &mut Errors,
) -> syn::Result<()> {
    let content;
    syn::parenthesized!(content in meta.input);
    let kind: Type = content.parse()?;
    content.parse::<Token![,]>()?;
    let map_key = Ident::parse_any(&content)?;
    if map_key != "map" {
        return Err(syn::Error::new(
            map_key.span(),
            format!(
                "expected `map = <fn>` in `watches(Kind, map = Self::mapper)`, found `{map_key}`"
            ),
        ));
    }
    content.parse::<Token![=]>()?;
    let map: Path = content.parse()?;
    if !content.is_empty() {
        content.parse::<Token![,]>()?;
    }
    args.watches.push(Watch { kind, map });
    Ok(())
}

/// `predicates(generation_changed, Self::custom, ...)`.
fn predicates(
    args: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let content;
    syn::parenthesized!(content in meta.input);
    for path in Punctuated::<Path, Token![,]>::parse_terminated(&content)? {
        match path.get_ident() {
            Some(ident) if BUILTIN_PREDICATES.contains(&ident.to_string().as_str()) => {
                args.predicates.push(PredicateArg::Builtin(ident.clone()));
            }
            Some(ident) => errors.at(
                ident.span(),
                format!(
                    "unknown predicate `{ident}`; the built-ins are {}{} (or name a function `Self::f`)",
                    BUILTIN_PREDICATES.join(", "),
                    did_you_mean(&ident.to_string(), BUILTIN_PREDICATES)
                ),
            ),
            None => args.predicates.push(PredicateArg::Custom(path)),
        }
    }
    Ok(())
}

/// `owns_metadata(A)` and `owns_uncached(A)` became options of `owns`: says how to write them.
fn renamed(
    _: &mut ControllerArgs,
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
) -> syn::Result<()> {
    let name = meta
        .path
        .get_ident()
        .map(Ident::to_string)
        .unwrap_or_default();
    let option = name.trim_start_matches("owns_");
    errors.spanned(
        &meta.path,
        format!("`{name}(A)` is written `owns(A({option}))`"),
    );
    let content;
    syn::parenthesized!(content in meta.input);
    content.parse::<TokenStream>()?;
    Ok(())
}

/// `prefix/name` where the prefix is a DNS subdomain (kubebuilder's finalizer convention).
fn valid_finalizer(value: &str) -> bool {
    let Some((domain, name)) = value.split_once('/') else {
        return false;
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    domain.contains('.')
        && domain.split('.').all(label_ok)
        && !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: TokenStream) -> (ControllerArgs, Vec<String>) {
        let mut errors = Errors::default();
        let args = ControllerArgs::parse(tokens, &mut errors);
        (args, errors.messages())
    }

    #[test]
    fn args_should_parse_every_key() {
        let (args, errors) = parse(quote!(
            for = WebApp, owns(Deployment, Service), watches(Secret, map = Self::by_secret),
            owns(Pod(metadata)), owns(ConfigMap(uncached), Job(uncached, any_owner)), owns(CronJob(uncached)),
            concurrency = 4, finalizer = "apps.example.com/cleanup",
            predicates(generation_changed, Self::custom), name = "webapp", crate = "kf"
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.for_kind.is_some());
        let weights: Vec<_> = args.owns.iter().map(|o| o.weight).collect();
        use Weight::{Full, Metadata, Uncached};
        assert_eq!(
            weights,
            [Full, Full, Metadata, Uncached, Uncached, Uncached]
        );
        let any: Vec<_> = args.owns.iter().map(|o| o.any_owner).collect();
        assert_eq!(any, [false, false, false, false, true, false]);
        let job = &args.owns[4].kind;
        assert_eq!(
            quote!(#job).to_string(),
            "Job",
            "options are taken off the type"
        );
        assert_eq!(args.watches.len(), 1);
        assert_eq!(args.predicates.len(), 2);
        assert_eq!(args.finalizer.unwrap().value(), "apps.example.com/cleanup");
        assert!(args.crate_path.is_some_and(|p| p.is_ident("kf")));
    }

    #[test]
    fn args_should_report_every_bad_key() {
        let (_, errors) = parse(quote!(
            for = WebApp, concurency = 4, concurrency = 0, finalizer = "cleanup",
            predicates(generation_change), name = "a", name = "b"
        ));
        // Parse errors in order, then the checks of the values read.
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert_eq!(
            errors[0],
            "unknown #[controller] key `concurency`; did you mean `concurrency`?"
        );
        assert!(
            errors[1].contains("did you mean `generation_changed`"),
            "{errors:?}"
        );
        assert_eq!(errors[2], "duplicate key `name`; it is already set above");
        assert!(errors[3].contains("at least 1"), "{errors:?}");
        assert!(errors[4].contains("qualified name"), "{errors:?}");
    }

    #[test]
    fn owns_should_report_unknown_and_conflicting_options_and_the_old_keys() {
        let (_, errors) = parse(quote!(
            for = WebApp, owns(Pod(metdata), Job(metadata, uncached)), owns_uncached(ConfigMap)
        ));
        assert_eq!(
            errors,
            [
                "unknown option `metdata` of an owned kind; expected one of full, metadata, uncached, any_owner; did you mean `metadata`?",
                "an owned kind is cached one way: `full`, `metadata` or `uncached`",
                "`owns_uncached(A)` is written `owns(A(uncached))`",
            ]
        );
    }

    #[test]
    fn finalizer_names_should_be_qualified() {
        assert!(valid_finalizer("apps.example.com/cleanup"));
        assert!(!valid_finalizer("cleanup"));
        assert!(!valid_finalizer("example/cleanup"));
        assert!(!valid_finalizer("Apps.example.com/x"));
        assert!(!valid_finalizer("apps.example.com/"));
    }
}
