//! Compile-fail (trybuild) tests of kubeforge's macros: one misuse per file with a committed
//! `.stderr` snapshot. The cases arrive with the macros they test.
