//! Label selectors written as strings (`webhooks(namespace_selector = "..")`), parsed at compile
//! time into the terms of a Kubernetes `LabelSelector`, with the grammar of `kubectl -l`:
//! `key=value` (or `==`), `key!=value`, `key`, `!key`, `key in (a, b)`, `key notin (a, b)`,
//! comma-separated.

/// A parsed selector.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// `key=value` terms.
    pub match_labels: Vec<(String, String)>,
    /// The other terms: key, operator (`In`, `NotIn`, `Exists`, `DoesNotExist`), values.
    pub match_expressions: Vec<(String, String, Vec<String>)>,
}

/// Parses `text`; the error says which term is wrong and why.
pub fn parse(text: &str) -> Result<Selector, String> {
    let mut selector = Selector::default();
    let terms = split_terms(text)?;
    if terms.is_empty() {
        return Err("an empty selector selects everything: leave the key out".to_owned());
    }
    for term in terms {
        let term = term.trim();
        if let Some(key) = term.strip_prefix('!') {
            let key = label_key(key.trim(), term)?;
            selector
                .match_expressions
                .push((key, "DoesNotExist".to_owned(), Vec::new()));
        } else if let Some((key, value)) = term.split_once("!=") {
            let key = label_key(key.trim(), term)?;
            let value = label_value(value.trim(), term)?;
            selector
                .match_expressions
                .push((key, "NotIn".to_owned(), vec![value]));
        } else if let Some((key, value)) = term.split_once('=') {
            let value = value.strip_prefix('=').unwrap_or(value);
            let key = label_key(key.trim(), term)?;
            let value = label_value(value.trim(), term)?;
            selector.match_labels.push((key, value));
        } else if let Some(open) = term.find('(') {
            let (head, rest) = term.split_at(open);
            let mut words = head.split_whitespace();
            let (Some(key), Some(op), None) = (words.next(), words.next(), words.next()) else {
                return Err(format!(
                    "`{term}`: expected `key in (a, b)` or `key notin (a, b)`"
                ));
            };
            let operator = match op {
                "in" => "In",
                "notin" => "NotIn",
                _ => return Err(format!("`{term}`: expected `in` or `notin`, found `{op}`")),
            };
            let Some(inner) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
                return Err(format!("`{term}`: the values go in parentheses"));
            };
            let values = inner
                .split(',')
                .map(|v| label_value(v.trim(), term))
                .collect::<Result<Vec<_>, _>>()?;
            if values.iter().all(String::is_empty) {
                return Err(format!("`{term}`: `{op}` needs at least one value"));
            }
            selector
                .match_expressions
                .push((label_key(key, term)?, operator.to_owned(), values));
        } else if term.contains(char::is_whitespace) {
            return Err(format!(
                "`{term}`: expected `key`, `key=value` or `key in (a, b)` (the values go in parentheses)"
            ));
        } else {
            let key = label_key(term, term)?;
            selector
                .match_expressions
                .push((key, "Exists".to_owned(), Vec::new()));
        }
    }
    Ok(selector)
}

/// The comma-separated terms (commas inside parentheses belong to their term).
fn split_terms(text: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("`{text}`: unbalanced parentheses"));
        }
    }
    if depth != 0 {
        return Err(format!("`{text}`: unbalanced parentheses"));
    }
    terms.push(&text[start..]);
    if terms.len() == 1 && terms[0].trim().is_empty() {
        return Ok(Vec::new());
    }
    if terms.iter().any(|t| t.trim().is_empty()) {
        return Err(format!("`{text}`: an empty term"));
    }
    Ok(terms)
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_`, `.`, beginning and ending with an alphanumeric.
fn label_key(key: &str, term: &str) -> Result<String, String> {
    let name = key.rsplit_once('/').map_or(key, |(prefix, name)| {
        if prefix.is_empty() || prefix.len() > 253 {
            ""
        } else {
            name
        }
    });
    if !is_name(name) {
        return Err(format!("`{term}`: `{key}` is not a label key"));
    }
    Ok(key.to_owned())
}

/// A label value: empty, or a name as in [`label_key`].
fn label_value(value: &str, term: &str) -> Result<String, String> {
    if value.is_empty() || is_name(value) {
        Ok(value.to_owned())
    } else {
        Err(format!("`{term}`: `{value}` is not a label value"))
    }
}

fn is_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_should_parse_like_kubectl() {
        let s = parse("app=web, tier != db, env in (prod, staging), !legacy, managed").unwrap();
        assert_eq!(s.match_labels, [("app".to_owned(), "web".to_owned())]);
        let ops: Vec<_> = s
            .match_expressions
            .iter()
            .map(|(k, o, v)| format!("{k} {o} {v:?}"))
            .collect();
        assert_eq!(
            ops,
            [
                "tier NotIn [\"db\"]",
                "env In [\"prod\", \"staging\"]",
                "legacy DoesNotExist []",
                "managed Exists []"
            ]
        );
        assert_eq!(
            parse("kubernetes.io/metadata.name==shop")
                .unwrap()
                .match_labels,
            [("kubernetes.io/metadata.name".to_owned(), "shop".to_owned())]
        );
    }

    #[test]
    fn bad_selectors_should_say_which_term() {
        assert!(parse("").unwrap_err().contains("empty selector"));
        assert!(parse("a=b,").unwrap_err().contains("empty term"));
        assert!(
            parse("a in b").unwrap_err().contains("parentheses"),
            "{:?}",
            parse("a in b")
        );
        assert!(parse("a within (b)").unwrap_err().contains("`within`"));
        assert!(parse("-a=b").unwrap_err().contains("not a label key"));
        assert!(parse("a=b c").unwrap_err().contains("not a label value"));
        assert!(parse("a in (b").unwrap_err().contains("unbalanced"));
    }
}
