//! Parses `#[controller(...)]`'s arguments into [`ControllerArgs`], keeping spans and collecting
//! every error.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Ident, LitInt, LitStr, Path, Token, Type};

use crate::attrs::crate_path;
use crate::errors::{Errors, did_you_mean};

/// A `watches(Kind, map = path)` entry.
pub struct Watch {
    pub kind: Type,
    pub map: Path,
}

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
    pub for_kind: Option<(Span, Type)>,
    pub owns: Vec<Type>,
    pub owns_metadata: Vec<Type>,
    pub owns_uncached: Vec<Type>,
    pub watches: Vec<Watch>,
    pub concurrency: Option<LitInt>,
    pub finalizer: Option<LitStr>,
    pub predicates: Vec<PredicateArg>,
    pub name: Option<LitStr>,
    /// `crate = "path"`: how generated code names kubeforge.
    pub crate_path: Option<Path>,
}

const KEYS: &[&str] = &[
    "for",
    "owns",
    "owns_metadata",
    "owns_uncached",
    "watches",
    "concurrency",
    "finalizer",
    "predicates",
    "name",
    "crate",
];

pub const BUILTIN_PREDICATES: &[&str] = &[
    "generation_changed",
    "labels_changed",
    "annotations_changed",
    "resource_version_changed",
];

impl ControllerArgs {
    pub fn parse(args: TokenStream, errors: &mut Errors) -> Self {
        let mut parsed = ControllerArgs::default();
        let parser = |input: ParseStream| -> syn::Result<()> {
            let mut seen: Vec<String> = Vec::new();
            while !input.is_empty() {
                let key = Ident::parse_any(input)?;
                let name = key.to_string();
                if seen.contains(&name)
                    && !matches!(
                        name.as_str(),
                        "owns" | "watches" | "owns_metadata" | "owns_uncached"
                    )
                {
                    errors.at(key.span(), format!("duplicate key `{name}`"));
                }
                seen.push(name.clone());
                match name.as_str() {
                    "for" => {
                        input.parse::<Token![=]>()?;
                        parsed.for_kind = Some((key.span(), input.parse()?));
                    }
                    "owns" | "owns_metadata" | "owns_uncached" => {
                        let content;
                        syn::parenthesized!(content in input);
                        let kinds = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                        if kinds.is_empty() {
                            errors.at(key.span(), format!("`{name}(...)` needs at least one kind"));
                        }
                        let target = match name.as_str() {
                            "owns" => &mut parsed.owns,
                            "owns_metadata" => &mut parsed.owns_metadata,
                            _ => &mut parsed.owns_uncached,
                        };
                        target.extend(kinds);
                    }
                    "watches" => {
                        let content;
                        syn::parenthesized!(content in input);
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
                        parsed.watches.push(Watch { kind, map });
                    }
                    "concurrency" => {
                        input.parse::<Token![=]>()?;
                        let lit: LitInt = input.parse()?;
                        match lit.base10_parse::<usize>() {
                            Ok(0) | Err(_) => errors.at(
                                lit.span(),
                                "`concurrency` must be a whole number of at least 1",
                            ),
                            Ok(_) => {}
                        }
                        parsed.concurrency = Some(lit);
                    }
                    "finalizer" => {
                        input.parse::<Token![=]>()?;
                        let lit: LitStr = input.parse()?;
                        if !valid_finalizer(&lit.value()) {
                            errors.at(
                                lit.span(),
                                "a finalizer must be a qualified name like `example.com/cleanup` (a DNS subdomain, `/`, a name)",
                            );
                        }
                        parsed.finalizer = Some(lit);
                    }
                    "predicates" => {
                        let content;
                        syn::parenthesized!(content in input);
                        for path in Punctuated::<Path, Token![,]>::parse_terminated(&content)? {
                            match path.get_ident() {
                                Some(ident) if BUILTIN_PREDICATES.contains(&ident.to_string().as_str()) => {
                                    parsed.predicates.push(PredicateArg::Builtin(ident.clone()));
                                }
                                Some(ident) => errors.at(
                                    ident.span(),
                                    format!(
                                        "unknown predicate `{ident}`; the built-ins are {}{} (or name a function `Self::f`)",
                                        BUILTIN_PREDICATES.join(", "),
                                        did_you_mean(&ident.to_string(), BUILTIN_PREDICATES)
                                    ),
                                ),
                                None => parsed.predicates.push(PredicateArg::Custom(path)),
                            }
                        }
                    }
                    "name" => {
                        input.parse::<Token![=]>()?;
                        let lit: LitStr = input.parse()?;
                        if lit.value().is_empty() {
                            errors.at(lit.span(), "the controller name must not be empty");
                        }
                        parsed.name = Some(lit);
                    }
                    "crate" => {
                        input.parse::<Token![=]>()?;
                        let lit: LitStr = input.parse()?;
                        parsed.crate_path = crate_path(&lit, errors);
                    }
                    other => {
                        errors.at(
                            key.span(),
                            format!(
                                "unknown key `{other}` in #[controller]{}",
                                did_you_mean(other, KEYS)
                            ),
                        );
                        // Skip the key's value so later keys are still checked.
                        if input.peek(Token![=]) {
                            input.parse::<Token![=]>()?;
                            input.parse::<syn::Expr>()?;
                        } else if input.peek(syn::token::Paren) {
                            let _content;
                            syn::parenthesized!(_content in input);
                        }
                    }
                }
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(())
        };
        if let Err(error) = parser.parse2(args) {
            errors.push(error);
        }
        parsed
    }
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
            owns_metadata(Pod), owns_uncached(ConfigMap, Job), owns_uncached(CronJob),
            concurrency = 4, finalizer = "apps.example.com/cleanup",
            predicates(generation_changed, Self::custom), name = "webapp", crate = "kf"
        ));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(args.for_kind.is_some());
        assert_eq!(args.owns.len(), 2);
        assert_eq!(args.owns_metadata.len(), 1);
        assert_eq!(args.owns_uncached.len(), 3);
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
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(
            errors[0].contains("did you mean `concurrency`"),
            "{errors:?}"
        );
        assert!(
            errors[3].contains("did you mean `generation_changed`"),
            "{errors:?}"
        );
        assert_eq!(errors[4], "duplicate key `name`");
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
