//! The bytes of request bodies in flight, bounded by MAX_BODY_BYTES_IN_FLIGHT (docs/design.md §17).
//!
//! A request is let in without waiting: its declared length holds nothing. A route that takes no body (a `GET`,
//! `HEAD`, `DELETE` or `OPTIONS`) refuses one at once, 413, unread, so that a client cannot hold a feed slot, or a
//! connection, with a body it never sends; a declared length over its route's limit is refused 413 at once too. Any
//! other body is charged as its bytes arrive (`charged_body`): a small one whole at its first byte, a large one in
//! steps, to the client whose key or token was checked before the body was read, within that client's cap. Bodies
//! up to `SMALL_BODY_BYTES` (by their declared length) are charged to a quarter of the budget kept for them, larger
//! ones and ones sent in chunks to the rest, so that large bodies never hold up a decision. One client may hold at
//! most half of each share (never less than one body of the largest size that share takes), so one tenant never
//! takes what the others need. Bytes that find no room within [`WAIT`] fail the body; the request is answered 503
//! `too_many_body_bytes` with `Retry-After`, the connection closed. What is charged is held until the handler ends,
//! since the parsed body lives as long as the handler (a body of n bytes costs a few times n while it is parsed).
//!
//! A large body's handler runs on the runtime until its body has arrived, then on a thread of its own at the lowest
//! CPU priority ([`Admitted::spawn`], `large_body_threads`): parsing, hashing and checking megabytes of JSON hold a
//! CPU for hundreds of milliseconds, which would otherwise hold up every small request waiting for the cores. An
//! arrived body takes a place among the LARGE_BODIES_AT_ONCE parsed and handled at once (by default one fewer than
//! the cores, which leaves a core for the small requests and for Postgres), waiting up to [`WAIT`] for one, then
//! answered 503 `too_many_body_bytes`; it gives the place back once its turn is committed
//! ([`PlaceAfterArrival::give_back`]), before any executor runs. A client sending its body slowly holds the bytes it
//! sent, never a place or a thread.
//!
//! Charged at read time, a body is charged to a client known: no handler reads a body before its key is checked
//! (a decision's, only for a key this instance found live lately, charged to that key until its client is named).
//! A stranger's body is refused with its key, never read, so it is never charged.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, HttpBody};
use axum::extract::{FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONNECTION};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::body_ledger::Ledger;
use super::charged_body::{ChargedBody, Held, Payer};
use super::error::ApiError;
use super::large_body_threads;
use crate::domain::limits::{SMALL_BODY_BYTES, large_body_share};
use crate::state::Limits;

pub use super::body_ledger::WAIT;

/// The bytes of bodies in flight, in KiB: one share for small bodies, one for the rest, each counted per client;
/// and the large bodies handled at once.
#[derive(Clone)]
pub struct BodyBudget {
    small: Arc<Ledger>,
    large: Arc<Ledger>,
    /// The places of LARGE_BODIES_AT_ONCE.
    large_at_once: Arc<Semaphore>,
}

/// A request let in, holding what its body is charged until it is dropped.
pub enum Admitted {
    /// No body: nothing to charge.
    Bodiless,
    Small(Arc<Held>),
    /// Its bytes, and where it takes its place among the large bodies handled at once once it has arrived.
    Large(Arc<Held>, PlaceAfterArrival),
}

/// A large body's place among the LARGE_BODIES_AT_ONCE handled at once, taken once the body has arrived
/// (`extract::json_text`, through the request's extensions) and held until its turn is committed or its handler
/// ends: a body still arriving holds no place, so a client that sends slowly keeps no other body out.
#[derive(Clone)]
pub struct PlaceAfterArrival {
    places: Arc<Semaphore>,
    /// Every clone shares it; the place is given back when the last clone is dropped (the handler's end), or
    /// earlier by [`PlaceAfterArrival::give_back`].
    held: Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>,
    /// Set once the place is taken: the handler then moves to a thread at the lowest priority
    /// (`large_body_threads::run`).
    arrived: Arc<AtomicBool>,
}

impl PlaceAfterArrival {
    /// Takes a place, waiting up to [`WAIT`] for one; then 503 `too_many_body_bytes`. Taking it twice takes one.
    /// Once it is taken, the handler yields, so that it is moved to its low-priority thread before it parses.
    pub async fn take(&self) -> Result<(), ApiError> {
        if self.arrived.load(Ordering::Acquire) {
            return Ok(());
        }
        let place = tokio::time::timeout(WAIT, Arc::clone(&self.places).acquire_owned()).await;
        match place {
            Ok(Ok(place)) => {
                *self.held() = Some(place);
                self.arrived.store(true, Ordering::Release);
                tokio::task::yield_now().await;
                Ok(())
            }
            // Never closed; a closed set of places admits nobody, as a full one does.
            Ok(Err(_)) | Err(_) => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_body_bytes",
                "LARGE_BODIES_AT_ONCE bodies over 256 KiB are being handled; retry after the time in Retry-After",
            )),
        }
    }

    /// Gives the place back before the handler ends: once its body is parsed and its turn committed, what is left
    /// (running the calls remembered decisions approved, answering) parses nothing, and may take minutes.
    pub fn give_back(&self) {
        self.held().take();
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        // The lock guards one assignment; a panic cannot leave the option half-written.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A handler's large-body place, if its request has one: for giving it back once the turn is committed.
pub struct LargeBodyPlace(pub Option<PlaceAfterArrival>);

impl LargeBodyPlace {
    /// Gives the place back, if there is one ([`PlaceAfterArrival::give_back`]).
    pub fn give_back(&self) {
        if let Some(place) = &self.0 {
            place.give_back();
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for LargeBodyPlace {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(LargeBodyPlace(
            parts.extensions.get::<PlaceAfterArrival>().cloned(),
        ))
    }
}

impl BodyBudget {
    /// The budget of `limits` (MAX_BODY_BYTES_IN_FLIGHT, or its default), split into its two shares, each with its
    /// cap per client.
    pub fn new(limits: &Limits) -> Self {
        let total = limits.body_bytes_in_flight();
        let large = large_body_share(total);
        let share = |bytes: usize, largest: usize| {
            // Half the share, so that another client always finds the other half; never less than the largest body
            // the share takes, so that a client can send one.
            Ledger::new(kib(bytes), (kib(bytes) / 2).max(kib(largest)))
        };
        BodyBudget {
            small: share(total - large, SMALL_BODY_BYTES),
            large: share(large, limits.largest_body()),
            large_at_once: Arc::new(Semaphore::new(
                limits.large_bodies_at_once().min(Semaphore::MAX_PERMITS),
            )),
        }
    }

    /// Lets in `request`, on a route that reads bodies up to `route_limit` bytes (0: a route that takes none), and
    /// makes its body charged as it arrives. A body on a route that takes none, or declared over the limit, is
    /// refused 413 at once; the refusal is to close the connection ([`closing`]), since the body is left unread.
    pub fn admit(&self, request: &mut Request, route_limit: usize) -> Result<Admitted, ApiError> {
        let body = request.body();
        // Most requests carry no body: nothing to charge, nothing to wrap.
        if body.is_end_stream() {
            return Ok(Admitted::Bodiless);
        }
        if route_limit == 0 {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "this route takes no body; send none",
            ));
        }
        let size = body.size_hint();
        let declared = usize::try_from(size.lower()).unwrap_or(usize::MAX);
        if declared > route_limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than MAX_BODY_BYTES (on a registration or a new turn: MAX_BODY_BYTES plus \
                 MAX_WORKER_STATE_BYTES)",
            ));
        }
        let exact = size
            .exact()
            .map(|exact| usize::try_from(exact).unwrap_or(usize::MAX));
        let small = exact.is_some_and(|exact| exact <= SMALL_BODY_BYTES);
        // Sent in chunks, a body may be charged up to its route's limit.
        let most = exact.unwrap_or(route_limit).min(route_limit);
        let payer = Payer::presenting(request.headers().get(AUTHORIZATION).cloned());
        request.extensions_mut().insert(payer.clone());
        let held = Arc::new(Held::default());
        let ledger = if small { &self.small } else { &self.large };
        let body = std::mem::take(request.body_mut());
        *request.body_mut() = Body::new(ChargedBody::new(
            body,
            Arc::clone(ledger),
            payer,
            most,
            Arc::clone(&held),
        ));
        if small {
            return Ok(Admitted::Small(held));
        }
        let place = PlaceAfterArrival {
            places: Arc::clone(&self.large_at_once),
            held: Arc::default(),
            arrived: Arc::default(),
        };
        request.extensions_mut().insert(place.clone());
        Ok(Admitted::Large(held, place))
    }
}

impl Admitted {
    /// Where a large body takes its place once it has arrived; `None` for others.
    pub fn place_after_arrival(&self) -> Option<PlaceAfterArrival> {
        match self {
            Admitted::Large(_, place) => Some(place.clone()),
            Admitted::Bodiless | Admitted::Small(_) => None,
        }
    }

    /// What the body holds, to learn after the handler whether its bytes were refused room; `None` without a body.
    pub fn held(&self) -> Option<Arc<Held>> {
        match self {
            Admitted::Bodiless => None,
            Admitted::Small(held) | Admitted::Large(held, _) => Some(Arc::clone(held)),
        }
    }

    /// Runs a request's handler to completion in a task of its own, holding the body's charge until it ends: on the
    /// runtime's workers, and for a large body, once it has arrived and taken its place, on a thread of its own at
    /// the lowest CPU priority (`large_body_threads` says why). The handler's I/O is driven by the runtime either
    /// way. Dropping the returned future gives up only the wait for the answer.
    pub async fn spawn<F>(self, handler: F) -> Result<F::Output, String>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let spawned = match self {
            Admitted::Bodiless => tokio::spawn(handler),
            Admitted::Small(held) => tokio::spawn(async move {
                let output = handler.await;
                drop(held);
                output
            }),
            Admitted::Large(held, place) => {
                let arrived = Arc::clone(&place.arrived);
                return large_body_threads::run(handler, (held, place), arrived)
                    .await
                    .map_err(|unanswered| unanswered.to_string());
            }
        };
        spawned.await.map_err(|failed| failed.to_string())
    }
}

/// Bytes in KiB, rounded up: the ledgers count KiB.
fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

/// The refusal of a request whose body stays unread: the connection cannot carry another request after it.
pub fn closing(error: ApiError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::limits::WorkLimits;
    use std::time::Duration;

    fn budget(in_flight: usize) -> BodyBudget {
        budget_with_places(in_flight, None)
    }

    fn budget_with_places(in_flight: usize, large_at_once: Option<usize>) -> BodyBudget {
        BodyBudget::new(&limits(in_flight, large_at_once))
    }

    /// Bodies of 1 MiB with a worker state of 1 MiB: the largest body is 2 MiB.
    fn limits(in_flight: usize, large_at_once: Option<usize>) -> Limits {
        Limits {
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(15),
            work: WorkLimits::default(),
            body_bytes_in_flight: Some(in_flight),
            large_bodies_at_once: large_at_once,
        }
    }

    /// A POST whose body declares `size` bytes (`None`: sent in chunks) and sends none of them yet.
    fn declaring(size: Option<usize>) -> Request {
        let body = match size {
            Some(size) => Body::new(http_body_util::Full::new(axum::body::Bytes::from(vec![
                b' ';
                size
            ]))),
            None => {
                Body::from_stream(futures::stream::pending::<Result<Vec<u8>, std::io::Error>>())
            }
        };
        Request::post("/v1/runs").body(body).expect("a request")
    }

    #[test]
    fn bytes_are_counted_in_whole_kib_rounded_up() {
        assert_eq!(kib(0), 0);
        assert_eq!(kib(1), 1);
        assert_eq!(kib(1024), 1);
        assert_eq!(kib(1025), 2);
    }

    #[test]
    fn a_declared_size_over_the_route_s_limit_is_refused_413() {
        let refused = budget(4 << 20)
            .admit(&mut declaring(Some(1025)), 1024)
            .err()
            .expect("refused");
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(closing(refused).headers()[CONNECTION], "close");
    }

    #[test]
    fn a_body_on_a_route_that_takes_none_is_refused_413_and_no_body_is_bodiless() {
        let budget = budget(4 << 20);
        for size in [Some(1), None] {
            let refused = budget
                .admit(&mut declaring(size), 0)
                .err()
                .expect("refused");
            assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
        }
        let empty = budget.admit(&mut declaring(Some(0)), 0);
        assert!(matches!(empty, Ok(Admitted::Bodiless)));
    }

    #[test]
    fn a_declared_length_holds_nothing_until_its_bytes_arrive() {
        let budget = budget(4 << 20);
        let (small, large) = (budget.small.free(), budget.large.free());
        let admitted = [
            budget.admit(&mut declaring(Some(200)), 8 << 20),
            budget.admit(&mut declaring(Some(2 << 20)), 8 << 20),
            budget.admit(&mut declaring(None), 8 << 20),
        ];
        assert!(matches!(admitted[0], Ok(Admitted::Small(_))));
        assert!(matches!(admitted[1], Ok(Admitted::Large(..))));
        assert!(
            matches!(admitted[2], Ok(Admitted::Large(..))),
            "sent in chunks"
        );
        assert_eq!((budget.small.free(), budget.large.free()), (small, large));
    }

    #[test]
    fn one_client_may_hold_half_of_each_share_but_never_less_than_one_body_of_the_largest_size_it_takes()
     {
        // 8 MiB: a small share of 2 MiB (a client: 1 MiB), a large one of 6 MiB (a client: 3 MiB).
        let shares = budget(8 << 20);
        let client: Arc<str> = Arc::from("a client");
        let _small = shares
            .small
            .try_take(&client, 1024)
            .expect("half the share");
        assert!(shares.small.try_take(&client, 1).is_none());
        let _large = shares
            .large
            .try_take(&client, 3 * 1024)
            .expect("half the share");
        assert!(shares.large.try_take(&client, 1).is_none());
        // ⌈8/3⌉ MiB: a large share of 2 MiB, all of which one client may hold, to send a body of 2 MiB.
        let smallest = budget((8usize << 20).div_ceil(3));
        assert!(smallest.large.try_take(&client, 2 * 1024).is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_large_body_is_handled_at_sched_idle_once_it_has_its_place_and_a_small_one_on_the_runtime_s_workers()
     {
        use thread_priority::{
            NormalThreadSchedulePolicy, ThreadSchedulePolicy, thread_schedule_policy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        let budget = budget(64 << 20);
        let policy_seen = || thread_schedule_policy().expect("the policy is readable");

        let large = budget.admit(&mut declaring(Some(1 << 20)), 8 << 20);
        let large = large.expect("let in");
        let place = large.place_after_arrival().expect("a large body has one");
        let seen = large
            .spawn(async move {
                let before = policy_seen();
                place.take().await.expect("a place is free");
                (before, policy_seen())
            })
            .await;
        assert_eq!(seen.map(|(_, after)| after), Ok(idle));
        assert_eq!(
            budget.large_at_once.available_permits(),
            limits(64 << 20, None).large_bodies_at_once(),
            "its place is given back when its handler ends"
        );

        let small = budget.admit(&mut declaring(Some(200)), 8 << 20);
        let small = small.expect("let in");
        assert_ne!(small.spawn(async move { policy_seen() }).await, Ok(idle));
    }

    #[tokio::test]
    async fn an_arrived_large_body_waits_for_a_place_while_as_many_as_allowed_are_handled_then_is_refused_503()
     {
        let budget = budget_with_places(64 << 20, Some(1));
        let first = budget
            .admit(&mut declaring(Some(1 << 20)), 8 << 20)
            .expect("let in");
        let second = budget
            .admit(&mut declaring(Some(1 << 20)), 8 << 20)
            .expect("let in");
        let first_place = first.place_after_arrival().expect("a large body has one");
        first_place.take().await.expect("a place is free");
        first_place
            .take()
            .await
            .expect("taking it again takes the same place");

        let started = tokio::time::Instant::now();
        let refused = second
            .place_after_arrival()
            .expect("a large body has one")
            .take()
            .await
            .expect_err("the one place is held");
        assert!(started.elapsed() >= WAIT, "it waited for a place first");
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.code, "too_many_body_bytes");
        let answered = refused.into_response();
        assert!(answered.headers().contains_key("retry-after"));

        // Given back once the turn is committed, before the handler ends.
        first_place.give_back();
        let third = budget
            .admit(&mut declaring(Some(1 << 20)), 8 << 20)
            .expect("let in");
        third
            .place_after_arrival()
            .expect("a large body has one")
            .take()
            .await
            .expect("the place is free again");
        assert!(
            budget
                .admit(&mut declaring(Some(200)), 8 << 20)
                .expect("let in")
                .place_after_arrival()
                .is_none()
        );
    }
}
