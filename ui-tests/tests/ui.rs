//! Runs the trybuild cases: `ui/fail/*.rs` must fail to compile with exactly the committed
//! `.stderr`. After an intended change of a message, run
//! `TRYBUILD=overwrite cargo test -p kubeforge-ui-tests` and review the diff. The valid uses,
//! `ui/pass/*.rs`, compile and run as modules of one test binary (`tests/pass.rs`).

#[test]
fn macros_should_reject_misuse_at_the_right_span() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
}
