//! Client errors that say which request failed: the verb, the kind, the namespace and the name.
//! A bare `404 NotFound` from a reconcile that writes five children says nothing; the same error
//! as `apply Secret team-a/shared: 404 NotFound: secrets "shared" not found` says what to look at.
//!
//! Every log line and event shows a client error in that shape, `verb Kind namespace/name: code
//! reason: message` ([`readable`]), never as kube's `Display` of an apiserver answer, which
//! appends a `Debug` dump of the whole `Status`.

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
/// `status.code == 404` checks still work), its message becomes `request: code reason: message`
/// (`patch WebApp default/shop: 409 Conflict: the object has been modified`); a transport error
/// is wrapped in [`RequestFailed`] (a write the fence refused is still recognised by
/// [`NotLeader::is`](crate::leader::NotLeader::is)).
#[must_use]
pub fn name_error(request: &str, error: kube::Error) -> kube::Error {
    match error {
        kube::Error::Api(mut status) => {
            if !status.message.starts_with(request) {
                status.message = format!("{request}: {}", answer(&status));
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

/// An apiserver answer as `code reason: message` (`409 Conflict: the object has been modified`),
/// said once when the message already holds its code and reason ([`name_error`]'s).
fn answer(status: &kube::core::Status) -> String {
    let code_reason = match (status.code, status.reason.as_str()) {
        (0, "") => return status.message.clone(),
        (0, reason) => reason.to_owned(),
        (code, "") => code.to_string(),
        (code, reason) => format!("{code} {reason}"),
    };
    if status.message.is_empty() {
        code_reason
    } else if status.message.starts_with(&format!("{code_reason}: "))
        || status.message.contains(&format!(": {code_reason}: "))
    {
        status.message.clone()
    } else {
        format!("{code_reason}: {}", status.message)
    }
}

/// `error` as a person reads it: an apiserver answer as `code reason: message`, prefixed by the
/// request when [`name_error`] named it (`patch WebApp default/shop: 409 Conflict: the object
/// has been modified`), a transport error as its text without kube's `ServiceError: `; never
/// kube's `Display` of an apiserver answer (`ApiError: …: Conflict (Status { status: … })`).
/// Log with `%readable(&error)`, or with [`Display`](fmt::Display) of an error type that uses it.
///
/// # Examples
///
/// ```
/// let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
/// let error = kubeforge::client::name_error(
///     &kubeforge::client::request("patch", "WebApp", Some("default"), "shop"),
///     kube::Error::Api(Box::new(status)),
/// );
/// assert_eq!(
///     kubeforge::client::readable(&error).to_string(),
///     "patch WebApp default/shop: 409 Conflict: the object has been modified"
/// );
/// ```
#[must_use]
pub fn readable(error: &kube::Error) -> Readable<'_> {
    Readable(error)
}

/// A client error shown by [`readable`].
#[derive(Clone, Copy, Debug)]
pub struct Readable<'a>(&'a kube::Error);

impl fmt::Display for Readable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            kube::Error::Api(status) => f.write_str(&answer(status)),
            kube::Error::Service(source) => fmt::Display::fmt(source, f),
            other => fmt::Display::fmt(other, f),
        }
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
            "apply Secret team-a/shared: 404 NotFound: the server could not find the requested resource"
        );
        assert_eq!(readable(&named).to_string(), message(&named));
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
        assert_eq!(
            readable(&named).to_string(),
            "delete Role reader: connection refused"
        );
        let fenced = name_error(
            &what,
            kube::Error::Service(Box::new(crate::leader::NotLeader)),
        );
        assert!(crate::leader::NotLeader::is(&fenced));
    }

    /// Issue 33, item 4: errors were logged as `ApiError: …: Conflict (Status { status: … })`.
    #[test]
    fn readable_should_say_request_code_reason_and_message_once() {
        let status = |message: &str, reason: &str, code: u16| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(message, reason).with_code(code),
            ))
        };
        let conflict = status("the object has been modified", "Conflict", 409);
        assert!(conflict.to_string().contains("Status {"), "kube's own text");
        assert_eq!(
            readable(&conflict).to_string(),
            "409 Conflict: the object has been modified"
        );
        let named = name_error(
            &request("patch", "WebApp", Some("default"), "shop"),
            conflict,
        );
        assert_eq!(
            readable(&named).to_string(),
            "patch WebApp default/shop: 409 Conflict: the object has been modified"
        );
        let outer = name_error(&request("reconcile", "Shop", Some("default"), "s"), named);
        assert_eq!(
            readable(&outer).to_string(),
            "reconcile Shop default/s: patch WebApp default/shop: 409 Conflict: the object has been modified",
            "the code and reason once"
        );
        assert_eq!(
            readable(&status("", "Forbidden", 403)).to_string(),
            "403 Forbidden"
        );
        assert_eq!(readable(&status("gone", "", 0)).to_string(), "gone");
        assert_eq!(
            readable(&status("too old", "Expired", 0)).to_string(),
            "Expired: too old"
        );
        let io = kube::Error::ReadEvents(std::io::Error::other("reset"));
        assert_eq!(readable(&io).to_string(), io.to_string());
    }
}
