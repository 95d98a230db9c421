//! Declaring a dependent: the function that builds the child (or a collection of children, or
//! one child per item of a list), and its options.

use std::borrow::Borrow;
use std::fmt::Display;

use futures::future::BoxFuture;

use crate::BoxError;
use crate::controller::{Context, Kind};

use super::policy::Deletion;
use super::ready::Readiness;

pub(super) type Build<P, C, K> = Box<
    dyn for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, Result<K, BoxError>>
        + Send
        + Sync,
>;

/// One child a collection built: the item it was built for (`for_each`), and the child or why
/// there is none.
pub(super) struct Built<K> {
    pub(super) item: Option<String>,
    pub(super) child: Result<K, BoxError>,
}

pub(super) type BuildMany<P, C, K> = Box<
    dyn for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, Result<Vec<Built<K>>, BoxError>>
        + Send
        + Sync,
>;

/// What a dependent builds: one child, or a collection.
pub(super) enum Desire<P, C, K> {
    One(Build<P, C, K>),
    Many(BuildMany<P, C, K>),
}

/// What a desired-state function returns: the child, or `Result<Child, E>` when building it
/// can fail (an error converting into a [`BoxError`]; the dependent is then `Failed`).
#[diagnostic::on_unimplemented(
    message = "a dependent builds a Kubernetes kind (or a `Result` of one), not `{Self}`",
    label = "not a kind a dependent can build",
    note = "return a k8s-openapi resource such as `Secret`, or a kind #[kubeforge::custom_resource] generates; a collection returns `Vec<Kind>`"
)]
pub trait Desired<K> {
    /// The child, or why there is none.
    ///
    /// # Errors
    ///
    /// The function's own error, boxed.
    fn into_desired(self) -> Result<K, BoxError>;
}

impl<K: Kind> Desired<K> for K {
    fn into_desired(self) -> Result<K, BoxError> {
        Ok(self)
    }
}

impl<K: Kind, E: Into<BoxError>> Desired<K> for Result<K, E> {
    fn into_desired(self) -> Result<K, BoxError> {
        self.map_err(Into::into)
    }
}

/// What a collection's function returns: the children (`Vec<Child>`), or a `Result` of them.
#[diagnostic::on_unimplemented(
    message = "a collection of dependents is a `Vec` of one Kubernetes kind (or a `Result` of one), not `{Self}`",
    label = "not a collection a dependent can build"
)]
pub trait DesiredMany<K> {
    /// The children, or why there are none.
    ///
    /// # Errors
    ///
    /// The function's own error, boxed.
    fn into_desired(self) -> Result<Vec<K>, BoxError>;
}

impl<K: Kind> DesiredMany<K> for Vec<K> {
    fn into_desired(self) -> Result<Vec<K>, BoxError> {
        Ok(self)
    }
}

impl<K: Kind, E: Into<BoxError>> DesiredMany<K> for Result<Vec<K>, E> {
    fn into_desired(self) -> Result<Vec<K>, BoxError> {
        self.map_err(Into::into)
    }
}

/// What the items function of a [`for_each`](Dependent::for_each) dependent returns: the items
/// (`Vec<Item>`), or a `Result` of them. Each item names itself (`Display`) in conditions,
/// events and [`Reconciled::items`](super::Reconciled::items).
#[diagnostic::on_unimplemented(
    message = "the items of a `for_each` dependent are a `Vec` of items that implement `Display` (or a `Result` of one), not `{Self}`",
    label = "not a list of items"
)]
pub trait Items<T> {
    /// The items, or why there are none.
    ///
    /// # Errors
    ///
    /// The function's own error, boxed.
    fn into_items(self) -> Result<Vec<T>, BoxError>;
}

impl<T: Display> Items<T> for Vec<T> {
    fn into_items(self) -> Result<Vec<T>, BoxError> {
        Ok(self)
    }
}

impl<T: Display, E: Into<BoxError>> Items<T> for Result<Vec<T>, E> {
    fn into_items(self) -> Result<Vec<T>, BoxError> {
        self.map_err(Into::into)
    }
}

pub(super) type Test<P, C> = Box<dyn Fn(&C, &P) -> bool + Send + Sync>;

/// One child of the primary kind `P` — or a collection of children of one kind — built by a
/// function of the controller `C`.
pub struct Dependent<P, C, K> {
    pub(super) name: &'static str,
    pub(super) desired: Desire<P, C, K>,
    pub(super) create_only: bool,
    pub(super) when: Option<Test<P, C>>,
    pub(super) precondition: Option<Test<P, C>>,
    pub(super) ready: Box<dyn Fn(&K) -> bool + Send + Sync>,
    pub(super) depends_on: Vec<&'static str>,
    /// What happens to a child no longer built (`None`: the kind's default, see `policy`).
    pub(super) prune: Option<Deletion>,
    /// What happens to a child when the owner is deleted (`None`: the kind's default).
    pub(super) on_owner_delete: Option<Deletion>,
}

impl<P, C, K> Dependent<P, C, K> {
    /// A dependent named `name` (in conditions, events and
    /// [`Reconciled::get`](super::Reconciled::get)), built by `desired` (returning the child or
    /// a `Result` of it); ready as soon as it exists.
    pub fn new<R: Desired<K>>(
        name: &'static str,
        desired: impl Fn(&C, &P, &Context<P>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::with_desire(
            name,
            Desire::One(Box::new(move |c, p, ctx| {
                let built = desired(c, p, ctx).into_desired();
                Box::pin(std::future::ready(built))
            })),
        )
    }

    /// As [`new`](Self::new), with an asynchronous desired-state function (one that reads the
    /// cache, say), written as a function returning a boxed future.
    pub fn new_async<R: Desired<K> + 'static>(
        name: &'static str,
        desired: impl for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, R>
        + Send
        + Sync
        + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::with_desire(
            name,
            Desire::One(Box::new(move |c, p, ctx| {
                let building = desired(c, p, ctx);
                Box::pin(async move { building.await.into_desired() })
            })),
        )
    }

    /// A collection of children of kind `K`, built together by `desired` (a `Vec`, or a
    /// `Result` of one). Each is applied; those this dependent made earlier that `desired` no
    /// longer returns are deleted. An object of a built child's name that the primary does not
    /// own is left alone and reported (`Conflict`). Readiness is per child (see
    /// [`Reconciled::items`](super::Reconciled::items)) and in aggregate.
    pub fn many<R: DesiredMany<K>>(
        name: &'static str,
        desired: impl Fn(&C, &P, &Context<P>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::with_desire(
            name,
            Desire::Many(Box::new(move |c, p, ctx| {
                let built = desired(c, p, ctx).into_desired().map(unkeyed);
                Box::pin(std::future::ready(built))
            })),
        )
    }

    /// As [`many`](Self::many), with an asynchronous function.
    pub fn many_async<R: DesiredMany<K> + 'static>(
        name: &'static str,
        desired: impl for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, R>
        + Send
        + Sync
        + 'static,
    ) -> Self
    where
        K: Send + 'static,
    {
        Self::with_desire(
            name,
            Desire::Many(Box::new(move |c, p, ctx| {
                let building = desired(c, p, ctx);
                Box::pin(async move { building.await.into_desired().map(unkeyed) })
            })),
        )
    }

    /// One child per item of `items` (a `Vec` of items that name themselves with `Display`),
    /// each built by `build` from a borrow of its item (`&String` or `&str` for `String`
    /// items): a collection (see [`many`](Self::many)) whose children are known by their item.
    /// Dependents of the same `items` that depend on each other do so item by item: the child
    /// of item `a` waits only for the children of `a` it depends on.
    pub fn for_each<T, U, I, R>(
        name: &'static str,
        items: impl Fn(&C, &P, &Context<P>) -> I + Send + Sync + 'static,
        build: impl Fn(&C, &P, &U, &Context<P>) -> R + Send + Sync + 'static,
    ) -> Self
    where
        K: Send + 'static,
        T: Display + Borrow<U> + Send + 'static,
        U: ?Sized,
        I: Items<T>,
        R: Desired<K>,
    {
        Self::with_desire(
            name,
            Desire::Many(Box::new(move |c, p, ctx| {
                let built = items(c, p, ctx).into_items().map(|items| {
                    items
                        .iter()
                        .map(|item| Built {
                            item: Some(item.to_string()),
                            child: build(c, p, item.borrow(), ctx).into_desired(),
                        })
                        .collect()
                });
                Box::pin(std::future::ready(built))
            })),
        )
    }

    /// As [`for_each`](Self::for_each), with asynchronous functions (the items read the cache,
    /// say), each written as a function returning a boxed future.
    pub fn for_each_async<T, U, I, R>(
        name: &'static str,
        items: impl for<'a> Fn(&'a C, &'a P, &'a Context<P>) -> BoxFuture<'a, I> + Send + Sync + 'static,
        build: impl for<'a> Fn(&'a C, &'a P, &'a U, &'a Context<P>) -> BoxFuture<'a, R>
        + Send
        + Sync
        + 'static,
    ) -> Self
    where
        K: Send + 'static,
        T: Display + Borrow<U> + Send + Sync + 'static,
        U: ?Sized + Sync,
        I: Items<T> + 'static,
        R: Desired<K> + 'static,
        C: Send + Sync,
        P: Send + Sync,
    {
        let build = std::sync::Arc::new(build);
        Self::with_desire(
            name,
            Desire::Many(Box::new(move |c, p, ctx| {
                let listing = items(c, p, ctx);
                let build = std::sync::Arc::clone(&build);
                Box::pin(async move {
                    let items = listing.await.into_items()?;
                    let mut built = Vec::with_capacity(items.len());
                    for item in &items {
                        built.push(Built {
                            item: Some(item.to_string()),
                            child: build(c, p, item.borrow(), ctx).await.into_desired(),
                        });
                    }
                    Ok(built)
                })
            })),
        )
    }

    fn with_desire(name: &'static str, desired: Desire<P, C, K>) -> Self {
        Self {
            name,
            desired,
            create_only: false,
            when: None,
            precondition: None,
            ready: Box::new(|_| true),
            depends_on: Vec::new(),
            prune: None,
            on_owner_delete: None,
        }
    }

    /// Created when absent, never updated (a generated password survives spec edits and
    /// restarts).
    #[must_use]
    pub fn create_only(mut self) -> Self {
        self.create_only = true;
        self
    }

    /// Exists only while `active` holds; pruned when it turns false (a collection: all of it):
    /// deleted, unless [`prune`](Self::prune) or the kind's default says otherwise.
    #[must_use]
    pub fn when(mut self, active: impl Fn(&C, &P) -> bool + Send + Sync + 'static) -> Self {
        self.when = Some(Box::new(active));
        self
    }

    /// Reconciled only while `holds` holds; left as it is (and counted as not ready) otherwise.
    #[must_use]
    pub fn precondition(mut self, holds: impl Fn(&C, &P) -> bool + Send + Sync + 'static) -> Self {
        self.precondition = Some(Box::new(holds));
        self
    }

    /// Ready when `ready` says so of the stored object (of each, for a collection).
    #[must_use]
    pub fn ready(mut self, ready: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.ready = Box::new(ready);
        self
    }

    /// Ready by the kind's built-in rule (see [`ready`](super::ready)).
    #[must_use]
    pub fn ready_builtin(self) -> Self
    where
        K: Readiness + 'static,
    {
        self.ready(K::is_ready)
    }

    /// What happens to a child this dependent no longer builds (dropped from a collection, or
    /// its activation condition turned false): deleted, released (`Orphan`: owner reference and
    /// [`DEPENDENT_LABEL`](super::DEPENDENT_LABEL) removed, object kept) or left as it is
    /// (`Keep`). Without it: `Orphan` for the kinds that hold other objects (Namespace,
    /// PersistentVolumeClaim, PersistentVolume) and for an object carrying finalizers (others
    /// hold it), `Delete` otherwise.
    #[must_use]
    pub fn prune(mut self, policy: Deletion) -> Self {
        self.prune = Some(policy);
        self
    }

    /// What happens to its children when the owner is deleted: deleted by the garbage
    /// collector (`Delete`), or released before the owner goes (`Orphan`: the owner carries
    /// [`FINALIZER`](super::FINALIZER) until they are). `Keep` is refused by
    /// [`build`](super::DependentsBuilder::build): a child that keeps its owner reference is
    /// deleted by the garbage collector. Without it: `Orphan` for the kinds that hold other
    /// objects (Namespace, PersistentVolumeClaim, PersistentVolume) and for an object carrying
    /// finalizers (others hold it: the primary takes the finalizer at the reconcile that sees
    /// them), `Delete` otherwise.
    #[must_use]
    pub fn on_owner_delete(mut self, policy: Deletion) -> Self {
        self.on_owner_delete = Some(policy);
        self
    }

    /// Reconciled only once the dependents named are ready.
    #[must_use]
    pub fn depends_on(mut self, names: &[&'static str]) -> Self {
        self.depends_on.extend_from_slice(names);
        self
    }
}

/// Children of a `Vec`, known by their namespace and name.
fn unkeyed<K>(children: Vec<K>) -> Vec<Built<K>> {
    children
        .into_iter()
        .map(|child| Built {
            item: None,
            child: Ok(child),
        })
        .collect()
}
