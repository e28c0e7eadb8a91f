//! A request body charged to the budget as its bytes arrive (docs/design.md §17, `body_budget`).
//!
//! Nothing is charged for a body nobody reads, or for bytes a client declares and never sends: a declared length
//! holds nothing, so a client cannot hold the budget with unsent bodies. A body is read only by a handler that has
//! checked its caller's key (or, for a decision, a key this instance found live lately), so by the time its first
//! byte arrives its [`Payer`] is known: the bytes are charged to that client, within its cap of the share
//! (`body_ledger`). A small body is charged whole, by its declared length, in one take at its first byte: no work
//! per frame on the path of every decision. A large one, or one sent in chunks, is charged in steps of
//! [`STEP`] as its bytes arrive. A charge that does not fit within `body_budget::WAIT` fails the body; the request
//! is then answered 503 `too_many_body_bytes` (`app::within_bounds` looks at [`Held::refused`]). What is charged is
//! held until the handler ends ([`Held`]), since the parsed body lives as long as the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::HeaderValue;
use http_body::{Frame, SizeHint};

use super::body_ledger::{Charge, Ledger};
use crate::domain::limits::SMALL_BODY_BYTES;

/// How much more a large body is charged each time its bytes pass what it has been charged: a few takes per
/// megabyte, not one per frame.
pub const STEP: usize = SMALL_BODY_BYTES;

/// Who a request's body is charged to: the client its key or decision token belongs to, named by the extractor that
/// checked it; else (a decision whose key is checked with the run's read) the credential the request presents.
#[derive(Clone, Default)]
pub struct Payer {
    client: Arc<OnceLock<Arc<str>>>,
    credential: Option<HeaderValue>,
}

impl Payer {
    /// A payer known, until a key is checked, by the `Authorization` header the request carries.
    pub fn presenting(credential: Option<HeaderValue>) -> Self {
        Payer {
            client: Arc::default(),
            credential,
        }
    }

    /// Names the client the key or token was found to belong to; the first name given holds.
    pub fn is_client(&self, tenant: &str, client: &str) {
        self.client
            .get_or_init(|| Arc::from(format!("{tenant}\u{0}{client}")));
    }

    /// The name bodies are charged under: the client's when it is known, else the credential's.
    pub fn name(&self) -> Arc<str> {
        if let Some(client) = self.client.get() {
            return Arc::clone(client);
        }
        let credential = self.credential.as_ref().map(HeaderValue::as_bytes);
        Arc::from(format!(
            "\u{1}{}",
            String::from_utf8_lossy(credential.unwrap_or_default())
        ))
    }
}

/// What a request's body holds until its handler ends: its charge, and whether a charge was refused.
#[derive(Default)]
pub struct Held {
    charge: Mutex<Option<Charge>>,
    refused: AtomicBool,
}

impl Held {
    /// Whether the body failed because its bytes found no room in the budget within the wait.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }

    /// KiB the body holds now.
    pub fn kib(&self) -> usize {
        self.charge().as_ref().map_or(0, Charge::kib)
    }

    fn add(&self, charge: Charge) {
        match &mut *self.charge() {
            Some(held) => held.absorb(charge),
            empty => *empty = Some(charge),
        }
    }

    fn charge(&self) -> std::sync::MutexGuard<'_, Option<Charge>> {
        // The lock guards one assignment; a panic cannot leave it half-written.
        self.charge
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A body charged to `ledger` as it arrives.
pub struct ChargedBody {
    inner: Body,
    ledger: Arc<Ledger>,
    payer: Payer,
    /// Most bytes the body is charged: its declared length, or its route's limit when sent in chunks.
    most: usize,
    /// A small body is charged `most` at its first byte, in one take.
    whole_at_first_byte: bool,
    arrived: usize,
    charged: usize,
    held: Arc<Held>,
    /// A take that did not fit at once, and the frame that waits for it.
    waiting: Option<(Take, Frame<Bytes>)>,
}

/// A take of the ledger waited for (`Ledger::take`): the charge, or `None` if it found no room in time.
type Take = Pin<Box<dyn Future<Output = Option<Charge>> + Send>>;

#[derive(Debug, thiserror::Error)]
#[error("the bodies being read take MAX_BODY_BYTES_IN_FLIGHT")]
struct NoRoom;

impl ChargedBody {
    /// `inner`, charged to `ledger` and `payer` as it arrives, up to `most` bytes, holding its charge in `held`.
    pub fn new(
        inner: Body,
        ledger: Arc<Ledger>,
        payer: Payer,
        most: usize,
        held: Arc<Held>,
    ) -> Self {
        let whole_at_first_byte = inner.size_hint().exact().is_some() && most <= SMALL_BODY_BYTES;
        ChargedBody {
            inner,
            ledger,
            payer,
            most,
            whole_at_first_byte,
            arrived: 0,
            charged: 0,
            held,
            waiting: None,
        }
    }

    /// The bytes to charge now that `arrived` have arrived: none while they are covered; all of a small body at its
    /// first byte; else at least what arrived past the charge, at least a [`STEP`], never past `most`.
    fn due(&self) -> usize {
        if self.arrived <= self.charged || self.charged >= self.most {
            return 0;
        }
        let step = if self.whole_at_first_byte {
            self.most
        } else {
            (self.arrived - self.charged).max(STEP)
        };
        step.min(self.most - self.charged)
    }
}

impl HttpBody for ChargedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Some((mut take, frame)) = this.waiting.take() {
            return match take.as_mut().poll(cx) {
                Poll::Ready(taken) => Poll::Ready(Some(this.charged_for(taken, frame))),
                Poll::Pending => {
                    this.waiting = Some((take, frame));
                    Poll::Pending
                }
            };
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        this.arrived += frame.data_ref().map_or(0, Bytes::len);
        let due = this.due();
        if due == 0 {
            return Poll::Ready(Some(Ok(frame)));
        }
        let payer = this.payer.name();
        let kib = due.div_ceil(1024);
        if let Some(charge) = this.ledger.try_take(&payer, kib) {
            this.charged += due;
            this.held.add(charge);
            return Poll::Ready(Some(Ok(frame)));
        }
        // The share, or the payer's cap, is full: wait for bytes given back, with the frame kept until then.
        let mut take = Box::pin(Arc::clone(&this.ledger).take(payer, kib));
        match take.as_mut().poll(cx) {
            Poll::Ready(taken) => {
                this.charged += due;
                Poll::Ready(Some(this.charged_for(taken, frame)))
            }
            Poll::Pending => {
                this.charged += due;
                this.waiting = Some((take, frame));
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.waiting.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl ChargedBody {
    /// `frame`, now that its take ended: passed on if it was charged, else the body fails, refused.
    fn charged_for(
        &mut self,
        taken: Option<Charge>,
        frame: Frame<Bytes>,
    ) -> Result<Frame<Bytes>, axum::Error> {
        match taken {
            Some(charge) => {
                self.held.add(charge);
                Ok(frame)
            }
            None => {
                self.held.refused.store(true, Ordering::Release);
                Err(axum::Error::new(NoRoom))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use futures::channel::mpsc;
    use http_body_util::BodyExt;

    use super::*;

    /// A body sent in chunks, whose chunks the test sends.
    fn chunked() -> (mpsc::UnboundedSender<Bytes>, Body) {
        let (sender, chunks) = mpsc::unbounded();
        (
            sender,
            Body::from_stream(chunks.map(Ok::<_, std::io::Error>)),
        )
    }

    fn payer() -> Payer {
        let payer = Payer::presenting(None);
        payer.is_client("t", "c");
        payer
    }

    #[tokio::test]
    async fn a_body_never_sent_is_charged_nothing() {
        let ledger = Ledger::new(1024, 1024);
        let held = Arc::new(Held::default());
        let (_sender, unsent) = chunked();
        let body = ChargedBody::new(
            unsent,
            Arc::clone(&ledger),
            payer(),
            200_000,
            Arc::clone(&held),
        );
        drop(body);
        assert_eq!((ledger.free(), held.kib()), (1024, 0));
    }

    #[tokio::test]
    async fn a_small_body_is_charged_whole_at_its_first_byte_and_held_after_it_is_read() {
        let ledger = Ledger::new(1024, 1024);
        let held = Arc::new(Held::default());
        let body = ChargedBody::new(
            Body::from(vec![b'x'; 10_000]),
            Arc::clone(&ledger),
            payer(),
            10_000,
            Arc::clone(&held),
        );
        let read = body.collect().await.expect("read").to_bytes();
        assert_eq!(read.len(), 10_000);
        assert_eq!(held.kib(), 10, "charged whole, held past the read");
        assert_eq!(ledger.held_by("t\u{0}c"), 10);
        drop(held);
        assert_eq!(ledger.free(), 1024);
    }

    #[tokio::test]
    async fn a_large_body_is_charged_in_steps_as_it_arrives() {
        let ledger = Ledger::new(4096, 4096);
        let held = Arc::new(Held::default());
        let (sender, body) = chunked();
        let mut body = ChargedBody::new(
            body,
            Arc::clone(&ledger),
            payer(),
            3 << 20,
            Arc::clone(&held),
        );
        sender
            .unbounded_send(Bytes::from(vec![b'x'; 1000]))
            .expect("sent");
        body.frame().await.expect("a frame").expect("charged");
        assert_eq!(held.kib(), STEP / 1024, "one step for its first bytes");
        sender
            .unbounded_send(Bytes::from(vec![b'x'; STEP]))
            .expect("sent");
        body.frame().await.expect("a frame").expect("charged");
        assert_eq!(held.kib(), 2 * STEP / 1024);
    }

    #[tokio::test]
    async fn a_body_whose_bytes_find_no_room_within_the_wait_fails_refused() {
        let ledger = Ledger::new(100, 100);
        let _taken = ledger.try_take(&Arc::from("other"), 95).expect("fits");
        let held = Arc::new(Held::default());
        let body = ChargedBody::new(
            Body::from(vec![b'x'; 10_000]),
            Arc::clone(&ledger),
            payer(),
            10_000,
            Arc::clone(&held),
        );
        assert!(body.collect().await.is_err());
        assert!(held.refused());
        assert_eq!(ledger.free(), 5);
    }
}
