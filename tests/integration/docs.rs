//! The README shows real code: the example files it quotes, verbatim.

#[test]
fn readme_should_quote_the_settings_copier_example_verbatim() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../../examples/src/bin/settings_copier.rs");
    let code = &example[example.find("\nuse ").expect("the example has imports") + 1..];
    assert!(
        readme.contains(code),
        "README.md's quote of settings_copier.rs is out of date"
    );
}
