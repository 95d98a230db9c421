//! The `ui/pass/*.rs` cases: valid uses of the macros that must compile, and whose `main` must
//! run. One test binary with a module per case, a test per case: trybuild built and linked a
//! binary per case (16 links of ~150 MB each on a cold CI run). The module of a case is its
//! crate root in spirit: its own `use`s, items and `main`; what the generated code registers
//! (`inventory`) is shared by the binary, so a case that reads a registry filters it by its own
//! kinds.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::all)]

#[path = "../ui/pass/cluster_kind_and_enums.rs"]
mod cluster_kind_and_enums;
#[path = "../ui/pass/controller_anyhow_error.rs"]
mod controller_anyhow_error;
#[path = "../ui/pass/controller_boxed_error.rs"]
mod controller_boxed_error;
#[path = "../ui/pass/controller_complete.rs"]
mod controller_complete;
#[path = "../ui/pass/controller_selectors.rs"]
mod controller_selectors;
#[path = "../ui/pass/controller_sources.rs"]
mod controller_sources;
#[path = "../ui/pass/controller_store.rs"]
mod controller_store;
#[path = "../ui/pass/controller_watcher.rs"]
mod controller_watcher;
#[path = "../ui/pass/crate_override.rs"]
mod crate_override;
#[path = "../ui/pass/dependents_collections.rs"]
mod dependents_collections;
#[path = "../ui/pass/enum_variant_markers.rs"]
mod enum_variant_markers;
#[path = "../ui/pass/full_kind.rs"]
mod full_kind;
#[path = "../ui/pass/kubebuilder_markers.rs"]
mod kubebuilder_markers;
#[path = "../ui/pass/newtypes.rs"]
mod newtypes;
#[path = "../ui/pass/printcolumn_filters.rs"]
mod printcolumn_filters;
#[path = "../ui/pass/round_trip_markers.rs"]
mod round_trip_markers;
#[path = "../ui/pass/shadowed_prelude.rs"]
mod shadowed_prelude;
#[path = "../ui/pass/type_markers.rs"]
mod type_markers;
#[path = "../ui/pass/unchecked_path_into_foreign_type.rs"]
mod unchecked_path_into_foreign_type;
#[path = "../ui/pass/views.rs"]
mod views;
#[path = "../ui/pass/webhooks.rs"]
mod webhooks;

#[test]
fn cluster_kind_and_enums() {
    cluster_kind_and_enums::main();
}

#[test]
fn controller_anyhow_error() {
    controller_anyhow_error::main();
}

#[test]
fn controller_boxed_error() {
    controller_boxed_error::main();
}

#[test]
fn controller_complete() {
    controller_complete::main();
}

#[test]
fn controller_selectors() {
    controller_selectors::main();
}

#[test]
fn controller_sources() {
    controller_sources::main();
}

#[test]
fn controller_store() {
    controller_store::main();
}

#[test]
fn controller_watcher() {
    controller_watcher::main();
}

#[test]
fn crate_override() {
    crate_override::main();
}

#[test]
fn dependents_collections() {
    dependents_collections::main();
}

#[test]
fn enum_variant_markers() {
    enum_variant_markers::main();
}

#[test]
fn full_kind() {
    full_kind::main();
}

#[test]
fn kubebuilder_markers() {
    kubebuilder_markers::main();
}

#[test]
fn newtypes() {
    newtypes::main();
}

#[test]
fn printcolumn_filters() {
    printcolumn_filters::main();
}

#[test]
fn round_trip_markers() {
    round_trip_markers::main();
}

#[test]
fn shadowed_prelude() {
    shadowed_prelude::main();
}

#[test]
fn type_markers() {
    type_markers::main();
}

#[test]
fn unchecked_path_into_foreign_type() {
    unchecked_path_into_foreign_type::main();
}

#[test]
fn webhooks() {
    webhooks::main();
}

/// Every file of `ui/pass` is a case above (a new file fails this until it is listed).
#[test]
fn every_pass_case_should_be_listed() {
    let mut files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/pass"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".rs").map(str::to_owned))
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "cluster_kind_and_enums",
            "controller_anyhow_error",
            "controller_boxed_error",
            "controller_complete",
            "controller_selectors",
            "controller_sources",
            "controller_store",
            "controller_watcher",
            "crate_override",
            "dependents_collections",
            "enum_variant_markers",
            "full_kind",
            "kubebuilder_markers",
            "newtypes",
            "printcolumn_filters",
            "round_trip_markers",
            "shadowed_prelude",
            "type_markers",
            "unchecked_path_into_foreign_type",
            "views",
            "webhooks",
        ]
    );
}

#[test]
fn views() {
    views::main();
}
