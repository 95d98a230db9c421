//! The kubeforge book (`docs/src`), as documentation: `cargo test -p kubeforge-book --doc`
//! compiles every Rust block of every chapter. build.rs expands mdBook's `{{#include}}`s first;
//! a block made only of includes is compiled where it comes from (an example, a test) and is
//! not compiled twice. The chapters' links, includes and generated references are checked by
//! `tests/book.rs`.

include!(concat!(env!("OUT_DIR"), "/chapters.rs"));
