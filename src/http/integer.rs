//! Integers in requests (uids, limits), read exactly as JSON, query strings and paths write them.
//!
//! JSON has one kind of number: `7`, `7.0` and `7e0` are the same number, and `type: integer` in the spec takes all
//! three. serde hands `7.0` to an `i64` field as a float and refuses it; converting the float instead would round
//! numbers beyond 2^53 to a neighbouring uid. So the number's own text is read, and taken when it is an integer in
//! the range of `i64`, exactly.

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, de};
use serde_json::value::RawValue;

/// Why a text is not an integer this service takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IntegerError {
    #[error("expected an integer")]
    NotANumber,
    #[error("expected an integer, not a number with a fraction")]
    Fraction,
    #[error("the integer is out of range (-9223372036854775808 to 9223372036854775807)")]
    OutOfRange,
}

/// Reads a decimal integer (`7`, `+7`, `-7`) or a JSON number whose value is an integer (`7.0`, `7e0`, `70e-1`).
pub fn parse(text: &str) -> Result<i64, IntegerError> {
    if let Ok(value) = text.parse::<i64>() {
        return Ok(value);
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || fraction.is_some_and(|f| !digits(f)) {
        return Err(IntegerError::NotANumber);
    }
    let fraction = fraction.unwrap_or_default();
    let exponent = match exponent {
        None => 0,
        Some(text) => exponent_of(text)?,
    };
    // The value is `significant × 10^scale`, with the significant digits' zeros on both ends taken off.
    let all = format!("{whole}{fraction}");
    let significant = all.trim_start_matches('0').trim_end_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    let trailing_zeros = all.trim_start_matches('0').len() - significant.len();
    let scale = exponent - fraction.len() as i64 + trailing_zeros as i64;
    if scale < 0 {
        return Err(IntegerError::Fraction);
    }
    // i64 has 19 digits at most; checking the length first keeps the arithmetic below from overflowing.
    if significant.len() as i64 + scale > 19 {
        return Err(IntegerError::OutOfRange);
    }
    let mut value: i128 = significant.parse().map_err(|_| IntegerError::OutOfRange)?;
    for _ in 0..scale {
        value *= 10;
    }
    if negative {
        value = -value;
    }
    i64::try_from(value).map_err(|_| IntegerError::OutOfRange)
}

/// An exponent, saturated far beyond any that could leave an `i64` (the digits before it decide the outcome).
fn exponent_of(text: &str) -> Result<i64, IntegerError> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IntegerError::NotANumber);
    }
    const SATURATED: i64 = 1_000_000_000_000;
    let magnitude = digits.parse::<i64>().unwrap_or(SATURATED).min(SATURATED);
    Ok(if negative { -magnitude } else { magnitude })
}

/// `#[serde(deserialize_with)]` for an `i64` member of a JSON body.
pub fn json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    parse(raw.get()).map_err(D::Error::custom)
}

/// `#[serde(deserialize_with)]` for an `Option<i64>` member of a JSON body that may be `null`.
pub fn json_or_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let raw = Option::<Box<RawValue>>::deserialize(deserializer)?;
    raw.map(|raw| parse(raw.get()).map_err(D::Error::custom))
        .transpose()
}

/// `#[serde(default, deserialize_with)]` for an `Option<i64>` member of a JSON body that may be absent but not `null`
/// (`http::not_null`).
pub fn json_optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    json(deserializer).map(Some)
}

/// `#[serde(default, deserialize_with)]` for an `Option<Vec<i64>>` member of a JSON body that may be absent but not
/// `null`: a list of integers, each as JSON Schema reads one (`7.0` is 7).
pub fn json_list_optional<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<i64>>, D::Error> {
    let raw = Vec::<Box<RawValue>>::deserialize(deserializer)?;
    raw.iter()
        .map(|item| parse(item.get()).map_err(D::Error::custom))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `#[serde(deserialize_with)]` for an `i64` query parameter.
pub fn query<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse(&text).map_err(|error| de::Error::custom(format!("{error}: {text:?}")))
}

/// `#[serde(deserialize_with)]` for an optional `i64` query parameter; use with `#[serde(default)]`.
pub fn query_optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    query(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_integers_are_read_as_rust_reads_them() {
        for (text, value) in [
            ("0", 0),
            ("7", 7),
            ("-7", -7),
            ("+7", 7),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ] {
            assert_eq!(parse(text), Ok(value), "{text}");
        }
    }

    #[test]
    fn a_json_number_whose_value_is_an_integer_is_that_integer() {
        for (text, value) in [
            ("7.0", 7),
            ("7.000", 7),
            ("-7.0", -7),
            ("7e0", 7),
            ("7E+2", 700),
            ("70e-1", 7),
            ("0.7e1", 7),
            ("-0.0", 0),
            ("0e999999999999999999999", 0),
            ("68060.0", 68060),
            ("9223372036854775807.0", i64::MAX),
            ("9.223372036854775807e18", i64::MAX),
            ("-9.223372036854775808e18", i64::MIN),
        ] {
            assert_eq!(parse(text), Ok(value), "{text}");
        }
    }

    #[test]
    fn a_number_with_a_fraction_is_no_integer() {
        for text in [
            "7.5",
            "0.1",
            "7e-1",
            "9007199254740993.5",
            "1e-999999999999999",
        ] {
            assert_eq!(parse(text), Err(IntegerError::Fraction), "{text}");
        }
    }

    #[test]
    fn an_integer_beyond_i64_is_out_of_range_not_rounded() {
        for text in [
            "9223372036854775808",
            "-9223372036854775809",
            "9223372036854775808.0",
            "2.3459000653036252e+27",
            "1e19",
            "1e999999999999999999999",
        ] {
            assert_eq!(parse(text), Err(IntegerError::OutOfRange), "{text}");
        }
        // Exactly, where a float would have rounded to 2^53.
        assert_eq!(parse("9007199254740993.0"), Ok(9_007_199_254_740_993));
    }

    #[test]
    fn text_that_is_no_number_is_refused() {
        for text in [
            "", "-", "x", "7x", "\"7\"", "1.", ".5", "1e", "1e+", "0x10", "null", "true", "7 ",
        ] {
            assert_eq!(parse(text), Err(IntegerError::NotANumber), "{text:?}");
        }
    }
}
