//! The bytes of request bodies in flight, bounded by MAX_BODY_BYTES_IN_FLIGHT (docs/design.md §17).
//!
//! Every body is weighed before a byte of it is read: by its Content-Length, or, sent in chunks, by its route's limit,
//! all it may grow to. A body declared larger than that limit is refused 413 at once, unread. Any other takes its
//! weight from a semaphore, in KiB, and holds it until its handler has answered, since the parsed body lives as long
//! as the handler (a body of n bytes costs a few times n while it is parsed and checked). Bodies up to
//! `SMALL_BODY_BYTES` take theirs from a quarter of the budget kept for them, larger ones from the rest, so that
//! large bodies never hold up a decision. A request whose share is taken waits up to [`WAIT`], then is answered 503
//! `too_many_body_bytes` with `Retry-After`, its body still unread.
//!
//! A large body's handler runs on a thread of its own at the lowest CPU priority ([`Admitted::spawn`],
//! `large_body_threads`): parsing, hashing and checking megabytes of JSON hold a CPU for hundreds of milliseconds,
//! which would otherwise hold up every small request waiting for the cores. The bytes bound how many such threads
//! there are, and LARGE_BODIES_AT_ONCE how many of them parse and check at once (by default one fewer than the
//! cores, which leaves a core for the small requests and for Postgres). A large body takes its place only once it
//! has arrived ([`PlaceAfterArrival`]), waiting up to [`WAIT`] for one, then answered 503 `too_many_body_bytes`: a
//! client sending its body slowly, or in chunks, holds bytes while it does, never a place.
//!
//! The weighing comes before the key is checked, as the connection bound does: it reads nothing, and a stranger's
//! weight is held only until the key is refused, before the body is read.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::SizeHint;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;
use super::large_body_threads;
use crate::domain::limits::{SMALL_BODY_BYTES, large_body_share};
use crate::state::Limits;

/// How long a request waits for its share of the budget before it is answered 503: long enough for a large body
/// ahead of it to be handled, short enough that a client is told to come back rather than left hanging.
pub const WAIT: Duration = Duration::from_secs(1);

/// The bytes of bodies in flight, in KiB: one share for small bodies, one for the rest; and the large bodies handled
/// at once.
#[derive(Clone)]
pub struct BodyBudget {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    /// The places of LARGE_BODIES_AT_ONCE.
    large_at_once: Arc<Semaphore>,
}

/// A request let in, holding its body's weight until it is dropped.
pub enum Admitted {
    /// No body: nothing to weigh.
    Bodiless,
    Small(OwnedSemaphorePermit),
    /// Its bytes, and where it takes its place among the large bodies handled at once once it has arrived.
    Large(OwnedSemaphorePermit, PlaceAfterArrival),
}

/// A large body's place among the LARGE_BODIES_AT_ONCE handled at once, taken once the body has arrived
/// (`extract::json_text`, through the request's extensions) and held until its handler ends: a body still arriving
/// holds no place, so a client that sends slowly keeps no other body out.
#[derive(Clone)]
pub struct PlaceAfterArrival {
    places: Arc<Semaphore>,
    /// Every clone shares it; the place is given back when the last clone is dropped (the handler's end).
    held: Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>,
}

impl PlaceAfterArrival {
    /// Takes a place, waiting up to [`WAIT`] for one; then 503 `too_many_body_bytes`. Taking it twice takes one.
    pub async fn take(&self) -> Result<(), ApiError> {
        if self.held().is_some() {
            return Ok(());
        }
        let place = tokio::time::timeout(WAIT, Arc::clone(&self.places).acquire_owned()).await;
        match place {
            Ok(Ok(place)) => {
                *self.held() = Some(place);
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

    fn held(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        // The lock guards one assignment; a panic cannot leave the option half-written.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl BodyBudget {
    /// The budget of `limits` (MAX_BODY_BYTES_IN_FLIGHT, or its default), split into its two shares.
    pub fn new(limits: &Limits) -> Self {
        let total = limits.body_bytes_in_flight();
        let large = large_body_share(total);
        let permits = |bytes: usize| kib(bytes).min(Semaphore::MAX_PERMITS);
        BodyBudget {
            small: Arc::new(Semaphore::new(permits(total - large))),
            large: Arc::new(Semaphore::new(permits(large))),
            large_at_once: Arc::new(Semaphore::new(
                limits.large_bodies_at_once().min(Semaphore::MAX_PERMITS),
            )),
        }
    }

    /// Lets in a request whose body is declared as `size`, on a route that reads bodies up to `route_limit` bytes:
    /// 413 if the declared size is over the limit, 503 if its share stays taken for [`WAIT`]. Both refusals close
    /// the connection, since the body is left unread on it.
    pub async fn admit(&self, size: &SizeHint, route_limit: usize) -> Result<Admitted, Response> {
        let declared = usize::try_from(size.lower()).unwrap_or(usize::MAX);
        if declared > route_limit {
            return Err(closing(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "the body is larger than MAX_BODY_BYTES (on a registration or a new turn: MAX_BODY_BYTES plus \
                 MAX_WORKER_STATE_BYTES)",
            )));
        }
        // Sent in chunks, a body is weighed as all it may grow to.
        let weight = size.upper().map_or(route_limit, |upper| {
            usize::try_from(upper)
                .unwrap_or(usize::MAX)
                .min(route_limit)
        });
        if weight == 0 {
            return Ok(Admitted::Bodiless);
        }
        let permits = u32::try_from(kib(weight)).unwrap_or(u32::MAX);
        let admitted = tokio::time::timeout(WAIT, async {
            if weight <= SMALL_BODY_BYTES {
                let bytes = Arc::clone(&self.small).acquire_many_owned(permits).await?;
                return Ok(Admitted::Small(bytes));
            }
            let bytes = Arc::clone(&self.large).acquire_many_owned(permits).await?;
            let place = PlaceAfterArrival {
                places: Arc::clone(&self.large_at_once),
                held: Arc::default(),
            };
            Ok::<_, tokio::sync::AcquireError>(Admitted::Large(bytes, place))
        })
        .await;
        match admitted {
            Ok(Ok(admitted)) => Ok(admitted),
            // Never closed; a closed budget admits nobody, as a full one does.
            Ok(Err(_)) | Err(_) => Err(closing(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_body_bytes",
                "the bodies being read take MAX_BODY_BYTES_IN_FLIGHT; retry after the time in Retry-After",
            ))),
        }
    }
}

impl Admitted {
    /// Where a large body takes its place once it has arrived, for the request's extensions; `None` for others.
    pub fn place_after_arrival(&self) -> Option<PlaceAfterArrival> {
        match self {
            Admitted::Large(_, place) => Some(place.clone()),
            Admitted::Bodiless | Admitted::Small(_) => None,
        }
    }

    /// Runs a request's handler to completion in a task of its own, holding the body's weight until it ends: on
    /// the runtime's workers for a small body, on a thread of its own at the lowest CPU priority for a large one
    /// (`large_body_threads` says why). The handler's I/O is driven by the runtime either way. Dropping the returned
    /// future gives up only the wait for the answer.
    pub async fn spawn<F>(self, handler: F) -> Result<F::Output, String>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let spawned = match self {
            Admitted::Bodiless => tokio::spawn(handler),
            Admitted::Small(permit) => tokio::spawn(async move {
                let output = handler.await;
                drop(permit);
                output
            }),
            Admitted::Large(bytes, place) => {
                return large_body_threads::run(handler, (bytes, place))
                    .await
                    .map_err(|unanswered| unanswered.to_string());
            }
        };
        spawned.await.map_err(|failed| failed.to_string())
    }
}

/// Bytes in KiB, rounded up: the semaphores count KiB so that a single request's weight fits the `u32` that
/// `acquire_many` takes, whatever the body limits.
fn kib(bytes: usize) -> usize {
    bytes.div_ceil(1024)
}

/// The refusal of a request whose body stays unread: the connection cannot carry another request after it.
fn closing(error: ApiError) -> Response {
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

    fn budget(in_flight: usize) -> BodyBudget {
        budget_with_places(in_flight, None)
    }

    fn budget_with_places(in_flight: usize, large_at_once: Option<usize>) -> BodyBudget {
        BodyBudget::new(&Limits {
            max_body_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(15),
            work: WorkLimits::default(),
            body_bytes_in_flight: Some(in_flight),
            large_bodies_at_once: large_at_once,
        })
    }

    #[test]
    fn bytes_are_counted_in_whole_kib_rounded_up() {
        assert_eq!(kib(0), 0);
        assert_eq!(kib(1), 1);
        assert_eq!(kib(1024), 1);
        assert_eq!(kib(1025), 2);
    }

    #[tokio::test]
    async fn a_declared_size_over_the_route_s_limit_is_refused_413() {
        let refused = budget(4 << 20)
            .admit(&SizeHint::with_exact(1025), 1024)
            .await
            .err()
            .expect("refused");
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(refused.headers()[CONNECTION], "close");
    }

    #[tokio::test]
    async fn a_body_sent_in_chunks_weighs_its_route_s_limit() {
        let budget = budget(4 << 20);
        let chunked = budget.admit(&SizeHint::new(), 3 << 20).await;
        assert!(
            matches!(chunked, Ok(Admitted::Large(ref bytes, _)) if bytes.num_permits() == 3 * 1024)
        );
        assert_eq!(budget.large.available_permits(), 0);
    }

    #[tokio::test]
    async fn small_bodies_are_let_in_while_large_ones_hold_their_whole_share() {
        let budget = budget(4 << 20);
        let _held = budget.admit(&SizeHint::with_exact(3 << 20), 8 << 20).await;
        let small = budget.admit(&SizeHint::with_exact(200), 8 << 20).await;
        assert!(matches!(small, Ok(Admitted::Small(_))));
        let empty = budget.admit(&SizeHint::with_exact(0), 8 << 20).await;
        assert!(matches!(empty, Ok(Admitted::Bodiless)));
    }

    #[tokio::test]
    async fn a_body_whose_share_stays_taken_is_refused_503_after_the_wait() {
        let budget = budget(4 << 20);
        let held = budget.admit(&SizeHint::with_exact(2 << 20), 8 << 20).await;
        let refused = budget
            .admit(&SizeHint::with_exact(2 << 20), 8 << 20)
            .await
            .err()
            .expect("refused");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(refused.headers().contains_key("retry-after"));
        drop(held);
        let admitted = budget.admit(&SizeHint::with_exact(2 << 20), 8 << 20).await;
        assert!(matches!(admitted, Ok(Admitted::Large(..))));
    }

    #[tokio::test]
    async fn large_bodies_are_let_in_by_their_bytes_alone_since_a_place_is_taken_only_after_arrival()
     {
        let budget = budget_with_places(64 << 20, Some(1));
        let mut held = Vec::new();
        for _ in 0..8 {
            let admitted = budget.admit(&SizeHint::with_exact(1 << 20), 8 << 20).await;
            assert!(matches!(admitted, Ok(Admitted::Large(..))));
            held.push(admitted);
        }
        assert_eq!(
            budget.large_at_once.available_permits(),
            1,
            "no place taken yet"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_large_body_is_handled_at_sched_idle_and_a_small_one_on_the_runtime_s_workers() {
        use thread_priority::{
            NormalThreadSchedulePolicy, ThreadSchedulePolicy, thread_schedule_policy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        let budget = budget(64 << 20);
        let policy_seen = || async { thread_schedule_policy().expect("the policy is readable") };

        let large = budget.admit(&SizeHint::with_exact(1 << 20), 8 << 20).await;
        let large = large.expect("let in");
        assert_eq!(large.spawn(policy_seen()).await, Ok(idle));
        assert_eq!(
            budget.large.available_permits(),
            large_body_share(64 << 20) / 1024,
            "its bytes are given back when its handler ends"
        );

        let small = budget.admit(&SizeHint::with_exact(200), 8 << 20).await;
        let small = small.expect("let in");
        assert_ne!(small.spawn(policy_seen()).await, Ok(idle));
    }

    #[tokio::test]
    async fn an_arrived_large_body_waits_for_a_place_while_as_many_as_allowed_are_handled_then_is_refused_503()
     {
        let budget = budget_with_places(64 << 20, Some(1));
        let first = budget
            .admit(&SizeHint::with_exact(1 << 20), 8 << 20)
            .await
            .expect("let in");
        let second = budget
            .admit(&SizeHint::with_exact(1 << 20), 8 << 20)
            .await
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

        // The place is given back when the handler ends, that is when the last of its holders is dropped.
        drop((first, first_place));
        let third = budget
            .admit(&SizeHint::with_exact(1 << 20), 8 << 20)
            .await
            .expect("let in");
        third
            .place_after_arrival()
            .expect("a large body has one")
            .take()
            .await
            .expect("the place is free again");
        assert!(
            budget
                .admit(&SizeHint::with_exact(200), 8 << 20)
                .await
                .expect("let in")
                .place_after_arrival()
                .is_none()
        );
    }
}
