//! The names a project is generated from, validated: each check says what is wrong and what a
//! valid value looks like.

use crate::Error;

/// Rust keywords (strict, reserved and weak): not usable as module or crate names.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "union", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Module names a kind cannot have: names the generated crates already use, crates in scope.
const TAKEN_MODULES: &[&str] = &[
    "manifests",
    "tests",
    "kubeforge",
    "tokio_util",
    "std",
    "core",
    "alloc",
];

/// Package names a project cannot have: the generated binaries and dependencies, Cargo's own.
const TAKEN_PACKAGES: &[&str] = &[
    "crdgen",
    "kubeforge",
    "tokio-util",
    "test",
    "std",
    "core",
    "alloc",
    "proc-macro",
    "build",
    "deps",
    "examples",
    "incremental",
];

/// A kind: UpperCamelCase (a letter, then letters and digits), at most 63 characters, usable as
/// a Rust type and module name next to the names the generated code uses.
///
/// # Errors
///
/// What is wrong with it.
pub fn kind(kind: &str) -> Result<(), Error> {
    let mut chars = kind.chars();
    let camel = chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric());
    if !camel || kind.len() > 63 {
        return Err(Error::new(format!(
            "invalid kind `{kind}`: a kind is UpperCamelCase (an upper-case letter, then letters \
             and digits, at most 63 characters), e.g. `Database` or `WebApp`"
        )));
    }
    let module = snake_case(kind);
    if KEYWORDS.contains(&module.as_str()) || TAKEN_MODULES.contains(&module.as_str()) {
        return Err(Error::new(format!(
            "invalid kind `{kind}`: its module `{module}` would clash with a Rust keyword or a \
             name the generated code uses; choose another kind"
        )));
    }
    if crate::templates::reserved_type_names().contains(kind) {
        return Err(Error::new(format!(
            "invalid kind `{kind}`: the generated code uses a type or value of that name; \
             choose another kind"
        )));
    }
    Ok(())
}

/// An API group: a DNS subdomain with at least one dot (what the apiserver requires of a CRD's
/// group), outside the groups reserved for Kubernetes itself.
///
/// # Errors
///
/// What is wrong with it.
pub fn group(group: &str) -> Result<(), Error> {
    let labels_ok = group.split('.').all(dns_label);
    if !labels_ok || !group.contains('.') || group.len() > 253 {
        return Err(Error::new(format!(
            "invalid group `{group}`: an API group is a DNS subdomain with at least one dot \
             (lower-case letters, digits and `-` between dots, at most 253 characters), e.g. \
             `example.com` or `apps.example.com`"
        )));
    }
    let reserved = ["k8s.io", "kubernetes.io"];
    if reserved
        .iter()
        .any(|r| group == *r || group.ends_with(&format!(".{r}")))
    {
        return Err(Error::new(format!(
            "invalid group `{group}`: groups under k8s.io and kubernetes.io are reserved for \
             Kubernetes APIs (they need an API review approval); use a domain of your own"
        )));
    }
    Ok(())
}

/// An API version as Kubernetes orders them: `v1`, `v2`, `v1beta1`, `v2alpha3`.
///
/// # Errors
///
/// What is wrong with it.
pub fn version(version: &str) -> Result<(), Error> {
    let invalid = || {
        Error::new(format!(
            "invalid version `{version}`: a Kubernetes API version is `v` and a number, \
             optionally followed by `alpha` or `beta` and a number, e.g. `v1`, `v1beta1`, `v2alpha1`"
        ))
    };
    let rest = version.strip_prefix('v').ok_or_else(invalid)?;
    let major_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, stage) = rest.split_at(major_len);
    if !positive_number(major) {
        return Err(invalid());
    }
    let ok = stage.is_empty()
        || ["alpha", "beta"]
            .iter()
            .any(|s| stage.strip_prefix(s).is_some_and(positive_number));
    if ok { Ok(()) } else { Err(invalid()) }
}

/// A project name: a Cargo package name that is also a DNS label, since it names the operator's
/// Namespace, ServiceAccount, ClusterRole and Deployment (`crdgen --deploy`).
///
/// # Errors
///
/// What is wrong with it.
pub fn project(name: &str) -> Result<(), Error> {
    if !dns_label(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(Error::new(format!(
            "invalid project name `{name}`: it is the Cargo package and names the operator's \
             Kubernetes objects, so it must be a DNS label: lower-case letters, digits and `-`, \
             starting with a letter, not ending with `-`, at most 63 characters, e.g. \
             `database-operator` (choose it with --name)"
        )));
    }
    let ident = crate_ident(name);
    if KEYWORDS.contains(&ident.as_str()) || TAKEN_PACKAGES.contains(&name) {
        return Err(Error::new(format!(
            "invalid project name `{name}`: it is a Rust keyword or a name Cargo or the generated \
             project already uses; choose another with --name"
        )));
    }
    Ok(())
}

/// `Database` → `database`, `WebApp` → `web_app`, `HTTPRoute` → `http_route`.
#[must_use]
pub fn snake_case(kind: &str) -> String {
    let chars: Vec<char> = kind.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            if !prev.is_ascii_uppercase() || next_lower {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// The resource name of a kind as kubeforge derives it: the lower-case kind, in the English
/// plural (`webapp` → `webapps`, `policy` → `policies`, `ingress` → `ingresses`).
#[must_use]
pub fn plural(kind: &str) -> String {
    kubeforge_shared::names::plural(&kind.to_lowercase())
}

/// The crate's name in Rust code: `database-operator` → `database_operator`.
#[must_use]
pub fn crate_ident(name: &str) -> String {
    name.replace('-', "_")
}

fn dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

fn positive_number(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) && !s.starts_with('0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_should_be_upper_camel_case_and_not_clash() {
        for ok in ["Database", "WebApp", "HTTPRoute", "Cache", "S3Bucket"] {
            assert!(kind(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "database",
            "Web-App",
            "Web_App",
            "Caché",
            &"A".repeat(64),
        ] {
            let e = kind(bad).unwrap_err().to_string();
            assert!(e.contains("UpperCamelCase"), "{bad}: {e}");
        }
        for clash in ["Type", "Manifests", "Kubeforge"] {
            let e = kind(clash).unwrap_err().to_string();
            assert!(e.contains("clash with a Rust keyword"), "{clash}: {e}");
        }
        for clash in [
            "ConfigMap",
            "Arc",
            "Option",
            "String",
            "Action",
            "Duration",
            "Manager",
        ] {
            let e = kind(clash).unwrap_err().to_string();
            assert!(e.contains("generated code uses"), "{clash}: {e}");
        }
    }

    #[test]
    fn groups_should_be_dns_subdomains_with_a_dot() {
        for ok in ["example.com", "apps.example.com", "a-b.c1.io"] {
            assert!(group(ok).is_ok(), "{ok}");
        }
        for bad in ["example", "Example.com", "-a.com", "a..com", "a_b.com", ""] {
            assert!(
                group(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("DNS subdomain")
            );
        }
        for reserved in ["k8s.io", "apps.k8s.io", "x.kubernetes.io"] {
            assert!(
                group(reserved)
                    .unwrap_err()
                    .to_string()
                    .contains("reserved")
            );
        }
    }

    #[test]
    fn versions_should_follow_the_kubernetes_pattern() {
        for ok in ["v1", "v2", "v10", "v1beta1", "v2alpha3", "v1beta12"] {
            assert!(version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1", "v", "v0", "v01", "V1", "v1gamma1", "v1beta", "v1beta0", "v1-beta1",
        ] {
            assert!(version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn project_names_should_be_package_names_and_dns_labels() {
        for ok in ["db-operator", "my-operator2", "op"] {
            assert!(project(ok).is_ok(), "{ok}");
        }
        for bad in ["Db", "db_operator", "2db", "db-", "", "my.op"] {
            assert!(
                project(bad).unwrap_err().to_string().contains("DNS label"),
                "{bad}"
            );
        }
        for taken in ["crdgen", "kubeforge", "test", "type"] {
            assert!(
                project(taken)
                    .unwrap_err()
                    .to_string()
                    .contains("already uses")
            );
        }
    }

    #[test]
    fn names_should_derive_like_kubeforge() {
        assert_eq!(snake_case("Database"), "database");
        assert_eq!(snake_case("WebApp"), "web_app");
        assert_eq!(snake_case("HTTPRoute"), "http_route");
        assert_eq!(snake_case("S3Bucket"), "s3_bucket");
        assert_eq!(plural("Database"), "databases");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(crate_ident("db-operator"), "db_operator");
    }
}
