//! The feed's cursor: a text naming a position in a tenant's events (`storage::outbox::Position`).
//!
//! Clients treat it as opaque and pass back what they were given; its form, `{xid}_{id}` in decimal, is stated in
//! openapi.yaml so that every text of that form is a cursor (one past the end simply reads nothing yet). It is not a
//! secret: a tenant only ever reads its own events, whatever cursor it sends.

use crate::storage::outbox::Position;

/// The cursor text of a position.
pub fn encode(position: Position) -> String {
    format!("{}_{}", position.xid, position.id)
}

/// The position a cursor text names; `None` when it is not of the cursor's form.
pub fn decode(text: &str) -> Option<Position> {
    let (xid, id) = text.split_once('_')?;
    let digits = |part: &str, most: usize| {
        !part.is_empty() && part.len() <= most && part.bytes().all(|b| b.is_ascii_digit())
    };
    // At most 19 and 18 digits: every such number fits a u64 and an i64, so the form alone decides.
    if !digits(xid, 19) || !digits(id, 18) {
        return None;
    }
    Some(Position {
        xid: xid.parse().ok()?,
        id: id.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_its_position() {
        for position in [
            Position::START,
            Position { xid: 731, id: 5 },
            Position {
                xid: 9_999_999_999_999_999_999,
                id: 999_999_999_999_999_999,
            },
        ] {
            assert_eq!(decode(&encode(position)), Some(position));
        }
    }

    #[test]
    fn a_text_not_of_the_cursor_s_form_is_no_cursor() {
        for text in [
            "",
            "abc",
            "1_",
            "_1",
            "1_2_3",
            "-1_2",
            "1_-2",
            "1.2",
            "+1_2",
            "12345678901234567890_1",
        ] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }
}
