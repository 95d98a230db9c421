//! Turns the book's chapters into documentation that rustdoc tests: mdBook's
//! `{{#include path}}` / `{{#include path:anchor}}` / `{{#include path:start:end}}` are expanded
//! as mdBook expands them (a missing file or anchor fails the build, where mdBook would only
//! warn), a code block made only of includes is marked `text` (it is compiled where it comes
//! from: an example or a test of the workspace), and a fence without a language is marked `text`
//! (rustdoc would take it for Rust). Every other ```rust block is a doctest.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let src = manifest.join("src");
    println!("cargo::rerun-if-changed={}", src.display());
    let mut chapters = Vec::new();
    collect(&src, &mut chapters);
    chapters.sort();
    let mut modules = String::new();
    for chapter in &chapters {
        println!("cargo::rerun-if-changed={}", chapter.display());
        let text = fs::read_to_string(chapter).expect("reading a chapter");
        let expanded = doctest_text(&text, chapter);
        let relative = chapter.strip_prefix(&src).expect("under src");
        let module: String = relative
            .with_extension("")
            .to_string_lossy()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let target = out.join(format!("{module}.md"));
        fs::write(&target, expanded).expect("writing the expanded chapter");
        writeln!(
            modules,
            "#[doc = include_str!({:?})]\npub mod {module} {{}}",
            target.display().to_string()
        )
        .expect("writing to a String");
    }
    fs::write(out.join("chapters.rs"), modules).expect("writing chapters.rs");
}

fn collect(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("reading docs/src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

/// The chapter with its includes expanded and its fences marked for rustdoc.
fn doctest_text(text: &str, chapter: &Path) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            // An included chapter (ARCHITECTURE.md) gets its fences marked too.
            let expanded = expand_line(line, chapter);
            if expanded != line && expanded.contains("```") {
                out.push_str(&doctest_text(&expanded, chapter));
            } else {
                out.push_str(&expanded);
                out.push('\n');
            }
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut body = Vec::new();
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                break;
            }
            body.push(inner);
        }
        let only_includes = !body.is_empty()
            && body
                .iter()
                .all(|l| l.trim().is_empty() || l.trim().starts_with("{{#include "));
        let info = if info.trim().is_empty() || only_includes {
            "text"
        } else {
            info
        };
        writeln!(out, "{indent}```{info}").expect("writing to a String");
        for inner in body {
            out.push_str(&expand_line(inner, chapter));
            out.push('\n');
        }
        writeln!(out, "{indent}```").expect("writing to a String");
    }
    out
}

/// A line with its `{{#include ..}}` (if any) replaced by what it includes.
fn expand_line(line: &str, chapter: &Path) -> String {
    let Some(start) = line.find("{{#include ") else {
        return line.to_owned();
    };
    let rest = &line[start + "{{#include ".len()..];
    let end = rest
        .find("}}")
        .unwrap_or_else(|| panic!("{}: an unterminated {{{{#include", chapter.display()));
    let target = rest[..end].trim();
    let (file, selector) = match target.split_once(':') {
        Some((file, selector)) => (file, Some(selector)),
        None => (target, None),
    };
    let path = chapter
        .parent()
        .expect("a chapter has a directory")
        .join(file);
    println!("cargo::rerun-if-changed={}", path.display());
    let content = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {{{{#include {target}}}}}: {}: {e}",
            chapter.display(),
            path.display()
        )
    });
    let included = match selector {
        None => content.trim_end_matches('\n').to_owned(),
        Some(selector) => select(&content, selector).unwrap_or_else(|| {
            panic!(
                "{}: {{{{#include {target}}}}}: no such anchor or line range in {}",
                chapter.display(),
                path.display()
            )
        }),
    };
    format!("{}{included}{}", &line[..start], &rest[end + 2..])
}

/// The lines of `content` that `selector` names: `anchor`, `start:end`, `start:` or `:end`
/// (1-based, inclusive), as mdBook reads them. Lines holding `ANCHOR:` / `ANCHOR_END:` markers
/// are left out.
fn select(content: &str, selector: &str) -> Option<String> {
    let lines: Vec<&str> = content.lines().collect();
    let keep = |range: &[&str]| -> String {
        range
            .iter()
            .filter(|l| !l.contains("ANCHOR:") && !l.contains("ANCHOR_END:"))
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Some((from, to)) = selector.split_once(':') {
        let from = if from.is_empty() {
            1
        } else {
            from.parse().ok()?
        };
        let to = if to.is_empty() {
            lines.len()
        } else {
            to.parse().ok()?
        };
        return (from >= 1 && from <= to && to <= lines.len()).then(|| keep(&lines[from - 1..to]));
    }
    if let Ok(line) = selector.parse::<usize>() {
        return (line >= 1 && line <= lines.len()).then(|| keep(&lines[line - 1..]));
    }
    let is_marker = |l: &str, marker: &str| {
        l.split_once(marker)
            .is_some_and(|(_, name)| name.trim() == selector)
    };
    let start = lines.iter().position(|l| is_marker(l, "ANCHOR:"))?;
    let end = start
        + lines[start..]
            .iter()
            .position(|l| is_marker(l, "ANCHOR_END:"))?;
    Some(keep(&lines[start + 1..end]))
}
