//! `init` and `create api`: the files they write and the lines they insert.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::templates::{self as t, marker_line, render};
use crate::{Error, names};

/// What `cargo kubeforge init` is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitOptions {
    /// The new project's directory: missing or empty.
    pub dir: PathBuf,
    /// The first kind's API group.
    pub group: String,
    /// The first kind.
    pub kind: String,
    /// The first kind's version.
    pub version: String,
    /// The package name; default: the directory's name.
    pub name: Option<String>,
    /// Whether the first kind is namespaced or cluster-scoped.
    pub scope: Scope,
    /// Where kubeforge comes from: a path (a kubeforge checkout or its `runtime/` crate) or a
    /// version on a registry; default: the checkout this generator was built from
    /// ([`default_kubeforge`]).
    pub kubeforge: Option<String>,
}

/// What `cargo kubeforge create api` is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiOptions {
    /// Where to look for the project: this directory or one of its parents.
    pub dir: PathBuf,
    /// The new kind.
    pub kind: String,
    /// Its API group; default: the project's (`[package.metadata.kubeforge]` in Cargo.toml).
    pub group: Option<String>,
    /// Its version; default: the project's, else `v1`.
    pub version: Option<String>,
    /// Whether it is namespaced or cluster-scoped.
    pub scope: Scope,
}

/// Where objects of a kind live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// In a namespace; the ConfigMap its controller keeps is in the same namespace.
    #[default]
    Namespaced,
    /// Cluster-wide; the ConfigMap its controller keeps is in the namespace its spec names.
    Cluster,
}

/// What was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The project's directory.
    pub root: PathBuf,
    /// New files, relative to `root`.
    pub written: Vec<PathBuf>,
    /// Existing files a line was added to, relative to `root`.
    pub changed: Vec<PathBuf>,
    /// Why the new Rust files were not formatted with `rustfmt` (not installed), if they were not.
    pub unformatted: Option<String>,
}

/// The `runtime/` crate (package `kubeforge`) of the checkout this generator was built from:
/// the default dependency of generated projects, since kubeforge is not on a registry yet.
#[must_use]
pub fn default_kubeforge() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("runtime")
}

/// The names of one kind, as the templates use them.
struct Kind {
    vars: Vec<(&'static str, String)>,
    snake: String,
}

impl Kind {
    fn new(kind: &str, group: &str, version: &str, name: &str, scope: Scope) -> Self {
        let snake = names::snake_case(kind);
        let mut vars = vec![
            ("Kind", kind.to_owned()),
            ("kind_snake", snake.clone()),
            ("kind_lower", kind.to_lowercase()),
            ("plural", names::plural(kind)),
            ("group", group.to_owned()),
            ("version", version.to_owned()),
            ("name", name.to_owned()),
            ("crate", names::crate_ident(name)),
        ];
        vars.extend(scope_vars(kind, scope));
        Self { vars, snake }
    }

    fn vars(&self) -> Vec<(&str, &str)> {
        self.vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    /// The files of this kind, relative to the project: its module, its test, its sample.
    fn files(&self) -> [(PathBuf, &'static str); 3] {
        let snake = &self.snake;
        [
            (format!("src/{snake}.rs").into(), t::KIND_RS),
            (
                format!("tests/integration/{snake}.rs").into(),
                t::KIND_TEST_RS,
            ),
            (format!("samples/{snake}.yaml").into(), t::SAMPLE_YAML),
        ]
    }
}

/// What differs between a namespaced and a cluster-scoped kind in the templates. A placeholder
/// at the start of a line takes whole lines (empty for the other scope).
fn scope_vars(kind: &str, scope: Scope) -> [(&'static str, String); 11] {
    match scope {
        Scope::Namespaced => [
            ("scope", "namespaced".to_owned()),
            ("config_where", String::new()),
            ("namespace_field", String::new()),
            ("config_namespace", "obj.namespace()".to_owned()),
            ("unit_spec_namespace", String::new()),
            ("sample_namespace", String::new()),
            ("test_objects", "ns.api()".to_owned()),
            ("test_name", "\"sample\".to_owned()".to_owned()),
            ("test_spec_namespace", String::new()),
            (
                "test_manager",
                "// The controller, in-process, watching this test's namespace only.\n    \
                 let manager = Manager::new(client.clone()).namespace(Some(ns.name().to_owned()))"
                    .to_owned(),
            ),
            ("test_cleanup", String::new()),
        ],
        Scope::Cluster => [
            ("scope", "cluster".to_owned()),
            (
                "config_where",
                " in the namespace its spec names".to_owned(),
            ),
            (
                "namespace_field",
                format!(
                    "    /// The namespace of the ConfigMap the controller keeps (a {kind} is \
                     cluster-scoped: it has none of its own).\n    \
                     #[validate(min_length = 1, max_length = 63)]\n    pub namespace: String,\n"
                ),
            ),
            (
                "config_namespace",
                "Some(obj.spec.namespace.clone())".to_owned(),
            ),
            (
                "unit_spec_namespace",
                "            namespace: \"default\".to_owned(),\n".to_owned(),
            ),
            ("sample_namespace", "  namespace: default\n".to_owned()),
            (
                "test_objects",
                "kubeforge::kube::Api::all(client.clone())".to_owned(),
            ),
            ("test_name", "format!(\"sample-{}\", ns.name())".to_owned()),
            (
                "test_spec_namespace",
                "        namespace: ns.name().to_owned(),\n".to_owned(),
            ),
            (
                "test_manager",
                "// The controller, in-process: the kind is cluster-scoped, its ConfigMaps are in \
                 this test's namespace.\n    let manager = Manager::new(client.clone())"
                    .to_owned(),
            ),
            (
                "test_cleanup",
                "    // Cluster-scoped: not deleted with the test's namespace.\n    \
                 objects.delete(&name, &Default::default()).await.unwrap();\n"
                    .to_owned(),
            ),
        ],
    }
}

/// Writes a new project into `options.dir` (see the crate docs for what it contains).
///
/// # Errors
///
/// An invalid name, a directory that exists and is not empty, a kubeforge that cannot be
/// found, or an I/O error.
pub fn init(options: &InitOptions) -> Result<Generated, Error> {
    names::kind(&options.kind)?;
    names::group(&options.group)?;
    names::version(&options.version)?;
    let root = absolute(&options.dir)?;
    refuse_non_empty(&root)?;
    let name = match &options.name {
        Some(name) => name.clone(),
        None => root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    names::project(&name).map_err(|e| match options.name {
        Some(_) => e,
        None => Error::new(format!("{e} (the name comes from the directory's)")),
    })?;
    let source = kubeforge_source(options.kubeforge.as_deref())?;
    let kind = Kind::new(
        &options.kind,
        &options.group,
        &options.version,
        &name,
        options.scope,
    );
    let mut vars = kind.vars();
    vars.extend([
        ("kubeforge", source.toml.as_str()),
        ("kubeforge_source", source.description.as_str()),
        ("plane", source.plane.as_str()),
    ]);

    let mut files: Vec<(PathBuf, &str)> = vec![
        ("Cargo.toml".into(), t::CARGO_TOML),
        ("README.md".into(), t::README),
        (".gitignore".into(), t::GITIGNORE),
        ("src/lib.rs".into(), t::LIB_RS),
        ("src/main.rs".into(), t::MAIN_RS),
        ("src/bin/crdgen.rs".into(), t::CRDGEN_RS),
        ("tests/integration/main.rs".into(), t::TESTS_MAIN_RS),
    ];
    files.extend(kind.files());
    for (path, template) in &files {
        write_new(&root, path, &render(template, &vars))?;
    }
    let written: Vec<PathBuf> = files.into_iter().map(|(path, _)| path).collect();
    let unformatted = rustfmt(&root, &written)?;
    Ok(Generated {
        root,
        written,
        changed: Vec::new(),
        unformatted,
    })
}

/// Adds a kind and its controller to the project at `options.dir` or above it (see the crate
/// docs).
///
/// # Errors
///
/// An invalid name, no generated project, a kind that exists, a marker line that was removed,
/// or an I/O error. Nothing is written unless everything can be.
pub fn create_api(options: &ApiOptions) -> Result<Generated, Error> {
    names::kind(&options.kind)?;
    let root = find_project(&absolute(&options.dir)?)?;
    let manifest = read(&root.join("Cargo.toml"))?;
    let defaults = |key| table_value(&manifest, "[package.metadata.kubeforge]", key);
    let group = options
        .group
        .clone()
        .or_else(|| defaults("group"))
        .ok_or_else(|| {
            Error::new("no --group, and Cargo.toml's [package.metadata.kubeforge] names none")
        })?;
    let version = options
        .version
        .clone()
        .or_else(|| defaults("version"))
        .unwrap_or_else(|| "v1".to_owned());
    names::group(&group)?;
    names::version(&version)?;
    let name = table_value(&manifest, "[package]", "name")
        .ok_or_else(|| Error::new("Cargo.toml has no [package] name"))?;
    let kind = Kind::new(&options.kind, &group, &version, &name, options.scope);
    let vars = kind.vars();
    let files = kind.files();
    if let Some((path, _)) = files.iter().find(|(path, _)| root.join(path).exists()) {
        return Err(Error::new(format!(
            "the kind `{}` exists in this project: {} is there already",
            options.kind,
            path.display()
        )));
    }

    let mut changed = Vec::new();
    for (file, template, marker, sorted) in [
        ("src/lib.rs", t::LIB_RS, t::KINDS_MARKER, true),
        ("src/main.rs", t::MAIN_RS, t::CONTROLLERS_MARKER, false),
        (
            "tests/integration/main.rs",
            t::TESTS_MAIN_RS,
            t::TESTS_MARKER,
            true,
        ),
    ] {
        let text = read(&root.join(file))?;
        let line = marker_line(template, marker, &vars);
        let text = insert_above_marker(&text, marker, &line, sorted)
            .map_err(|e| Error::new(format!("{}: {e}", root.join(file).display())))?;
        changed.push((PathBuf::from(file), text));
    }

    for (path, template) in &files {
        write_new(&root, path, &render(template, &vars))?;
    }
    for (path, text) in &changed {
        write(&root.join(path), text)?;
    }
    let written: Vec<PathBuf> = files.into_iter().map(|(path, _)| path).collect();
    let unformatted = rustfmt(&root, &written)?;
    Ok(Generated {
        root,
        written,
        changed: changed.into_iter().map(|(path, _)| path).collect(),
        unformatted,
    })
}

/// `text` with `line` added above the line starting with `marker`, at the marker's
/// indentation; with `sorted`, at its place in the run of lines of its form (`pub mod x;`)
/// right above the marker, as rustfmt orders them.
fn insert_above_marker(
    text: &str,
    marker: &str,
    line: &str,
    sorted: bool,
) -> Result<String, Error> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.iter().any(|l| l.trim() == line) {
        return Err(Error::new(format!(
            "`{line}` is there already: the kind exists in this project"
        )));
    }
    let marker_at = lines
        .iter()
        .position(|l| l.trim_start().starts_with(marker))
        .ok_or_else(|| {
            Error::new(format!(
                "no `{marker}` line: `create api` adds its lines above it, put it back where \
                 `init` wrote it"
            ))
        })?;
    let indent: String = lines[marker_at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    let mut at = marker_at;
    if sorted {
        let form = &line[..line.rfind(' ').map_or(0, |i| i + 1)];
        let same_form =
            |l: &String| l.trim_start().starts_with(form) && l.trim_end().ends_with(';');
        while at > 0 && same_form(&lines[at - 1]) && lines[at - 1].trim() > line {
            at -= 1;
        }
    }
    lines.insert(at, format!("{indent}{line}"));
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Where kubeforge comes from, as a Cargo.toml dependency and in the README.
#[derive(Debug)]
struct Source {
    /// `path = "..."` or `version = "..."`.
    toml: String,
    description: String,
    /// The local control plane's script, or a placeholder for it.
    plane: String,
}

const PLANE_PLACEHOLDER: &str = "path/to/kubeforge/controlplane/run";

fn kubeforge_source(arg: Option<&str>) -> Result<Source, Error> {
    let Some(arg) = arg else {
        let default = default_kubeforge();
        return path_source(&default).map_err(|_| {
            Error::new(format!(
                "kubeforge is not at {} any more (the checkout this cargo-kubeforge was built \
                 from moved?): pass --kubeforge PATH (a kubeforge checkout, or its runtime/ \
                 directory) or --kubeforge VERSION",
                default.display()
            ))
        });
    };
    let path = absolute(Path::new(arg))?;
    if path.is_dir() {
        return path_source(&path);
    }
    let version_like = arg.starts_with(|c: char| c.is_ascii_digit() || "^~=".contains(c))
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".^~=-+*".contains(c));
    if !version_like {
        return Err(Error::new(format!(
            "--kubeforge {arg}: neither a directory (a kubeforge checkout, or its runtime/ \
             directory) nor a version such as 0.1.0"
        )));
    }
    Ok(Source {
        toml: format!("version = {}", toml_string(arg)),
        description: format!("a registry, version `{arg}`"),
        plane: PLANE_PLACEHOLDER.to_owned(),
    })
}

fn path_source(path: &Path) -> Result<Source, Error> {
    let runtime = [path.to_owned(), path.join("runtime")]
        .into_iter()
        .find(|dir| is_kubeforge(dir))
        .ok_or_else(|| {
            Error::new(format!(
                "--kubeforge {}: neither kubeforge's repository nor its runtime/ crate (no \
                 Cargo.toml of the package `kubeforge` there)",
                path.display()
            ))
        })?;
    let runtime = runtime
        .canonicalize()
        .map_err(|e| Error::new(format!("{}: {e}", runtime.display())))?;
    let plane = runtime
        .parent()
        .map(|repo| repo.join("controlplane").join("run"))
        .filter(|script| script.is_file())
        .map_or_else(|| PLANE_PLACEHOLDER.to_owned(), |s| s.display().to_string());
    Ok(Source {
        toml: format!("path = {}", toml_string(&runtime.display().to_string())),
        description: format!(
            "a path dependency on a kubeforge checkout, `{}`",
            runtime.display()
        ),
        plane,
    })
}

fn is_kubeforge(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|toml| table_value(&toml, "[package]", "name").as_deref() == Some("kubeforge"))
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The string value of `key` in the table headed `header` (a simple `key = "value"` line).
fn table_value(toml: &str, header: &str, key: &str) -> Option<String> {
    let mut lines = toml.lines().map(str::trim);
    lines.find(|l| *l == header)?;
    lines
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
}

fn find_project(dir: &Path) -> Result<PathBuf, Error> {
    let manifest = dir
        .ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|m| m.is_file())
        .ok_or_else(|| {
            Error::new(format!(
                "{} is not inside a Cargo project: run `cargo kubeforge create api` in a project \
                 that `cargo kubeforge init` generated",
                dir.display()
            ))
        })?;
    if !read(&manifest)?
        .lines()
        .any(|l| l.trim() == "[package.metadata.kubeforge]")
    {
        return Err(Error::new(format!(
            "{} is not a project that `cargo kubeforge init` generated (it has no \
             [package.metadata.kubeforge] table): run `create api` inside one",
            manifest.display()
        )));
    }
    Ok(manifest.parent().map(Path::to_owned).unwrap_or_default())
}

fn refuse_non_empty(dir: &Path) -> Result<(), Error> {
    if !dir.exists() {
        return Ok(());
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| {
        Error::new(format!(
            "{}: {e} (init writes a new project into a missing or empty directory)",
            dir.display()
        ))
    })?;
    if entries.next().is_some() {
        return Err(Error::new(format!(
            "{} exists and is not empty: init writes a new project into a missing or empty \
             directory (to add a kind to a generated project, run `cargo kubeforge create api` \
             inside it)",
            dir.display()
        )));
    }
    Ok(())
}

/// Formats the new Rust files with `rustfmt`, as `cargo fmt` would (line breaks depend on the
/// names). `Ok(Some(why))` when rustfmt is not installed: the files are valid, only not
/// formatted.
fn rustfmt(root: &Path, written: &[PathBuf]) -> Result<Option<String>, Error> {
    let files: Vec<PathBuf> = written
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| root.join(p))
        .collect();
    let output = match Command::new("rustfmt")
        .args(["--edition", "2024"])
        .args(&files)
        .output()
    {
        Ok(output) => output,
        Err(e) => return Ok(Some(format!("rustfmt: {e}"))),
    };
    if !output.status.success() {
        return Err(Error::new(format!(
            "rustfmt failed on the generated files (a bug of the generator):\n{}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(None)
}

fn absolute(path: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

fn write_new(root: &Path, relative: &Path, text: &str) -> Result<(), Error> {
    let path = root.join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    }
    write(&path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_should_go_above_the_marker_in_rustfmt_order() {
        let lib =
            "//! docs\n\npub mod cache;\npub mod web_app;\n// kubeforge:kinds (x)\n\nfn f() {}\n";
        let out =
            insert_above_marker(lib, "// kubeforge:kinds", "pub mod database;", true).unwrap();
        assert_eq!(
            out,
            "//! docs\n\npub mod cache;\npub mod database;\npub mod web_app;\n// kubeforge:kinds (x)\n\nfn f() {}\n"
        );
        let out = insert_above_marker(&out, "// kubeforge:kinds", "pub mod zoo;", true).unwrap();
        assert!(out.contains("pub mod web_app;\npub mod zoo;\n// kubeforge:kinds"));
        let out = insert_above_marker(&out, "// kubeforge:kinds", "pub mod a;", true).unwrap();
        assert!(out.contains("\n\npub mod a;\npub mod cache;"));

        let main = "fn main() {\n    let m = m.controller(A);\n    // kubeforge:controllers\n}";
        let out = insert_above_marker(
            main,
            "// kubeforge:controllers",
            "let m = m.controller(B);",
            false,
        )
        .unwrap();
        assert_eq!(
            out,
            "fn main() {\n    let m = m.controller(A);\n    let m = m.controller(B);\n    // kubeforge:controllers\n}"
        );
    }

    #[test]
    fn a_missing_marker_or_an_existing_line_should_be_refused() {
        let e = insert_above_marker("pub mod a;\n", "// kubeforge:kinds", "pub mod b;", true);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("no `// kubeforge:kinds` line")
        );
        let e = insert_above_marker(
            "pub mod a;\n// kubeforge:kinds\n",
            "// kubeforge:kinds",
            "pub mod a;",
            true,
        );
        assert!(e.unwrap_err().to_string().contains("the kind exists"));
    }

    #[test]
    fn table_values_should_come_from_their_table() {
        let toml = "[package]\nname = \"op\"\n\n[package.metadata.kubeforge]\ngroup = \"example.com\"\nversion = \"v2\"\n\n[dependencies]\nname = \"x\"\n";
        assert_eq!(
            table_value(toml, "[package]", "name").as_deref(),
            Some("op")
        );
        assert_eq!(
            table_value(toml, "[package.metadata.kubeforge]", "group").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            table_value(toml, "[package.metadata.kubeforge]", "name"),
            None
        );
        assert_eq!(table_value(toml, "[lib]", "name"), None);
    }

    #[test]
    fn kubeforge_should_default_to_this_checkout_and_take_paths_or_versions() {
        let source = kubeforge_source(None).unwrap();
        let runtime = default_kubeforge().canonicalize().unwrap();
        let path = toml_string(&runtime.display().to_string());
        assert_eq!(source.toml, format!("path = {path}"));
        assert!(
            source.plane.ends_with("controlplane/run"),
            "{}",
            source.plane
        );
        let repo = runtime.parent().unwrap().display().to_string();
        assert_eq!(kubeforge_source(Some(&repo)).unwrap().toml, source.toml);
        assert_eq!(
            kubeforge_source(Some("0.1.0")).unwrap().toml,
            "version = \"0.1.0\""
        );
        assert_eq!(
            kubeforge_source(Some("^0.1")).unwrap().plane,
            PLANE_PLACEHOLDER
        );
        let e = kubeforge_source(Some("/nonexistent/kubeforge")).unwrap_err();
        assert!(e.to_string().contains("neither a directory"), "{e}");
        let e = kubeforge_source(Some(env!("CARGO_MANIFEST_DIR"))).unwrap_err();
        assert!(
            e.to_string().contains("neither kubeforge's repository"),
            "{e}"
        );
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }
}
