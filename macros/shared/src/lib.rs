//! What kubeforge's macros (at compile time), runtime and scaffold must compute alike, written
//! once: the macros emit hashes and names the runtime recomputes, and a duration means the same
//! in `#[controller(..)]` as on the command line; and one generator for jitter and test data.
//! No dependencies, so the proc-macro crate stays quick to build.

pub mod duration;
pub mod graph;
pub mod hash;
pub mod names;
pub mod random;
