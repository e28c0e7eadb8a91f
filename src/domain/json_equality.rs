//! Whether two JSON texts are equal as JSON values: the one comparison of a rule's arguments with a call's
//! (docs/design.md §18), of edited arguments with the proposed ones (an edit equal to them is none, §5) and of a
//! replay's edit with the stored one (§5).
//!
//! Equal as JSON values is equal in canonical form (RFC 8785): members in any order, spacing and escapes aside, and
//! numbers by value, whatever their spelling (`42`, `42.0` and `4.2e1` are one number). RFC 8785's numbers are
//! doubles, which hold every integer only up to 2^53 (§14), so a number beyond 2^53 in magnitude is compared by its
//! exact decimal value, read from its own digits: two order ids past 2^53, or past 64 bits, that a double would round
//! to one value stay two values. `serde_json`'s `Value` cannot do either: it keeps `42` and `42.0` apart (an integer
//! and a float) and reads an integer past 64 bits as an already rounded double.
//!
//! The texts are read here, number by number; whatever `serde_json` refuses to read as a value (not JSON, a lone
//! surrogate escaped, nesting past its limit) is refused here too, and such a text equals only itself, byte for byte.

use std::collections::BTreeMap;

use super::exact_numbers::{Decimal, passes_2_53};

/// How deep a text may nest: `serde_json`'s own limit, so that what it reads this reads, and no text makes the
/// reading recurse without end.
const MAX_DEPTH: usize = 128;

/// A JSON text read as a value: members by name (the last of repeated names, as `serde_json` keeps it), numbers as
/// their text, compared as RFC 8785 compares them.
#[derive(Debug, Clone)]
pub struct JsonValue(Node);

#[derive(Debug, Clone)]
enum Node {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Node>),
    Object(BTreeMap<String, Node>),
}

impl JsonValue {
    /// The value of `text`, or `None` if it is not one JSON value that `serde_json` could read.
    pub fn parse(text: &str) -> Option<JsonValue> {
        let mut reader = Reader {
            bytes: text.as_bytes(),
            text,
            at: 0,
        };
        let node = reader.value(0)?;
        reader.spaces();
        (reader.at == reader.bytes.len()).then_some(JsonValue(node))
    }
}

impl PartialEq for JsonValue {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Node::Null, Node::Null) => true,
            (Node::Bool(a), Node::Bool(b)) => a == b,
            (Node::Number(a), Node::Number(b)) => same_number(a, b),
            (Node::String(a), Node::String(b)) => a == b,
            (Node::Array(a), Node::Array(b)) => a == b,
            (Node::Object(a), Node::Object(b)) => a == b,
            _ => false,
        }
    }
}

/// Two numbers' texts, equal as RFC 8785 compares numbers (as doubles) where both are within 2^53 in magnitude, and
/// by their exact decimal values where either is beyond it (§14: a double cannot tell such numbers apart).
fn same_number(a: &str, b: &str) -> bool {
    if passes_2_53(a) || passes_2_53(b) {
        return Decimal::of(a) == Decimal::of(b);
    }
    // Within 2^53 a text always reads as a finite double (Rust's reading rounds correctly, as RFC 8785 asks);
    // `-0` equals `0`, which RFC 8785 writes alike.
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Whether two JSON texts are equal as JSON values ([`JsonValue`]); a text that is not one equals only itself.
pub fn same_json(a: &str, b: &str) -> bool {
    match (JsonValue::parse(a), JsonValue::parse(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// A reader over a text, by byte: JSON's structure is ASCII, and strings are handed whole to `serde_json`.
struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn spaces(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Takes `byte` after spaces, if it is next.
    fn take(&mut self, byte: u8) -> bool {
        self.spaces();
        let found = self.bytes.get(self.at) == Some(&byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn word(&mut self, word: &str, node: Node) -> Option<Node> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end) == Some(word.as_bytes())).then(|| {
            self.at = end;
            node
        })
    }

    fn value(&mut self, depth: usize) -> Option<Node> {
        self.spaces();
        match self.bytes.get(self.at)? {
            b'n' => self.word("null", Node::Null),
            b't' => self.word("true", Node::Bool(true)),
            b'f' => self.word("false", Node::Bool(false)),
            b'"' => self.string().map(Node::String),
            b'-' | b'0'..=b'9' => self.number().map(Node::Number),
            b'[' if depth < MAX_DEPTH => {
                self.at += 1;
                let mut items = Vec::new();
                if !self.take(b']') {
                    loop {
                        items.push(self.value(depth + 1)?);
                        if self.take(b']') {
                            break;
                        }
                        if !self.take(b',') {
                            return None;
                        }
                    }
                }
                Some(Node::Array(items))
            }
            b'{' if depth < MAX_DEPTH => {
                self.at += 1;
                let mut members = BTreeMap::new();
                if !self.take(b'}') {
                    loop {
                        self.spaces();
                        let name = self.string()?;
                        if !self.take(b':') {
                            return None;
                        }
                        // The last of repeated names, as `serde_json`'s map keeps it.
                        members.insert(name, self.value(depth + 1)?);
                        if self.take(b'}') {
                            break;
                        }
                        if !self.take(b',') {
                            return None;
                        }
                    }
                }
                Some(Node::Object(members))
            }
            _ => None,
        }
    }

    /// A string at the reader, decoded by `serde_json` (escapes, and the refusal of a lone surrogate).
    fn string(&mut self) -> Option<String> {
        if self.bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        let start = self.at;
        let mut at = start + 1;
        loop {
            match self.bytes.get(at)? {
                b'\\' => at += 2,
                b'"' => break,
                _ => at += 1,
            }
        }
        self.at = at + 1;
        serde_json::from_str(self.text.get(start..self.at)?).ok()
    }

    /// A number at the reader, as its text, held to JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<String> {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        let number = &self.text[start..self.at];
        // `serde_json` refuses a number past a double's range (`1e400`); so does this, or the two would disagree on
        // which texts are values.
        number
            .parse::<f64>()
            .is_ok_and(f64::is_finite)
            .then(|| number.to_owned())
    }

    fn digits(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_written_another_way_is_the_same_number() {
        for (a, b) in [
            ("42", "42.0"),
            ("42", "4.2e1"),
            ("42", "420E-1"),
            ("0", "-0"),
            ("0.1", "1e-1"),
            ("-1.5", "-15e-1"),
            ("9007199254740992", "9.007199254740992e15"),
        ] {
            assert!(same_json(a, b), "{a} and {b}");
        }
    }

    #[test]
    fn numbers_past_2_53_compare_by_their_exact_digits() {
        assert!(!same_json(
            "123456789012345678901234",
            "123456789012345678901235"
        ));
        assert!(!same_json("9007199254740993", "9007199254740992"));
        assert!(!same_json("18446744073709551617", "18446744073709551616"));
        assert!(same_json(
            "123456789012345678901234",
            "1.23456789012345678901234e23"
        ));
        assert!(same_json("-9007199254740993.0", "-9007199254740993"));
    }

    #[test]
    fn objects_are_equal_whatever_their_member_order_spacing_and_escapes() {
        assert!(same_json(
            r#"{"a": [1, {"b": "x"}], "c": null}"#,
            "{ \"c\" : null , \"a\" : [ 1.0 , { \"\\u0062\" : \"x\" } ] }"
        ));
        assert!(!same_json(r#"{"a": 1}"#, r#"{"a": 1, "b": 2}"#));
        assert!(!same_json(r#"[1, 2]"#, r#"[2, 1]"#));
        assert!(!same_json(r#"{"a": "1"}"#, r#"{"a": 1}"#));
        assert!(!same_json("true", "1"));
        // The last of repeated names, as `serde_json` keeps it.
        assert!(same_json(r#"{"a": 1, "a": 2}"#, r#"{"a": 2}"#));
    }

    #[test]
    fn a_text_that_is_not_json_equals_only_itself() {
        for text in [
            "not json",
            "{",
            r#"{"a": 1} x"#,
            "01",
            "1.",
            "-",
            "1e400",
            r#""\ud800""#,
            "[1,]",
        ] {
            assert!(JsonValue::parse(text).is_none(), "{text}");
            assert!(same_json(text, text), "{text}");
        }
        assert!(!same_json("not json", "not  json"));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(JsonValue::parse(&deep).is_none());
        let fits = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(JsonValue::parse(&fits).is_some());
    }
}
