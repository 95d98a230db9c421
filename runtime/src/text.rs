//! Small text helpers.

/// `s` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// `error`'s text for a log line or an event: its own text followed by each cause in its source
/// chain that the text does not say already (an `anyhow` context, a `#[source]` left out of a
/// `#[error("..")]` message), with every Kubernetes API error in it said in one short phrase:
/// kube's `Display` of `Error::Api` appends a `Debug` dump of the whole `Status`
/// (`ApiError: … (Status { status: Some("Failure"), … })`), which an error type that embeds it
/// (`#[error("writing status: {0}")]`) repeats.
pub(crate) fn concise(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        next = cause.source();
    }
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(kube::Error::Api(status)) = current.downcast_ref::<kube::Error>() {
            let short = format!(
                "{} ({} {})",
                status.message.trim_end_matches('.'),
                status.code,
                status.reason
            );
            text = text.replace(&current.to_string(), &short);
        }
        next = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{concise, truncate};

    #[derive(Debug, thiserror::Error)]
    enum ReconcileError {
        #[error("writing the status: {0}")]
        Kube(#[from] kube::Error),
    }

    #[test]
    fn concise_should_say_an_api_error_in_one_phrase() {
        let status = kube::core::Status::failure(
            "widgets \"a\" is invalid: spec.size: Invalid value",
            "Invalid",
        )
        .with_code(422);
        let error = ReconcileError::from(kube::Error::Api(Box::new(status)));
        assert!(
            error.to_string().contains("Status {"),
            "kube's own text dumps the Status"
        );
        assert_eq!(
            concise(&error),
            "writing the status: widgets \"a\" is invalid: spec.size: Invalid value (422 Invalid)"
        );
        let plain = std::io::Error::other("disk full");
        assert_eq!(concise(&plain), "disk full");
    }

    #[derive(Debug, thiserror::Error)]
    enum Quiet {
        /// The message leaves its source out (it is in the chain).
        #[error("writing the status")]
        Kube(#[source] kube::Error),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reconciling shop")]
    struct Outer(#[source] Quiet);

    #[test]
    fn concise_should_say_the_causes_the_text_leaves_out() {
        let status =
            kube::core::Status::failure("widgets \"a\" not found", "NotFound").with_code(404);
        let error = Outer(Quiet::Kube(kube::Error::Api(Box::new(status))));
        assert_eq!(
            concise(&error),
            "reconciling shop: writing the status: widgets \"a\" not found (404 NotFound)"
        );
    }

    #[test]
    fn truncate_should_respect_char_boundaries() {
        assert_eq!(truncate("abc".into(), 5), "abc");
        assert_eq!(truncate("abcdef".into(), 3), "abc");
        assert_eq!(truncate("aé".into(), 2), "a", "é is two bytes");
    }
}
