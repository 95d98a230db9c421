//! The errors reconcilers and watcher handlers return: [`ReconcileError`], and how the runtime
//! looks at them (logs, events, retry policies).

use crate::BoxError;

/// What a reconcile, a cleanup or a watcher handler may fail with: any error that converts into
/// a [`BoxError`] (`Box<dyn std::error::Error + Send + Sync>`), that is
///
/// - a type implementing [`std::error::Error`] + `Send + Sync` (a `thiserror` enum,
///   `kube::Error`, `std::io::Error`, ...);
/// - `anyhow::Error` (`anyhow::Result<Action>`);
/// - [`BoxError`] itself, so `?` works on every error type at once;
/// - a `String` or `&'static str` message.
///
/// The runtime keeps the error's source chain: log lines and the `RetriesExhausted` event say
/// each cause the error's own text does not (anyhow's contexts, a `#[source]` left out of the
/// message), and [`RetryPolicy`](crate::retry::RetryPolicy) sees the error object itself
/// (`error.downcast_ref::<kube::Error>()`). Inside an `anyhow::Error`, the latter takes the
/// crate's `anyhow` feature (anyhow's own conversion into a `Box<dyn Error>` hides the error it
/// holds behind a type of its own); without it, anyhow errors work the same except that a retry
/// policy cannot downcast them and an apiserver error in one is logged in kube's full text
/// rather than in one phrase.
///
/// Implemented for every such type (a blanket implementation).
pub trait ReconcileError: Into<BoxError> + Send + Sync + 'static {}

impl<E: Into<BoxError> + Send + Sync + 'static> ReconcileError for E {}

/// A reconcile's or handler's error as the runtime keeps it: boxed, with its error object
/// downcastable. With the `anyhow` feature an `anyhow::Error` gives up the error it holds
/// (anyhow's plain conversion would box it behind a type of its own).
pub(crate) fn boxed<E: ReconcileError>(error: E) -> BoxError {
    #[cfg(feature = "anyhow")]
    {
        let mut slot = Some(error);
        let any: &mut dyn std::any::Any = &mut slot;
        if let Some(error) = any
            .downcast_mut::<Option<anyhow::Error>>()
            .and_then(Option::take)
        {
            return error.reallocate_into_boxed_dyn_error_without_backtrace();
        }
        slot.map_or_else(
            || unreachable!("taken only from an anyhow::Error"),
            Into::into,
        )
    }
    #[cfg(not(feature = "anyhow"))]
    error.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        let status =
            kube::core::Status::failure("widgets \"a\" not found", "NotFound").with_code(code);
        kube::Error::Api(Box::new(status))
    }

    #[derive(Debug, thiserror::Error)]
    #[error("writing the status: {0}")]
    struct Typed(#[from] kube::Error);

    #[test]
    fn every_accepted_error_should_keep_its_error_object_and_chain() {
        let typed = boxed(Typed(api_error(404)));
        assert!(typed.downcast_ref::<Typed>().is_some());
        let source = typed.source().expect("the kube error");
        assert!(source.downcast_ref::<kube::Error>().is_some());

        let plain: BoxError = Box::new(api_error(404));
        assert!(boxed(plain).downcast_ref::<kube::Error>().is_some());

        let message = boxed("the registry is read-only");
        assert_eq!(message.to_string(), "the registry is read-only");
    }

    #[cfg(feature = "anyhow")]
    #[test]
    fn an_anyhow_error_should_show_the_error_inside_it() {
        use anyhow::Context as _;

        let bare = boxed(anyhow::Error::from(api_error(404)));
        assert!(bare.downcast_ref::<kube::Error>().is_some(), "{bare:?}");

        let failed: Result<(), kube::Error> = Err(api_error(404));
        let outer = boxed(failed.context("writing the status").unwrap_err());
        assert_eq!(outer.to_string(), "writing the status");
        let cause = outer.source().expect("the context's cause");
        assert!(cause.downcast_ref::<kube::Error>().is_some());
        assert_eq!(
            crate::text::concise(outer.as_ref()),
            "writing the status: 404 NotFound: widgets \"a\" not found"
        );
    }
}
