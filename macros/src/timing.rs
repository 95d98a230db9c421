//! How long the macros take to expand a real kind and controller: `bench/build/run` calls
//! `cargo test -p kubeforge-macros -- --ignored --nocapture expansion_time` and reports it next
//! to the build times of the same crate (stable Rust has no self-profiler for proc macros).

use std::time::{Duration, Instant};

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The items of `file` carrying a kubeforge attribute: (macro, its arguments, the item without
/// the attribute).
fn macro_calls(file: &syn::File) -> Vec<(String, TokenStream, TokenStream)> {
    let mut calls = Vec::new();
    for item in &file.items {
        let mut item = item.clone();
        let attrs = match &mut item {
            syn::Item::Struct(s) => &mut s.attrs,
            syn::Item::Enum(e) => &mut e.attrs,
            syn::Item::Impl(i) => &mut i.attrs,
            _ => continue,
        };
        let Some(at) = attrs.iter().position(|a| {
            let path = a.path();
            path.segments.len() == 2 && path.segments[0].ident == "kubeforge"
        }) else {
            continue;
        };
        let attr = attrs.remove(at);
        let name = attr.path().segments[1].ident.to_string();
        let args = match attr.meta {
            syn::Meta::List(list) => list.tokens,
            _ => TokenStream::new(),
        };
        calls.push((name, args, item.into_token_stream()));
    }
    calls
}

fn expand(name: &str, args: TokenStream, item: TokenStream) -> TokenStream {
    match name {
        "custom_resource" => crate::pipeline::custom_resource(args, item),
        "schema" => crate::pipeline::schema(args, item),
        "controller" => crate::controller::controller(args, item),
        other => panic!("not a kubeforge attribute macro: {other}"),
    }
}

#[test]
#[ignore = "a measurement for bench/build/run, not a check"]
fn expansion_time_of_the_build_benchmark_crate() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bench/build/kubeforge-webapp/src"
    );
    let mut calls = Vec::new();
    for file in ["kind.rs", "main.rs"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).expect("the crate's sources");
        calls.extend(macro_calls(&syn::parse_file(&text).expect("valid Rust")));
    }
    let names: Vec<&str> = calls.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "custom_resource",
            "schema",
            "schema",
            "schema",
            "controller"
        ]
    );
    for (name, args, item) in &calls {
        let out = expand(name, args.clone(), item.clone()).to_string();
        assert!(!out.contains("compile_error"), "{name} failed: {out}");
    }
    // Expand everything again and again for a second; report the mean per build.
    let (mut rounds, mut per_macro) = (0u32, vec![Duration::ZERO; calls.len()]);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) || rounds < 5 {
        for ((name, args, item), spent) in calls.iter().zip(&mut per_macro) {
            let t = Instant::now();
            let out = expand(name, args.clone(), item.clone());
            *spent += t.elapsed();
            drop(out);
        }
        rounds += 1;
    }
    let total: Duration = per_macro.iter().sum::<Duration>() / rounds;
    let detail: Vec<String> = calls
        .iter()
        .zip(&per_macro)
        .map(|((name, _, _), spent)| {
            format!("{name} {:.2} ms", (*spent / rounds).as_secs_f64() * 1e3)
        })
        .collect();
    println!(
        "expansion time per build: {:.2} ms ({}; mean of {rounds} rounds)",
        total.as_secs_f64() * 1e3,
        detail.join(", ")
    );
}
