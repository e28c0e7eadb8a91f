//! The feed's cursor: an opaque text naming a position in a tenant's events (`storage::events::Position`).
//!
//! Opaque so that its form may change: clients pass back what they were given. It is not a secret (it names no
//! event of another tenant, and a tenant only ever reads its own events whatever cursor it sends).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::storage::events::Position;

/// The version prefix of the text inside, so a later form can be told apart.
const VERSION: &str = "v1";

/// The cursor text of a position.
pub fn encode(position: Position) -> String {
    URL_SAFE_NO_PAD.encode(format!("{VERSION}.{}.{}", position.xid, position.id))
}

/// The position a cursor text names; `None` when it is not one this service gave out.
pub fn decode(text: &str) -> Option<Position> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let inner = String::from_utf8(bytes).ok()?;
    let mut parts = inner.split('.');
    if parts.next()? != VERSION {
        return None;
    }
    let xid = parts.next()?.parse().ok()?;
    let id = parts.next()?.parse().ok()?;
    if parts.next().is_some() || id < 0 {
        return None;
    }
    Some(Position { xid, id })
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
                xid: u64::MAX,
                id: i64::MAX,
            },
        ] {
            assert_eq!(decode(&encode(position)), Some(position));
        }
    }

    #[test]
    fn a_text_the_service_never_gave_out_is_no_cursor() {
        for text in [
            "",
            "abc",
            "djEuMS4y!",
            &URL_SAFE_NO_PAD.encode("v2.1.2"),
            &URL_SAFE_NO_PAD.encode("v1.1"),
            &URL_SAFE_NO_PAD.encode("v1.1.-2"),
            &URL_SAFE_NO_PAD.encode("v1.1.2.3"),
        ] {
            assert_eq!(decode(text), None, "{text:?}");
        }
    }
}
