//! `cargo run --bin crdgen`: the CRDs of the example kinds (`--out DIR`, `--check DIR`).
use kubeforge_examples as _; // links the kinds, which register themselves

fn main() -> std::process::ExitCode {
    kubeforge::crdgen::main()
}
