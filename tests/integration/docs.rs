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

#[test]
fn readme_should_quote_the_webapp_operator_verbatim() {
    let readme = include_str!("../../README.md");
    let operator = include_str!("../../examples/src/webapp_operator.rs");
    let start = operator
        .find("// [readme-quick-start]\n")
        .expect("start marker")
        + "// [readme-quick-start]\n".len();
    let end = operator
        .find("// [readme-quick-start-end]")
        .expect("end marker");
    assert!(
        readme.contains(&operator[start..end]),
        "README.md's quick start is out of date"
    );
    let binary = include_str!("../../examples/src/bin/webapp.rs");
    let code = &binary[binary.find("\nuse ").expect("imports") + 1..];
    assert!(
        readme.contains(code),
        "README.md's quote of examples/src/bin/webapp.rs is out of date"
    );
}
