//! Generated code uses absolute paths only: it compiles when the prelude's names are shadowed.
#![allow(dead_code)]

struct Result;
struct Option;
struct Some;
struct None;
struct Ok;
struct Err;
struct String;
struct Vec;
struct Box;
struct Default;
struct Clone;
struct Debug;

#[kubeforge::custom_resource(group = "ui.kubeforge.dev", version = "v1", kind = "Quiet", cluster)]
#[derive(::core::clone::Clone, ::core::fmt::Debug)]
pub struct QuietSpec {
    #[validate(min_length = 1, pattern = "^[a-z]+$")]
    pub name: ::std::string::String,
    #[validate(max_items = 3)]
    pub tags: ::std::option::Option<::std::vec::Vec<::std::string::String>>,
}

fn main() {
    let _ = Quiet::crd();
}
