//! Error accumulation: every stage pushes errors here so the user sees all of them in one build.

use proc_macro2::{Span, TokenStream};

/// Collected errors, each with the span of the token it is about.
#[derive(Default)]
pub struct Errors {
    errors: Vec<syn::Error>,
}

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        self.errors.push(error);
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, message));
    }

    pub fn spanned(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.errors.push(syn::Error::new_spanned(tokens, message));
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    #[cfg(test)]
    pub fn messages(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    pub fn to_compile_errors(&self) -> TokenStream {
        self.errors
            .iter()
            .map(syn::Error::to_compile_error)
            .collect()
    }
}

/// `"; did you mean `x`?"` when a known key is close to `unknown`, else `""`.
pub fn did_you_mean(unknown: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (distance(unknown, k), *k))
        .filter(|(d, k)| {
            *d <= 2.max(k.len() / 3) || k.starts_with(unknown) || unknown.starts_with(k)
        })
        .min()
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_should_suggest_the_closest_key() {
        assert_eq!(
            did_you_mean("shortnames", &["shortname", "singular", "status"]),
            "; did you mean `shortname`?"
        );
        assert_eq!(
            did_you_mean("minimun", &["minimum", "maximum"]),
            "; did you mean `minimum`?"
        );
        assert_eq!(did_you_mean("zzz", &["minimum", "maximum"]), "");
    }
}
