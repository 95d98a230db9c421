//! Procedural macros of kubeforge.
//!
//! Users depend on the `kubeforge` crate, which re-exports everything defined here. This crate only
//! routes: each attribute macro is a one-line entry point into a module that parses the attribute
//! into a typed model, validates it and expands it (see `docs/ARCHITECTURE.md`).
//!
//! The attributes (`#[custom_resource]`, `#[controller]`) are added by their own work items; today the
//! crate is the empty skeleton the runtime crate links against.
