//! A JSON answer sent as pieces of text that are already JSON, one after another, instead of one buffer: a
//! decision's answer and a model input splice the stored transcript in this way (domain::model_input::render_text),
//! so the largest part of the answer is never copied, and memory per request is bounded by what is in flight.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;

/// Pieces of one JSON document, in order; their concatenation is the document.
#[derive(Debug, Clone, Default)]
pub struct JsonPieces(pub Vec<Bytes>);

impl JsonPieces {
    /// The object `head` with one more member, `name`, whose value is `value`'s pieces: `head` is serialized
    /// without its closing brace, and the member follows it. The member is last, as `#[derive(Serialize)]` would
    /// have written a field declared last.
    pub fn object_with(
        head: &impl Serialize,
        name: &str,
        value: Vec<Bytes>,
    ) -> Result<Self, serde_json::Error> {
        let mut first = serde_json::to_vec(head)?;
        if first.pop() != Some(b'}') {
            return Err(serde::ser::Error::custom("the head is not a JSON object"));
        }
        if first.len() > 1 {
            first.push(b',');
        }
        serde_json::to_writer(&mut first, name)?;
        first.push(b':');
        let mut pieces = Vec::with_capacity(value.len() + 2);
        pieces.push(Bytes::from(first));
        pieces.extend(value);
        pieces.push(Bytes::from_static(b"}"));
        Ok(JsonPieces(pieces))
    }

    /// The document's length in bytes.
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl IntoResponse for JsonPieces {
    fn into_response(self) -> Response {
        // The length is known, so it is sent (a client sees a whole answer or a short one, never a chunked guess).
        let length = HeaderValue::from(self.len());
        let pieces = self.0.into_iter().filter(|piece| !piece.is_empty());
        let body = Body::from_stream(futures_util::stream::iter(pieces.map(Ok::<_, Infallible>)));
        let mut response = Response::new(body);
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CONTENT_LENGTH, length);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[derive(Serialize)]
    struct Head {
        id: u32,
        name: &'static str,
    }

    #[test]
    fn an_object_with_a_spliced_member_is_the_object_serialized_whole() {
        let pieces = JsonPieces::object_with(
            &Head { id: 7, name: "x" },
            "rest",
            vec![Bytes::from_static(b"[1,"), Bytes::from_static(b"2]")],
        )
        .unwrap();
        let text = pieces.0.concat();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            r#"{"id":7,"name":"x","rest":[1,2]}"#
        );
        assert_eq!(pieces.len(), r#"{"id":7,"name":"x","rest":[1,2]}"#.len());
    }

    #[test]
    fn a_member_after_an_empty_head_needs_no_comma() {
        #[derive(Serialize)]
        struct Empty {}
        let pieces =
            JsonPieces::object_with(&Empty {}, "a", vec![Bytes::from_static(b"1")]).unwrap();
        let value: Value = serde_json::from_slice(&pieces.0.concat()).unwrap();
        assert_eq!(value, json!({"a": 1}));
    }

    #[test]
    fn a_head_that_is_not_an_object_is_refused() {
        assert!(JsonPieces::object_with(&[1, 2], "a", vec![]).is_err());
    }
}
