//! The threads that serve requests with large bodies: each its own, at the kernel's lowest CPU priority (SCHED_IDLE).
//!
//! Parsing, hashing and checking megabytes of JSON hold a CPU for hundreds of milliseconds. On one of the runtime's
//! few workers that would hold up every small request queued behind it, so a large body's handler runs on a thread
//! that is not a worker (`body_budget::Admitted::spawn`). That alone is not enough where the cores are few: the kernel
//! shares them evenly among the threads that can run, so with dozens of large bodies being parsed, the two workers
//! and Postgres get a sliver of the CPU each, and a small decision waits its turn behind megabytes
//! (docs/benchmarks/big-bodies.md). At SCHED_IDLE a thread runs on what the others leave: a worker or a Postgres
//! backend that wakes takes the core from it at once, and the large bodies still get every cycle nobody else wants.
//! The kernel gives an idle thread a small share even of a busy core, so a large body is slowed, never stopped.
//! The handler moves there once its body has arrived and taken its place (before that it only authenticates and
//! waits for bytes, on the runtime), and the rest of it runs there, its statements included: when every core is
//! taken by other work, a large body's transaction waits with it, so a handler that locks a row others wait for
//! does its parsing before it takes the lock (`turns`), and the calls remembered decisions approve run on the
//! runtime (`runs::answer_after_rules`). Only bodies over 256 KiB are so handled: registrations, turns and results
//! of large runs.
//!
//! No unprivileged process may raise a thread's priority again (sched(7)), so these are not the blocking pool's
//! threads, which serve small requests' work too: each large body gets a thread that ends with its handler. Starting
//! one costs microseconds against the body's milliseconds, and only a body that has arrived gets one, so the bytes
//! in flight bound how many run at once (MAX_BODY_BYTES_IN_FLIGHT, `body_budget`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::task::Poll;

use thread_priority::{
    NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
    set_thread_priority_and_policy, thread_native_id, thread_schedule_policy,
};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Why a large body's handler gave no answer.
#[derive(Debug)]
pub struct Unanswered(&'static str);

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Runs `handler` to completion, then drops `held` (what the request holds until its handler ends: its body's
/// charge and place). It starts on the runtime, where it authenticates and waits for its body, and moves to a thread
/// of its own at the lowest priority once `arrived` is set and it yields (`body_budget::PlaceAfterArrival::take`):
/// a request whose body never arrives never holds a thread, so the threads are bounded by the bodies that arrived.
/// Its I/O and timers are still driven by the current runtime, and what it spawns runs there. The returned future
/// only waits for the answer: dropped (the client gone, the request timed out), the handler still runs to its end,
/// as `detach` requires.
pub fn run<F, H>(
    handler: F,
    held: H,
    arrived: Arc<AtomicBool>,
) -> impl Future<Output = Result<F::Output, Unanswered>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    H: Send + 'static,
{
    let runtime = Handle::current();
    let (answer, answered) = oneshot::channel();
    tokio::spawn(async move {
        let mut handler = Box::pin(handler);
        // Polled here until it has its body and its place; a future may be polled by another executor afterwards,
        // with the waker of that executor's poll (any waker of an earlier poll may still wake it, for nothing).
        let before_arrival = std::future::poll_fn(|cx| match handler.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending if arrived.load(Ordering::Acquire) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await;
        if let Some(output) = before_arrival {
            drop(held);
            // The receiver is gone when nobody waits for the answer any more; the work is done all the same.
            let _ = answer.send(output);
            return;
        }
        let (hand_over, handed) =
            std::sync::mpsc::sync_channel::<(Pin<Box<F>>, H, oneshot::Sender<F::Output>)>(1);
        let started = std::thread::Builder::new()
            .name("large-body".to_owned())
            .spawn(move || {
                lower_own_priority();
                if let Ok((handler, held, answer)) = handed.recv() {
                    let output = runtime.block_on(handler);
                    drop(held);
                    let _ = answer.send(output);
                }
            });
        if started.is_ok() {
            // The thread is there to receive it; a send can fail only if it died before, and then the handler is
            // lost with it, as with any thread that panics.
            let _ = hand_over.send((handler, held, answer));
            return;
        }
        // No thread: the handler finishes here, at the runtime's priority, rather than not at all.
        tracing::warn!(
            "no thread could be started for a large body; it is handled on the runtime's workers"
        );
        let output = handler.await;
        drop(held);
        let _ = answer.send(output);
    });
    async move {
        answered
            .await
            .map_err(|_| Unanswered("the large body's handler panicked"))
    }
}

/// Puts the calling thread at SCHED_IDLE. Where the kernel or a sandbox refuses, the thread keeps its priority (the
/// large body is served as before this module) and the first refusal is logged, once.
fn lower_own_priority() {
    static REFUSED: Once = Once::new();
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    let lowered = set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle);
    // The crate sets the policy, then the nice value; the second can fail alone (a process started with a nice
    // value above 0 may not lower it again), which leaves the thread at SCHED_IDLE all the same.
    let at_idle = thread_schedule_policy().is_ok_and(|policy| policy == idle);
    if let (Err(error), false) = (lowered, at_idle) {
        REFUSED.call_once(|| {
            tracing::warn!(
                error = ?error,
                "large bodies are handled at normal CPU priority: the kernel refused SCHED_IDLE, so small requests \
                 share the cores with them evenly"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The flag of a body that has arrived: its handler moves at its first yield.
    fn arrived() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(true))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_large_body_s_handler_runs_at_sched_idle_on_a_thread_that_is_not_a_worker() {
        let (policy, thread) = run(
            async {
                tokio::task::yield_now().await;
                (
                    thread_schedule_policy().expect("the policy is readable"),
                    std::thread::current().name().map(str::to_owned),
                )
            },
            (),
            arrived(),
        )
        .await
        .expect("the handler answers");
        assert_eq!(
            policy,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle)
        );
        assert_eq!(thread.as_deref(), Some("large-body"));
        let worker =
            tokio::spawn(async { thread_schedule_policy().expect("the policy is readable") });
        assert_ne!(
            worker.await.expect("the worker answers"),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
            "the runtime's workers keep their priority"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_handler_drives_the_runtime_s_timers_and_drops_what_it_holds_after_it_ends() {
        let dropped = Arc::new(AtomicBool::new(false));
        struct Held(Arc<AtomicBool>);
        impl Drop for Held {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let seen = Arc::clone(&dropped);
        let answer = run(
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.load(Ordering::SeqCst)
            },
            Held(Arc::clone(&dropped)),
            arrived(),
        )
        .await
        .expect("the handler answers");
        assert!(!answer, "the weight is held while the handler runs");
        assert!(
            dropped.load(Ordering::SeqCst),
            "and given back when it ends"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_handler_dropped_unawaited_still_runs_to_its_end() {
        let (finished, ended) = oneshot::channel();
        let waiting = run(
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                finished.send(()).expect("the test waits");
            },
            (),
            arrived(),
        );
        drop(waiting);
        tokio::time::timeout(Duration::from_secs(5), ended)
            .await
            .expect("the handler ended")
            .expect("and said so");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_handler_that_panics_is_answered_as_unanswered() {
        fn failing() -> u32 {
            panic!("a handler's bug")
        }
        let outcome = run(
            async {
                tokio::task::yield_now().await;
                failing()
            },
            (),
            arrived(),
        )
        .await;
        let error = outcome.expect_err("no answer");
        assert_eq!(error.to_string(), "the large body's handler panicked");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_handler_whose_body_has_not_arrived_stays_on_the_runtime_and_starts_no_thread() {
        let thread = run(
            async {
                tokio::task::yield_now().await;
                std::thread::current().name().map(str::to_owned)
            },
            (),
            Arc::new(AtomicBool::new(false)),
        )
        .await
        .expect("the handler answers");
        assert_ne!(thread.as_deref(), Some("large-body"));
    }
}
