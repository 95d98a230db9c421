//! Durations as Go and Kubernetes write them (`time.ParseDuration`): one or more decimal
//! numbers, each with a unit — `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h` — such as `"500ms"`,
//! `"1m30s"` or `"1.5h"`; `"0"` alone needs no unit. The same grammar in `#[controller(..)]`
//! keys and on an operator's command line. Any other number without a unit is refused, as Go's
//! flags refuse it, with the fix (`"15"`: write `"15s"`).

use std::fmt;
use std::time::Duration;

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not of the grammar.
    Invalid,
    /// A number without a unit (`"15"`; `"0"` alone is a duration): the number.
    MissingUnit(String),
    /// Negative (`-5s`): a wait cannot be.
    Negative,
    /// Larger than `u64::MAX` nanoseconds.
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Invalid => f.write_str(
                "is not a duration: write numbers with units (ns, us, ms, s, m, h), such as \"500ms\", \"5m\" or \"1m30s\"",
            ),
            DurationError::MissingUnit(number) => write!(
                f,
                "is not a duration: it needs a unit; write \"{number}s\" for seconds (or ms, m, h)"
            ),
            DurationError::Negative => f.write_str("is negative"),
            DurationError::TooLong => f.write_str("is too long"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses `text` (see the module docs).
///
/// # Errors
///
/// Text of another grammar (such as a number without a unit), a negative duration, or one over
/// `u64::MAX` nanoseconds.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    if let Some(positive) = text.strip_prefix('-') {
        return match parse(positive)? {
            Duration::ZERO => Ok(Duration::ZERO),
            _ => Err(DurationError::Negative),
        };
    }
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid);
    }
    // A number alone ("15", "1.5"): refused, with the unit it lacks.
    if rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && rest.bytes().any(|b| b.is_ascii_digit())
        && rest.matches('.').count() <= 1
    {
        return Err(DurationError::MissingUnit(rest.to_owned()));
    }
    let mut rest = rest;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or(DurationError::Invalid)?;
        let (number, tail) = rest.split_at(number_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(DurationError::Invalid),
        };
        total = total
            .checked_add(scaled(number, nanos)?)
            .ok_or(DurationError::TooLong)?;
        rest = tail;
    }
    let nanos = u64::try_from(total).map_err(|_| DurationError::TooLong)?;
    Ok(Duration::from_nanos(nanos))
}

/// `number` (digits, an optional fraction) times `unit` nanoseconds, the fraction truncated to
/// whole nanoseconds as Go does.
fn scaled(number: &str, unit: u128) -> Result<u128, DurationError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(DurationError::Invalid);
    }
    let digits = |s: &str| -> Result<u128, DurationError> {
        if s.is_empty() {
            return Ok(0);
        }
        s.parse::<u128>().map_err(|_| DurationError::TooLong)
    };
    let mut value = digits(whole)?
        .checked_mul(unit)
        .ok_or(DurationError::TooLong)?;
    let mut scale = unit;
    for c in fraction.chars() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        value += u128::from(c.to_digit(10).ok_or(DurationError::Invalid)?) * scale;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_should_read_go_durations() {
        let ms = |text| parse(text).map(|d| d.as_millis());
        assert_eq!(ms("500ms"), Ok(500));
        assert_eq!(ms("1m30s"), Ok(90_000));
        assert_eq!(ms("1.5h"), Ok(5_400_000));
        assert_eq!(ms("2h45m"), Ok(9_900_000));
        assert_eq!(ms("0"), Ok(0));
        assert_eq!(ms(".5s"), Ok(500));
        assert_eq!(parse("1us"), Ok(Duration::from_micros(1)));
        assert_eq!(parse("1µs"), Ok(Duration::from_micros(1)));
        assert_eq!(
            parse("1.0000000009s"),
            Ok(Duration::from_nanos(1_000_000_000))
        );
        for bad in [
            "", "s", "1x", "1.2.3s", "ms5", "1s2", ".", "1.2.3", "1 s", "1S",
        ] {
            assert_eq!(parse(bad), Err(DurationError::Invalid), "{bad:?}");
        }
        for (bare, number) in [("5", "5"), ("1.5", "1.5"), ("+15", "15"), (".5", ".5")] {
            let missing = DurationError::MissingUnit(number.to_owned());
            assert_eq!(parse(bare), Err(missing.clone()), "{bare:?}");
            let fix = format!("write \"{number}s\" for seconds");
            assert!(missing.to_string().contains(&fix), "{missing}");
        }
        assert_eq!(parse("-5s"), Err(DurationError::Negative));
        assert_eq!(parse("-0s"), Ok(Duration::ZERO));
        assert_eq!(parse("99999999999h"), Err(DurationError::TooLong));
    }

    /// Issue 37: the command line (one number, `ms`, `s` or `m`, decimals allowed) and
    /// `#[controller(..)]` (integers with `ms`, `s`, `m`, `h`, several in a row) had grammars of
    /// their own; this one reads every duration either took. A bare number of seconds (`"15"`)
    /// was the command line's alone, refused since issue 33 with the fix (see above).
    #[test]
    fn parse_should_read_what_both_former_grammars_read() {
        for (text, micros) in [
            ("500ms", 500_000),
            ("15s", 15_000_000),
            ("2m", 120_000_000),
            ("0.5m", 30_000_000),
            ("1.5s", 1_500_000),
            ("1.s", 1_000_000),
            (".25s", 250_000),
            ("007s", 7_000_000),
            ("2.5ms", 2_500),
            ("0s", 0),
            ("3h", 10_800_000_000),
            ("1h1m1s1ms", 3_661_001_000),
            ("1m30s", 90_000_000),
            ("10s5ms", 10_005_000),
        ] {
            assert_eq!(parse(text), Ok(Duration::from_micros(micros)), "{text:?}");
        }
    }
}
