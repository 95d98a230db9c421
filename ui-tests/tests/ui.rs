//! Runs the trybuild cases: `ui/fail/*.rs` must fail to compile with exactly the committed
//! `.stderr`; `ui/pass/*.rs` must compile and run. After an intended change of a message, run
//! `TRYBUILD=overwrite cargo test -p kubeforge-ui-tests` and review the diff.

#[test]
fn macros_should_reject_misuse_at_the_right_span_and_accept_valid_use() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
    cases.pass("ui/pass/*.rs");
}
