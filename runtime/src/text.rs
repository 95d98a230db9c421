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
/// `#[error("..")]` message), with every Kubernetes client error in it said as
/// [`readable`](crate::client::readable) says it (`code reason: message`, after the request when
/// it was named): kube's `Display` of `Error::Api` appends a `Debug` dump of the whole `Status`
/// (`ApiError: … (Status { status: Some("Failure"), … })`), which an error type that embeds it
/// (`#[error("writing status: {0}")]`) repeats.
pub(crate) fn concise(error: &(dyn std::error::Error + 'static)) -> String {
    let chain = chain(error);
    let mut text = said(error);
    for cause in chain.iter().skip(1) {
        let cause = said(*cause);
        if !cause.is_empty() && !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text
}

/// `error` and its causes, up to an apiserver answer (whose own source, its `Status`, says
/// nothing more).
pub(crate) fn chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |e| match kube_error(*e) {
        Some(kube::Error::Api(_)) => None,
        _ => e.source(),
    })
    .collect()
}

/// `error` as a Kubernetes client error, boxed (a `#[source] Box<kube::Error>`) or not.
fn kube_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a kube::Error> {
    error
        .downcast_ref::<kube::Error>()
        .or_else(|| error.downcast_ref::<Box<kube::Error>>().map(AsRef::as_ref))
}

/// `error`'s own text (no causes added), with every Kubernetes client error of its [`chain`]
/// that it embeds said [`readable`](crate::client::readable)-ly.
pub(crate) fn said(error: &(dyn std::error::Error + 'static)) -> String {
    chain(error)
        .iter()
        .filter_map(|e| kube_error(*e))
        .fold(error.to_string(), |text, kube| {
            text.replace(
                &kube.to_string(),
                &crate::client::readable(kube).to_string(),
            )
        })
}

/// Compares `rendered` with the committed file `relative` (to the workspace root), or writes it
/// when `KUBEFORGE_BLESS=1`; a generated reference of the book is checked this way by the test
/// `test` (its path, for the message).
///
/// # Panics
///
/// The file differs (or is missing), or cannot be written when blessing.
#[cfg(all(test, any(feature = "cli", feature = "crdgen")))]
pub(crate) fn check_generated(relative: &str, rendered: &str, test: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    if std::env::var_os("KUBEFORGE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == rendered {
        return;
    }
    let line = committed
        .lines()
        .zip(rendered.lines())
        .take_while(|(a, b)| a == b)
        .count();
    panic!(
        "{relative} is stale: run KUBEFORGE_BLESS=1 cargo test -p kubeforge --all-features {test}\n\
         first difference at line {}:\n- {}\n+ {}",
        line + 1,
        committed.lines().nth(line).unwrap_or("(end of file)"),
        rendered.lines().nth(line).unwrap_or("(end of file)"),
    );
}

/// `text` for a cell of a generated markdown table: one line, `|` escaped, and `<` outside
/// code spans written `&lt;` (not taken for HTML).
#[cfg(all(test, any(feature = "cli", feature = "crdgen")))]
pub(crate) fn table_cell(text: &str) -> String {
    text.replace('\n', " ")
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            let part = part.replace('|', "\\|");
            if i % 2 == 0 {
                part.replace('<', "&lt;")
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// `text` escaped for a query value (everything but RFC 3986's unreserved characters).
pub(crate) fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
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
            "writing the status: 422 Invalid: widgets \"a\" is invalid: spec.size: Invalid value"
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
            "reconciling shop: writing the status: 404 NotFound: widgets \"a\" not found"
        );
    }

    #[test]
    fn truncate_should_respect_char_boundaries() {
        assert_eq!(truncate("abc".into(), 5), "abc");
        assert_eq!(truncate("abcdef".into(), 3), "abc");
        assert_eq!(truncate("aé".into(), 2), "a", "é is two bytes");
    }
}
