//! The files of a generated project, as templates with `{{placeholder}}`s (`scaffold/templates/`).

use std::collections::BTreeSet;
use std::sync::OnceLock;

/// `Cargo.toml`.
pub const CARGO_TOML: &str = include_str!("../templates/Cargo.toml.tmpl");
/// `README.md`.
pub const README: &str = include_str!("../templates/README.md.tmpl");
/// `.gitignore`.
pub const GITIGNORE: &str = include_str!("../templates/gitignore.tmpl");
/// `src/lib.rs`.
pub const LIB_RS: &str = include_str!("../templates/lib.rs.tmpl");
/// `src/main.rs`.
pub const MAIN_RS: &str = include_str!("../templates/main.rs.tmpl");
/// `src/bin/crdgen.rs`.
pub const CRDGEN_RS: &str = include_str!("../templates/crdgen.rs.tmpl");
/// `src/<kind>.rs`: a kind and its controller.
pub const KIND_RS: &str = include_str!("../templates/kind.rs.tmpl");
/// `tests/integration/main.rs`.
pub const TESTS_MAIN_RS: &str = include_str!("../templates/tests_main.rs.tmpl");
/// `tests/integration/<kind>.rs`: a kind's integration test.
pub const KIND_TEST_RS: &str = include_str!("../templates/kind_test.rs.tmpl");
/// `samples/<kind>.yaml`.
pub const SAMPLE_YAML: &str = include_str!("../templates/sample.yaml.tmpl");

/// Marker lines in generated files: `create api` adds its lines above them.
pub const KINDS_MARKER: &str = "// kubeforge:kinds";
/// See [`KINDS_MARKER`].
pub const CONTROLLERS_MARKER: &str = "// kubeforge:controllers";
/// See [`KINDS_MARKER`].
pub const TESTS_MARKER: &str = "// kubeforge:tests";

/// The line `create api` adds to `src/lib.rs`, `src/main.rs` and `tests/integration/main.rs`:
/// the same line the templates have for the first kind.
pub fn marker_line(template: &str, marker: &str, vars: &[(&str, &str)]) -> String {
    let lines: Vec<&str> = template.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(marker))
        .unwrap_or_else(|| panic!("template without {marker}"));
    render(lines[at - 1].trim(), vars)
}

/// `template` with every `{{key}}` replaced by its value.
///
/// # Panics
///
/// When a placeholder is left (a template names a key the generator does not give).
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(at) = out.find("{{") {
        let end = out[at..].find("}}").map_or(out.len(), |e| at + e + 2);
        panic!("template placeholder {} has no value", &out[at..end]);
    }
    out
}

/// The upper-case identifiers the generated Rust code uses (types, traits, constants, enum
/// variants): a kind of one of these names would shadow it or clash with it.
pub fn reserved_type_names() -> &'static BTreeSet<String> {
    static NAMES: OnceLock<BTreeSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = BTreeSet::new();
        for template in [
            LIB_RS,
            MAIN_RS,
            CRDGEN_RS,
            KIND_RS,
            TESTS_MAIN_RS,
            KIND_TEST_RS,
        ] {
            for line in template.lines() {
                // Comments and strings name things in prose. `{{Kind}}Spec` becomes one
                // identifier that starts in lower case, like every placeholder.
                let code = line.split("//").next().unwrap_or_default();
                let code: String = code.split('"').step_by(2).collect::<Vec<_>>().join(" ");
                let code = code.replace("{{", "x").replace("}}", "x");
                let idents = code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
                names.extend(
                    idents
                        .filter(|i| i.starts_with(|c: char| c.is_ascii_uppercase()))
                        .map(str::to_owned),
                );
            }
        }
        // Names the prelude glob brings that are not shadowed harmlessly, and the std prelude.
        for name in ["Some", "None", "Ok", "Err", "Box", "Vec", "Self"] {
            names.insert(name.to_owned());
        }
        names
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_should_fill_every_placeholder() {
        assert_eq!(
            render("a {{x}} {{y}}{{x}}", &[("x", "1"), ("y", "2")]),
            "a 1 21"
        );
    }

    #[test]
    #[should_panic(expected = "template placeholder {{z}} has no value")]
    fn render_should_refuse_a_placeholder_without_value() {
        render("a {{z}}", &[]);
    }

    #[test]
    fn reserved_names_should_be_the_templates_types() {
        let names = reserved_type_names();
        for name in [
            "ConfigMap",
            "Arc",
            "Action",
            "Context",
            "Patch",
            "CancellationToken",
        ] {
            assert!(names.contains(name), "{name}: {names:?}");
        }
        // Placeholders and prose are not names.
        for name in [
            "Kind",
            "Spec",
            "Controller",
            "The",
            "Level",
            "Message",
            "Ready",
        ] {
            assert!(!names.contains(name), "{name}");
        }
    }

    #[test]
    fn marker_lines_should_be_the_first_kinds_lines() {
        let vars = [("crate", "op"), ("kind_snake", "cache"), ("Kind", "Cache")];
        assert_eq!(marker_line(LIB_RS, KINDS_MARKER, &vars), "pub mod cache;");
        assert_eq!(
            marker_line(MAIN_RS, CONTROLLERS_MARKER, &vars),
            "let manager = manager.controller(op::cache::CacheController);"
        );
        assert_eq!(
            marker_line(TESTS_MAIN_RS, TESTS_MARKER, &vars),
            "mod cache;"
        );
    }
}
