//! Bounds on the work one request may cause: how many calls a turn may hold, how large one call's arguments may
//! be, how many argument bytes one inbox page may load, how large a run's worker state may be, and how the bytes of
//! the bodies in flight are shared. Each is a setting (config/serve.rs) with these defaults.

use super::transcript::PendingCall;

/// Most pending calls in one turn: an approval runs them one after another, so a turn of 100,000 calls would hold
/// its run for hours.
pub const DEFAULT_MAX_CALLS_PER_TURN: usize = 64;

/// Most bytes of one call's `arguments` text: executors, events and the inbox all carry it.
pub const DEFAULT_MAX_ARGUMENTS_BYTES: usize = 256 * 1024;

/// Most argument bytes one inbox page loads; the arguments of the calls past it are omitted, and marked so.
pub const DEFAULT_INBOX_ARGUMENTS_BYTES: usize = 4 * 1024 * 1024;

/// Most bytes of a run's `worker_state` text (docs/design.md §15): an agent SDK's serialized run state, which the
/// service keeps, seals and gives back whole, so one run cannot make it hold an unbounded blob.
pub const DEFAULT_MAX_WORKER_STATE_BYTES: usize = 1024 * 1024;

/// Bodies of at most this many bytes are small: they take their share of MAX_BODY_BYTES_IN_FLIGHT apart from larger
/// ones (`http::body_budget`), and are parsed where they are served; a larger one is parsed on a thread of its own.
/// Parsing 256 KiB of JSON takes about a millisecond, the longest a small request should wait behind another.
pub const SMALL_BODY_BYTES: usize = 256 * 1024;

/// LARGE_BODIES_AT_ONCE when it is not set, on a machine of `cores`: one fewer than the cores, at least one. Large
/// bodies parse at the lowest CPU priority (`http::large_body_threads`), yet a machine whose every core is busy, at
/// whatever priority, commits more slowly (docs/benchmarks/big-bodies.md); a core left to the small requests and
/// Postgres keeps a decision's latency with large bodies in flight near its latency without.
pub fn default_large_bodies_at_once(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

/// MAX_BODY_BYTES_IN_FLIGHT when it is not set: four bodies of the largest size a route reads.
pub fn default_body_bytes_in_flight(largest_body: usize) -> usize {
    largest_body.saturating_mul(4)
}

/// The part of MAX_BODY_BYTES_IN_FLIGHT that bodies over [`SMALL_BODY_BYTES`] may hold together: three quarters. The
/// last quarter is kept for small bodies, so that however many large ones wait, a decision is never held up by them.
pub fn large_body_share(in_flight: usize) -> usize {
    // ⌊3n/4⌋ without overflow: a body of L bytes fits exactly when n ≥ ⌈4L/3⌉, as the check of the setting says.
    in_flight / 4 * 3 + in_flight % 4 * 3 / 4
}

/// Most days ahead an owner-scope remembered decision may end (docs/design.md §18): such a rule decides every run of
/// its owner for one tool, so it must end, and not years from now.
pub const DEFAULT_MAX_RULE_TTL_DAYS: u32 = 30;

/// The limits in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkLimits {
    pub max_calls_per_turn: usize,
    pub max_arguments_bytes: usize,
    pub inbox_arguments_bytes: usize,
    /// Most bytes of a run's `worker_state` text (MAX_WORKER_STATE_BYTES).
    pub max_worker_state_bytes: usize,
    /// Seconds a new turn waits for a decision when its request names no expiry (APPROVAL_TTL_SECS); `None`:
    /// such turns never expire. Kept with the limits because, like them, it bounds what one request leaves waiting.
    pub default_approval_ttl_secs: Option<u64>,
    /// Most days ahead an owner-scope rule's `expires_at` (or a decision's `remember_until`) may be
    /// (MAX_RULE_TTL_DAYS).
    pub max_rule_ttl_days: u32,
}

impl Default for WorkLimits {
    fn default() -> Self {
        WorkLimits {
            max_calls_per_turn: DEFAULT_MAX_CALLS_PER_TURN,
            max_arguments_bytes: DEFAULT_MAX_ARGUMENTS_BYTES,
            inbox_arguments_bytes: DEFAULT_INBOX_ARGUMENTS_BYTES,
            max_worker_state_bytes: DEFAULT_MAX_WORKER_STATE_BYTES,
            max_rule_ttl_days: DEFAULT_MAX_RULE_TTL_DAYS,
            default_approval_ttl_secs: None,
        }
    }
}

/// A turn over a limit; the text is shown to the client as the problem's detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnOverLimit {
    #[error("the turn has {count} tool calls; at most {max} are accepted (MAX_CALLS_PER_TURN)")]
    TooManyCalls { count: usize, max: usize },
    #[error(
        "the arguments of tool call {position} (counting from 0) have {bytes} bytes; at most {max} are accepted (MAX_ARGUMENTS_BYTES)"
    )]
    ArgumentsTooLarge {
        position: usize,
        bytes: usize,
        max: usize,
    },
}

/// A worker state over MAX_WORKER_STATE_BYTES; the text is shown to the client as the problem's detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("worker_state has {bytes} bytes; at most {max} are accepted (MAX_WORKER_STATE_BYTES)")]
pub struct WorkerStateTooLarge {
    pub bytes: usize,
    pub max: usize,
}

impl WorkLimits {
    /// Checks the length in bytes of a worker state's text, as the worker sent it.
    pub fn check_worker_state(&self, bytes: usize) -> Result<(), WorkerStateTooLarge> {
        if bytes > self.max_worker_state_bytes {
            return Err(WorkerStateTooLarge {
                bytes,
                max: self.max_worker_state_bytes,
            });
        }
        Ok(())
    }

    /// Checks the pending calls of a turn, as registered or appended.
    pub fn check_turn(&self, calls: &[PendingCall]) -> Result<(), TurnOverLimit> {
        if calls.len() > self.max_calls_per_turn {
            return Err(TurnOverLimit::TooManyCalls {
                count: calls.len(),
                max: self.max_calls_per_turn,
            });
        }
        match calls
            .iter()
            .position(|call| call.arguments.len() > self.max_arguments_bytes)
        {
            Some(position) => Err(TurnOverLimit::ArgumentsTooLarge {
                position,
                bytes: calls[position].arguments.len(),
                max: self.max_arguments_bytes,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(count: usize, arguments: &str) -> Vec<PendingCall> {
        (0..count)
            .map(|i| PendingCall {
                id: format!("c{i}"),
                name: "x".into(),
                arguments: arguments.into(),
            })
            .collect()
    }

    const SMALL: WorkLimits = WorkLimits {
        max_calls_per_turn: 2,
        max_arguments_bytes: 8,
        inbox_arguments_bytes: 0,
        max_worker_state_bytes: 4,
        default_approval_ttl_secs: None,
        max_rule_ttl_days: 1,
    };

    #[test]
    fn a_turn_within_the_limits_passes() {
        assert_eq!(SMALL.check_turn(&calls(2, "{\"a\":1}")), Ok(()));
    }

    #[test]
    fn a_turn_with_too_many_calls_is_refused_with_its_count() {
        assert_eq!(
            SMALL.check_turn(&calls(3, "{}")),
            Err(TurnOverLimit::TooManyCalls { count: 3, max: 2 })
        );
    }

    #[test]
    fn arguments_over_the_limit_are_refused_naming_the_call_position() {
        let mut turn = calls(2, "{}");
        turn[1].arguments = "{\"a\":\"xx\"}".into();
        let error = SMALL.check_turn(&turn).unwrap_err();
        assert!(
            matches!(error, TurnOverLimit::ArgumentsTooLarge { position: 1, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("tool call 1"), "{error}");
    }

    #[test]
    fn large_bodies_at_once_leaves_a_core_by_default_and_never_falls_to_none() {
        assert_eq!(default_large_bodies_at_once(1), 1);
        assert_eq!(default_large_bodies_at_once(2), 1);
        assert_eq!(default_large_bodies_at_once(8), 7);
        assert_eq!(default_large_bodies_at_once(0), 1);
    }

    #[test]
    fn the_default_body_budget_lets_three_bodies_of_the_largest_size_in_beside_the_small_share() {
        let largest = 9 * 1024 * 1024;
        let in_flight = default_body_bytes_in_flight(largest);
        assert_eq!(large_body_share(in_flight), 3 * largest);
        assert_eq!(in_flight - large_body_share(in_flight), largest);
    }

    #[test]
    fn a_worker_state_of_exactly_the_limit_passes_and_one_byte_more_is_refused() {
        assert_eq!(SMALL.check_worker_state(4), Ok(()));
        assert_eq!(
            SMALL.check_worker_state(5),
            Err(WorkerStateTooLarge { bytes: 5, max: 4 })
        );
    }
}
