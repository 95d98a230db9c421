//! Error accumulation: every stage pushes errors here so the user sees all of them in one build.

use proc_macro2::Span;

/// Collected errors, each with the span of the token it is about.
///
/// Errors must be looked at: [`Errors::check`] takes them, and dropping an accumulator that
/// still holds errors panics (as serde_derive's `Ctxt` does), so a forgotten check fails loudly in
/// tests instead of silently expanding code next to a lost error.
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

    /// Whether no error was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Takes the errors: `Err` holds all of them combined (its `to_compile_error()` emits one
    /// `compile_error!` per error, each at its own span).
    pub fn check(mut self) -> syn::Result<()> {
        let mut errors = std::mem::take(&mut self.errors).into_iter();
        match errors.next() {
            None => Ok(()),
            Some(mut first) => {
                first.extend(errors);
                Err(first)
            }
        }
    }

    /// The messages, in the order they were pushed (takes the errors, like [`Errors::check`]).
    #[cfg(test)]
    pub fn messages(self) -> Vec<String> {
        match self.check() {
            Ok(()) => Vec::new(),
            Err(errors) => errors.into_iter().map(|e| e.to_string()).collect(),
        }
    }
}

impl Drop for Errors {
    fn drop(&mut self) {
        // Not while unwinding: a second panic would abort and hide the first one.
        if !self.errors.is_empty() && !std::thread::panicking() {
            panic!(
                "invariant: {} macro error(s) dropped without `Errors::check`: {:?}",
                self.errors.len(),
                self.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            );
        }
    }
}

/// `"; did you mean `x`?"` when a known key is close to `unknown`, else `""`.
pub fn did_you_mean(unknown: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (distance(unknown, k), *k))
        .filter(|(d, k)| close(*d, k) || k.starts_with(unknown) || unknown.starts_with(k))
        .min()
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

/// The name of `known` that `name` most likely misspells (by edit distance only: unlike
/// [`did_you_mean`], a longer name that starts with a known one, such as a helper
/// `reconcile_child`, is not a misspelling). `None` for an exact match.
pub fn misspelling_of<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (distance(name, k), *k))
        .filter(|(d, k)| *d > 0 && close(*d, k))
        .min()
        .map(|(_, k)| k)
}

/// Whether an edit distance `d` from `known` is small enough to suggest `known`.
fn close(d: usize, known: &str) -> bool {
    d <= 2.max(known.len() / 3)
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

    #[test]
    fn misspelling_of_should_ignore_exact_names_and_longer_helpers() {
        let hooks = &["reconcile", "cleanup", "error_policy"];
        assert_eq!(misspelling_of("reconsile", hooks), Some("reconcile"));
        assert_eq!(misspelling_of("cleaup", hooks), Some("cleanup"));
        assert_eq!(misspelling_of("reconcile", hooks), None);
        assert_eq!(misspelling_of("reconcile_children", hooks), None);
        assert_eq!(misspelling_of("apps_for_secret", hooks), None);
    }

    #[test]
    fn check_should_take_every_error_in_order() {
        let mut errors = Errors::default();
        errors.at(Span::call_site(), "first");
        errors.at(Span::call_site(), "second");
        assert_eq!(errors.messages(), ["first", "second"]);
        assert!(Errors::default().check().is_ok());
    }

    #[test]
    #[should_panic(expected = "dropped without `Errors::check`")]
    fn errors_should_panic_when_dropped_unchecked() {
        let mut errors = Errors::default();
        errors.at(Span::call_site(), "lost");
        drop(errors);
    }
}
