//! A deadline for each request's body: `BODY_READ_TIMEOUT_MS` from when its header arrived.
//!
//! A client that sends its body a byte at a time would otherwise hold its handler until the request timeout
//! answered 503, the service's fault, logged at ERROR. A body not read in time is the client's fault: 408, logged
//! as any 4xx, and the connection closed, since the rest of the body was never read. The body is not buffered
//! here: only a handler that has authenticated the caller reads it, so a stranger cannot make the service hold
//! bodies in memory.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

use super::error::ApiError;

/// Serves the request (with `serve`) with its body under the deadline; answers 408 if the deadline cut the body
/// short, whatever `serve` answered.
pub async fn read_within_timeout<F, Fut>(timeout: Duration, request: Request, serve: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let timed_out = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&timed_out);
    let request = request.map(|body| {
        // Most reads carry no body: nothing to wait for.
        if body.size_hint().exact() == Some(0) {
            body
        } else {
            Body::new(DeadlineBody {
                inner: body,
                deadline: Box::pin(tokio::time::sleep(timeout)),
                timed_out: flag,
            })
        }
    });
    let response = serve(request).await;
    if !timed_out.load(Ordering::Acquire) {
        return response;
    }
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "body_timeout",
        "the body did not arrive within BODY_READ_TIMEOUT_MS",
    )
    .into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A body that fails once its deadline has passed, and says so in `timed_out`.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    timed_out: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within BODY_READ_TIMEOUT_MS")]
struct BodyTimedOut;

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
