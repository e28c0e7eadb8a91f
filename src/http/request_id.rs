//! The form of an `x-request-id` a client may choose: at most [`MAX_LEN`] characters of `A-Z a-z 0-9 . _ : -`.
//!
//! The id is logged on every line of its request and echoed in the answer and its problem body, so a client's own
//! id is kept only in that short, safe form; any other (too long, other characters, or sent more than once) is
//! dropped before tower-http's `SetRequestIdLayer`, which then makes a new one. A UUID, a ULID or a W3C trace id
//! fits. The check is a byte scan of at most 64 bytes, run on every request.

use axum::extract::Request;
use axum::http::HeaderName;

/// The longest request id a client may choose.
pub const MAX_LEN: usize = 64;

const HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Whether a client's request id is of the form the service keeps.
pub fn is_acceptable(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// The request, without its `x-request-id` unless it is exactly one id of the acceptable form.
pub fn keep_if_acceptable(mut request: Request) -> Request {
    let headers = request.headers_mut();
    let mut ids = headers.get_all(&HEADER).iter();
    let keep = match (ids.next(), ids.next()) {
        (None, _) => return request,
        (Some(id), None) => is_acceptable(id.as_bytes()),
        (Some(_), Some(_)) => false,
    };
    if !keep {
        headers.remove(&HEADER);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_of_safe_characters_are_kept_and_any_other_is_not() {
        for kept in [
            "cfa53145-71af-4148-869e-88fb6823bff6",
            "01HZX3K7Q9T2V5W8Y0A1B2C3D4",
            "trace:00f067aa0ba902b7.1",
            "a",
            &"x".repeat(MAX_LEN),
        ] {
            assert!(is_acceptable(kept.as_bytes()), "{kept}");
        }
        for dropped in [
            "",
            &"x".repeat(MAX_LEN + 1),
            "has space",
            "new\nline",
            "quote\"",
            "{\"json\":1}",
            "é",
            "slash/",
        ] {
            assert!(!is_acceptable(dropped.as_bytes()), "{dropped:?}");
        }
    }

    #[test]
    fn an_id_sent_twice_is_dropped_even_when_each_is_acceptable() {
        let request = Request::builder()
            .header("x-request-id", "one")
            .header("x-request-id", "two")
            .body(axum::body::Body::empty())
            .unwrap();
        assert!(
            keep_if_acceptable(request)
                .headers()
                .get("x-request-id")
                .is_none()
        );
        let request = Request::builder()
            .header("x-request-id", "one")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(keep_if_acceptable(request).headers()["x-request-id"], "one");
    }
}
