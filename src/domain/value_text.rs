//! A JSON text read scalar by scalar, never into a tree: checked to be a value `serde_json` can hold ([`check`]), or
//! written in the one form `serde_json` writes for its parsed `Value` ([`canonical`]): keys sorted, the last of
//! duplicate keys kept, no spaces, numbers and strings as `serde_json` writes them.
//!
//! A body's hash is of that form (`http::format_members::RawMember`), and it must stay byte for byte what it was when
//! the text was parsed into a `Value` and written again: stored registration hashes are compared with it. Reading
//! the text instead of building the tree costs a fraction of the memory and time on a transcript or worker state of
//! megabytes (a dense array of numbers took a 32-byte `Value` per element). The tests hold the two forms equal.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Refuses a text `serde_json` cannot read into a value: not JSON, a number beyond a double, an escaped lone
/// surrogate, deeper than its recursion limit.
pub fn check(text: &str) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Checked.deserialize(&mut deserializer)?;
    deserializer.end()
}

/// The text as `serde_json::to_vec(&serde_json::from_str::<Value>(text)?)` writes it, without the `Value`.
pub fn canonical(text: &str) -> Result<String, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let mut out = Vec::with_capacity(text.len());
    Canonical(&mut out).deserialize(&mut deserializer)?;
    deserializer.end()?;
    // Only `serde_json`'s own writing and the punctuation below went in.
    String::from_utf8(out).map_err(|error| de::Error::custom(error.to_string()))
}

/// Reads every scalar of a value (so that a number or string `serde_json` cannot hold is an error) and keeps none.
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Checked)?.is_some() {
            map.next_value_seed(Checked)?;
        }
        Ok(())
    }
}

/// Whether serde_json writes this string as it is, between quotes: it holds no quote, no backslash and no control
/// character. The lent strings this is asked about hold none of them; the check keeps the canonical text right even
/// should a parser lend one that does. One pass without an early exit, which the compiler vectorizes.
fn needs_no_escape(text: &str) -> bool {
    !text.bytes().fold(false, |escaped, byte| {
        escaped | (byte < 0x20) | (byte == b'"') | (byte == b'\\')
    })
}

/// Writes a value in its canonical form at the end of the buffer.
struct Canonical<'a>(&'a mut Vec<u8>);

impl Canonical<'_> {
    /// A scalar as `serde_json` writes it: the same serializer a `Value` holding it would call.
    fn scalar<T: serde::Serialize + ?Sized, E: de::Error>(self, value: &T) -> Result<(), E> {
        serde_json::to_writer(self.0, value).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for Canonical<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Canonical<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<(), E> {
        self.scalar(&value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        self.scalar(&value)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        self.scalar(&value)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        // A `Value` holds a finite double as a number; JSON text gives no other (1e400 fails before this).
        self.scalar(&value)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        self.scalar(value)
    }

    /// serde_json lends a string only when its text holds no escape: no quote, no backslash, and (JSON allows none
    /// unescaped) no control character, so nothing in it is escaped when written, and it is copied between quotes
    /// as it is. Most of a large transcript's bytes are such strings, and this spares serde_json's escaping writer,
    /// which looks each byte up in a table.
    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<(), E> {
        if needs_no_escape(value) {
            self.0.reserve(value.len() + 2);
            self.0.push(b'"');
            self.0.extend_from_slice(value.as_bytes());
            self.0.push(b'"');
            Ok(())
        } else {
            self.scalar(value)
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let out = self.0;
        out.push(b'[');
        let mut first = true;
        loop {
            let before = out.len();
            if !first {
                out.push(b',');
            }
            if seq.next_element_seed(Canonical(&mut *out))?.is_none() {
                out.truncate(before);
                break;
            }
            first = false;
        }
        out.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let out = self.0;
        // Each value is written after the ones before it, then all are moved into place in the order of their keys.
        let start = out.len();
        let mut entries: Vec<(String, usize, usize)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let from = out.len();
            map.next_value_seed(Canonical(&mut *out))?;
            entries.push((key, from - start, out.len() - start));
        }
        // A `Value` keeps the last of duplicate keys (its map's insert replaces): reversed, a stable sort puts the
        // last one first among equals, and `dedup_by` keeps the first of each run.
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| later.0 == kept.0);
        let values = out.split_off(start);
        out.push(b'{');
        for (i, (key, from, to)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, key).map_err(de::Error::custom)?;
            out.push(b':');
            out.extend_from_slice(&values[*from..*to]);
        }
        out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn as_a_value_writes_it(text: &str) -> String {
        serde_json::to_string(&serde_json::from_str::<Value>(text).unwrap()).unwrap()
    }

    const TEXTS: &[&str] = &[
        "null",
        "true",
        " false ",
        "0",
        "-0",
        "-0.0",
        "1.50",
        "1e2",
        "1E+2",
        "-1.5e-7",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "123456789012345678901234",
        "9007199254740993.0",
        "0.1",
        "2.2250738585072014e-308",
        "5e-324",
        "1.7976931348623157e308",
        r#""plain""#,
        "\"lent whole: é ☃ \u{7f} / and spaces  \"",
        r#""\u00e9\/\b\f\n\r\t\"\\ \ud83d\ude00 é ☃ \u001f \u007f""#,
        r#"[]"#,
        r#"{}"#,
        r#"[1, [2, [3, {}]], {"a": []}]"#,
        r#"{"b": 1, "a": 2, "c": {"z": null, "y": [true, false]}}"#,
        r#"{"a": 1, "b": 2, "a": 3}"#,
        r#"{"a": {"x": 1}, "a": [1], "a": "last"}"#,
        r#"{"é": 1, "e": 2, "\u00e9": 3, "Z": 4, "": 5, "\n": 6}"#,
        r#"[{"role": "user", "content": [{"type": "text", "text": "Hi"}]}, {"role": "assistant", "content": null}]"#,
    ];

    #[test]
    fn only_a_string_without_quote_backslash_or_control_character_is_copied_as_it_is() {
        assert!(needs_no_escape("é ☃ \u{7f} / plain"));
        assert!(needs_no_escape(""));
        for escaped in ["a\"b", "a\\b", "a\nb", "\u{0}", "\u{1f}"] {
            assert!(!needs_no_escape(escaped), "{escaped:?}");
        }
    }

    #[test]
    fn the_canonical_text_is_what_a_parsed_value_writes() {
        for text in TEXTS {
            assert_eq!(
                canonical(text).unwrap(),
                as_a_value_writes_it(text),
                "{text}"
            );
        }
    }

    #[test]
    fn the_canonical_text_of_a_large_mixed_document_is_what_a_parsed_value_writes() {
        // Every text above, nested in arrays and objects several ways, and numbers of every kind side by side.
        let mut parts: Vec<String> = TEXTS.iter().map(|text| (*text).to_owned()).collect();
        parts.push(format!(
            "[{}]",
            (0..2000)
                .map(|i| format!("{}", i * 7919 % 1000 - 500))
                .collect::<Vec<_>>()
                .join(",")
        ));
        parts.push(format!(
            "{{{}}}",
            (0..500)
                .map(|i| format!(r#""k{}": {}.{}"#, i * 31 % 97, i, i % 7))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let array = format!("[{}]", parts.join(", "));
        let object = format!(
            "{{{}}}",
            parts
                .iter()
                .enumerate()
                .map(|(i, part)| format!(r#""m{}": {part}"#, i * 13 % 17))
                .collect::<Vec<_>>()
                .join(",")
        );
        for text in [array, object] {
            assert_eq!(canonical(&text).unwrap(), as_a_value_writes_it(&text));
        }
    }

    #[test]
    fn what_a_value_cannot_hold_is_refused_by_both() {
        for text in [
            "1e400",
            "-1e400",
            r#""\ud800""#,
            r#"["\udc00"]"#,
            r#"{"a": 1e999}"#,
            "[1,]",
            "[1] 2",
            "",
            &format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ] {
            assert!(
                serde_json::from_str::<Value>(text).is_err(),
                "{text} is held"
            );
            assert!(check(text).is_err(), "{text} passed the check");
            assert!(canonical(text).is_err(), "{text} was written");
        }
    }

    #[test]
    fn what_a_value_holds_passes_the_check() {
        for text in TEXTS {
            assert!(check(text).is_ok(), "{text}");
        }
    }
}
