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

#[derive(::core::fmt::Debug)]
pub struct QuietError;
impl ::core::fmt::Display for QuietError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.write_str("quiet")
    }
}
impl ::std::error::Error for QuietError {}

pub struct QuietController;

#[kubeforge::controller(for = Quiet, owns(::kubeforge::k8s_openapi::api::core::v1::ConfigMap),
    finalizer = "ui.kubeforge.dev/quiet", predicates(generation_changed))]
impl QuietController {
    async fn reconcile(
        &self,
        _obj: ::std::sync::Arc<Quiet>,
        _ctx: &::kubeforge::controller::Context<Quiet>,
    ) -> ::core::result::Result<::kubeforge::controller::Action, QuietError> {
        ::core::result::Result::Ok(::kubeforge::controller::Action::Done)
    }
    async fn cleanup(
        &self,
        _obj: ::std::sync::Arc<Quiet>,
        _ctx: &::kubeforge::controller::Context<Quiet>,
    ) -> ::core::result::Result<::kubeforge::controller::Action, QuietError> {
        ::core::result::Result::Ok(::kubeforge::controller::Action::Done)
    }
}

pub struct QuietWatcher;

#[kubeforge::controller(for = Quiet, watcher, workers = 2, event_timeout = "5s",
    retry = exponential(base = "1s"), dequeue = all, name = "quiet-watcher")]
impl QuietWatcher {
    async fn add(
        &self,
        _obj: ::std::sync::Arc<Quiet>,
        _ctx: &::kubeforge::watcher::WatchContext,
    ) -> ::core::result::Result<(), QuietError> {
        ::core::result::Result::Ok(())
    }
    async fn update(
        &self,
        _old: ::std::sync::Arc<Quiet>,
        _new: ::std::sync::Arc<Quiet>,
        _ctx: &::kubeforge::watcher::WatchContext,
    ) -> ::core::result::Result<(), QuietError> {
        ::core::result::Result::Ok(())
    }
}

pub fn main() {
    let _ = Quiet::crd();
    let _ = <QuietController as ::kubeforge::controller::ControllerSpec>::rbac();
    let _ = <QuietWatcher as ::kubeforge::watcher::WatcherSpec>::rbac();
}
