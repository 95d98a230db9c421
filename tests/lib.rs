//! Integration tests of kubeforge live in `integration/` (one test binary, `cargo test -p
//! kubeforge-tests`); they run against the real local control plane of `controlplane/`.

pub mod slots;
