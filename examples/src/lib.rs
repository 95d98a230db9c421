//! Example kinds built with kubeforge. `cargo run --bin crdgen` prints their CRDs.

pub mod config_audit;
pub mod database;
pub mod guestbook;
pub mod secret_mirror;
pub mod secret_mirror_imperative;
pub mod static_site;
pub mod webapp;
pub mod webapp_imperative;
pub mod webapp_operator;
