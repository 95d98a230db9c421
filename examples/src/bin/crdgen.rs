//! `cargo run --bin crdgen`: the CRDs of the example kinds (`--out DIR`, `--check DIR`), their
//! RBAC (`--rbac`) and deploy manifests (`--deploy --image IMAGE`), named after this crate.
use kubeforge_examples as _; // links the kinds, which register themselves

fn main() -> std::process::ExitCode {
    kubeforge::crdgen::main!()
}
