//! The threads that handle requests with large bodies, at a lower CPU priority than the runtime's workers.
//!
//! Parsing, hashing and checking megabytes of JSON holds a CPU for hundreds of milliseconds. Off the runtime's
//! workers (docs/design.md §17) it no longer queues small requests behind it, but on a machine of two cores the
//! operating system still shares the CPUs evenly between a few such threads and the two workers, so a small decision
//! waits for its slice behind them (its p99 five times its p99 alone, BENCHMARKS.md "Big bodies"). These threads
//! run at nice 10, a tenth of a worker's weight: the scheduler runs a worker that has work at once, and the large
//! bodies take the CPU the small requests leave. They still progress under any load, unlike `SCHED_IDLE`.
//!
//! A pool of its own (the blocking pool of a runtime that runs nothing else), because a thread's nice value cannot
//! be raised back without privileges: the runtime's own blocking pool, shared with other work, must keep nice 0.
//! Its bound is tokio's default for a blocking pool, as before; MAX_BODY_BYTES_IN_FLIGHT bounds how many are busy.

use std::future::Future;
use std::sync::{Once, OnceLock};

use thread_priority::{ThreadPriority, ThreadPriorityValue, set_current_thread_priority};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

/// The CPU priority of the threads, in `thread_priority`'s scale of 0 (lowest) to 99: under `SCHED_OTHER` the crate
/// maps 22 to nice 10 (a test below holds it to that).
const PRIORITY: u8 = 22;

/// Tokio's default bound of a blocking pool.
const MAX_THREADS: usize = 512;

/// Runs `handler` to completion on one of the threads, its I/O still driven by the runtime that calls this.
pub fn spawn<F>(handler: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = Handle::current();
    pool().spawn_blocking(move || runtime.block_on(handler))
}

/// The runtime whose blocking pool the threads are; built once and never dropped (a runtime may not be dropped
/// where blocking is not allowed, and the process keeps it to the end anyway).
fn pool() -> &'static Handle {
    static POOL: OnceLock<Runtime> = OnceLock::new();
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .thread_name("large-body")
            .max_blocking_threads(MAX_THREADS)
            .on_thread_start(lower_priority)
            .build()
            .expect("a runtime without I/O or timers builds")
    })
    .handle()
}

/// Sets the calling thread's nice value to 10. Where the system refuses (a process already running above nice 10
/// without the privilege to go back), the thread keeps its priority: slower small requests beside large ones, never a
/// refused request; said once in the log.
fn lower_priority() {
    static SAID: Once = Once::new();
    let priority = ThreadPriorityValue::try_from(PRIORITY).expect("within 0..=99");
    if let Err(error) = set_current_thread_priority(ThreadPriority::Crossplatform(priority)) {
        SAID.call_once(|| tracing::warn!(?error, "large-body threads keep the process's priority"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice value of the calling thread, from /proc (field 19 of its stat line).
    fn nice_of_this_thread() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[tokio::test]
    async fn a_large_body_s_handler_runs_at_nice_10_and_the_caller_keeps_its_priority() {
        let before = nice_of_this_thread();
        let nice = spawn(async { nice_of_this_thread() }).await.unwrap();
        // Under a test runner started above nice 10 without privileges, the threads keep the process's value.
        assert!(nice == 10 || (before > 10 && nice == before), "nice {nice}");
        assert_eq!(nice_of_this_thread(), before);
    }

    #[tokio::test]
    async fn a_handler_s_io_is_driven_by_the_calling_runtime() {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let waited = spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            receiver.await.unwrap()
        });
        sender.send(7).unwrap();
        assert_eq!(waited.await.unwrap(), 7);
    }
}
