//! Names derived from a kind.

/// The English plural of a lower-case kind, as kubebuilder derives a resource name (`webapp` →
/// `webapps`, `policy` → `policies`, `ingress` → `ingresses`).
#[must_use]
pub fn plural(singular: &str) -> String {
    let ends = |s: &str| singular.ends_with(s);
    if ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh") {
        format!("{singular}es")
    } else if ends("y")
        && !singular
            .chars()
            .rev()
            .nth(1)
            .is_some_and(|c| "aeiou".contains(c))
    {
        format!("{}ies", &singular[..singular.len() - 1])
    } else {
        format!("{singular}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_should_follow_english_rules() {
        for (singular, plural_) in [
            ("webapp", "webapps"),
            ("policy", "policies"),
            ("gateway", "gateways"),
            ("ingress", "ingresses"),
            ("box", "boxes"),
            ("batch", "batches"),
            ("mesh", "meshes"),
        ] {
            assert_eq!(plural(singular), plural_);
        }
    }
}
