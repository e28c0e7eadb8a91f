//! Numbers a double cannot hold exactly, found in a JSON text by their own digits (docs/design.md §14).
//!
//! Anthropic's `input` and Gemini's `args` are kept as RFC 8785 text, whose numbers are doubles: past 2^53 in
//! magnitude a double no longer holds every integer, so the digest, the approver and the executor would see a
//! neighbouring number. The parsed tree cannot tell: `9007199254740993.0` and `123456789012345678901234` are read as
//! doubles already rounded. So the text is read: every number whose value passes 2^53 in magnitude, however written
//! (integer, fraction, exponent), is found with its place.

use std::fmt::Write;

/// 2^53, the largest magnitude up to which a double holds every integer; its sixteen digits.
const LIMIT_DIGITS: &str = "9007199254740992";

/// One step of a place in a JSON text: an array's index or an object's member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Index(usize),
    Member(String),
}

/// Writes steps as the service names places: `[3]` for an index, `.name` for a member.
pub fn place(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        // Writing to a String cannot fail.
        let _ = match step {
            Step::Index(index) => write!(text, "[{index}]"),
            Step::Member(name) => write!(text, ".{name}"),
        };
    }
    text
}

/// A JSON number's exact decimal value, `0.digits × 10^point`, read from its text: the significant digits without
/// the zeros on either end. Two texts of one value (`42`, `42.0`, `4.2e1`) give equal decimals; zero is one value
/// whatever its sign or spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    negative: bool,
    digits: String,
    point: i64,
}

impl Decimal {
    /// The value of a JSON number's text (one that JSON's grammar allows).
    pub fn of(number: &str) -> Decimal {
        let (negative, unsigned) = match number.strip_prefix('-') {
            Some(unsigned) => (true, unsigned),
            None => (false, number),
        };
        let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((mantissa, exponent)) => (mantissa, exponent_of(exponent)),
            None => (unsigned, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all = format!("{whole}{fraction}");
        let leading = all.len() - all.trim_start_matches('0').len();
        let digits = all.trim_matches('0');
        if digits.is_empty() {
            return Decimal {
                negative: false,
                digits: String::new(),
                point: 0,
            };
        }
        Decimal {
            negative,
            digits: digits.to_owned(),
            point: whole.len() as i64 - leading as i64 + exponent,
        }
    }
}

/// Whether a JSON number's text is beyond 2^53 in magnitude, decided on its digits, never on a rounded double.
pub fn passes_2_53(number: &str) -> bool {
    let Decimal { digits, point, .. } = Decimal::of(number);
    if digits.is_empty() {
        return false;
    }
    let limit = LIMIT_DIGITS.len() as i64;
    if point != limit {
        return point > limit;
    }
    // Sixteen digits before the point, as 2^53 has: compare them, then anything after them makes it larger.
    let width = LIMIT_DIGITS.len();
    let integer: String = digits
        .chars()
        .chain(std::iter::repeat('0'))
        .take(width)
        .collect();
    integer.as_str() > LIMIT_DIGITS || (integer == LIMIT_DIGITS && digits.len() > width)
}

/// An exponent's value, saturated far beyond any that could matter (the text's own length bounds the digits).
fn exponent_of(text: &str) -> i64 {
    const SATURATED: i64 = 1_000_000_000_000;
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = digits.parse::<i64>().unwrap_or(SATURATED).min(SATURATED);
    if negative { -magnitude } else { magnitude }
}

/// What the reader is inside of.
enum Frame {
    /// An array, at this index.
    Array(usize),
    /// An object, in the member of this name (`None` before its first name).
    Object(Option<String>),
}

/// The places of the numbers in `text` whose value passes 2^53 in magnitude, in the order they appear. `text` must
/// be JSON that serde_json read (a body's member, already parsed): the scan trusts its structure and only tracks
/// where it is.
pub fn past_2_53(text: &str) -> Vec<Vec<Step>> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut found = Vec::new();
    // Whether the next string is a member's name: after `{` and after `,` inside an object.
    let mut name_next = false;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => {
                stack.push(Frame::Object(None));
                name_next = true;
                at += 1;
            }
            b'[' => {
                stack.push(Frame::Array(0));
                name_next = false;
                at += 1;
            }
            b'}' | b']' => {
                stack.pop();
                at += 1;
            }
            b',' => {
                match stack.last_mut() {
                    Some(Frame::Array(index)) => *index += 1,
                    Some(Frame::Object(_)) => name_next = true,
                    None => {}
                }
                at += 1;
            }
            b':' => {
                name_next = false;
                at += 1;
            }
            b'"' => {
                let end = string_end(bytes, at);
                if name_next && let Some(Frame::Object(name)) = stack.last_mut() {
                    // The name as JSON reads it (escapes decoded); the text already parsed, so this cannot fail.
                    *name = serde_json::from_str(&text[at..end]).ok();
                }
                at = end;
            }
            b'-' | b'0'..=b'9' => {
                let end = at
                    + bytes[at..]
                        .iter()
                        .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                        .count();
                if passes_2_53(&text[at..end]) {
                    found.push(steps(&stack));
                }
                at = end;
            }
            // Spaces, and the letters of `true`, `false` and `null`.
            _ => at += 1,
        }
    }
    found
}

/// The end (one past the closing quote) of the string starting at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

fn steps(stack: &[Frame]) -> Vec<Step> {
    stack
        .iter()
        .map(|frame| match frame {
            Frame::Array(index) => Step::Index(*index),
            Frame::Object(name) => Step::Member(name.clone().unwrap_or_default()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_past_2_53_is_found_however_it_is_written() {
        for text in [
            "9007199254740993",
            "-9007199254740993",
            "9007199254740993.0",
            "9007199254740992.5",
            "9007199254740992.0000000001",
            "9.007199254740993e15",
            "0.9007199254740993E16",
            "90071992547409930e-1",
            "123456789012345678901234",
            "1.2345678901234567e23",
            "1e16",
            "1E+400",
            "-1e300",
        ] {
            assert!(passes_2_53(text), "{text}");
        }
    }

    #[test]
    fn a_number_up_to_2_53_is_not_however_it_is_written() {
        for text in [
            "9007199254740992",
            "-9007199254740992",
            "9007199254740992.0",
            "9.007199254740992e15",
            "90071992547409920e-1",
            "9007199254740991.9999",
            "1e15",
            "0",
            "-0.0",
            "0e999999999999999999",
            "0.1",
            "1e-400",
            "123.456",
        ] {
            assert!(!passes_2_53(text), "{text}");
        }
    }

    #[test]
    fn one_value_written_several_ways_is_one_decimal() {
        for (a, b) in [
            ("42", "42.0"),
            ("42", "4.2e1"),
            ("42", "4200e-2"),
            ("0", "-0.000e7"),
            ("123456789012345678901234", "1.23456789012345678901234E+23"),
        ] {
            assert_eq!(Decimal::of(a), Decimal::of(b), "{a} and {b}");
        }
        for (a, b) in [
            ("42", "-42"),
            ("42", "4.2"),
            ("123456789012345678901234", "123456789012345678901235"),
        ] {
            assert_ne!(Decimal::of(a), Decimal::of(b), "{a} and {b}");
        }
    }

    #[test]
    fn every_number_past_2_53_is_found_with_its_place_and_strings_are_not_numbers() {
        let text = r#"{"a": [1, {"b\"c": 9007199254740993.0}], "s": "9007199254740993", "d": {"e": 2, "f": [0, -1e20]}, "t": true}"#;
        let found: Vec<String> = past_2_53(text).iter().map(|steps| place(steps)).collect();
        assert_eq!(found, [r#".a[1].b"c"#, ".d.f[1]"]);
        assert!(past_2_53("[9007199254740992, 1.5, null]").is_empty());
        assert_eq!(place(&past_2_53("[1, [2, 9007199254740993]]")[0]), "[1][1]");
    }
}
