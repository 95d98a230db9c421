//! Client errors that say which request failed: the verb, the kind, the namespace and the name.
//! A bare `404 NotFound` from a reconcile that writes five children says nothing; the same error
//! as `apply Secret team-a/shared: secrets "shared" not found` says what to look at.

use std::fmt;

/// A request that failed for a reason other than the apiserver's answer (a connection, a
/// timeout), with what it was: [`source`](std::error::Error::source) is the original error.
#[derive(Debug)]
pub struct RequestFailed {
    /// `apply Secret team-a/shared`.
    pub request: String,
    /// The client's error.
    pub source: crate::BoxError,
}

impl fmt::Display for RequestFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.request, self.source)
    }
}

impl std::error::Error for RequestFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// `verb Kind namespace/name` (or `verb Kind name` for a cluster-scoped object).
#[must_use]
pub fn request(verb: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{verb} {kind} {namespace}/{name}"),
        None => format!("{verb} {kind} {name}"),
    }
}

/// `error` naming the request that failed: an apiserver answer keeps its code and reason (so
/// `status.code == 404` checks still work) with the request put before its message; a
/// transport error is wrapped in [`RequestFailed`] (a write the fence refused is still
/// recognised by [`NotLeader::is`](crate::leader::NotLeader::is)).
#[must_use]
pub fn name_error(request: &str, error: kube::Error) -> kube::Error {
    match error {
        kube::Error::Api(mut status) => {
            if !status.message.starts_with(request) {
                status.message = format!("{request}: {}", status.message);
            }
            kube::Error::Api(status)
        }
        kube::Error::Service(source) if !source.is::<RequestFailed>() => {
            kube::Error::Service(Box::new(RequestFailed {
                request: request.to_owned(),
                source,
            }))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_should_name_the_request_and_keep_their_code() {
        let what = request("apply", "Secret", Some("team-a"), "shared");
        let mut status = kube::core::Status::failure(
            "the server could not find the requested resource",
            "NotFound",
        );
        status.code = 404;
        let not_found = kube::Error::Api(status.boxed());
        let named = name_error(&what, not_found);
        let message = |e: &kube::Error| match e {
            kube::Error::Api(s) if s.code == 404 => s.message.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            message(&named),
            "apply Secret team-a/shared: the server could not find the requested resource"
        );
        // Named once, however often it passes through.
        let twice = name_error(&what, named);
        assert_eq!(
            message(&twice).matches("apply Secret").count(),
            1,
            "{twice}"
        );

        let refused = kube::Error::Service("connection refused".into());
        let named = name_error(&request("delete", "Role", None, "reader"), refused);
        assert_eq!(
            named.to_string(),
            "ServiceError: delete Role reader: connection refused"
        );
        let fenced = name_error(
            &what,
            kube::Error::Service(Box::new(crate::leader::NotLeader)),
        );
        assert!(crate::leader::NotLeader::is(&fenced));
    }
}
