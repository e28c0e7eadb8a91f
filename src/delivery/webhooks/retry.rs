//! When a failed delivery is tried again: exponential backoff with jitter, capped.

use std::time::Duration;

/// How long to wait before attempt `attempts + 1`, after `attempts` failed ones (at least 1): `base * 2^(attempts-1)`
/// capped at `max`, then scaled by `jitter` in `[0.5, 1.0]` so that subscriptions that failed together do not all
/// come back at the same instant.
pub fn backoff(attempts: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exponent = attempts.saturating_sub(1).min(32);
    let uncapped = base.saturating_mul(1u32 << exponent.min(31));
    let capped = uncapped.min(max);
    capped.mul_f64(jitter.clamp(0.5, 1.0))
}

/// A jitter factor in `[0.5, 1.0]`.
pub fn jitter() -> f64 {
    rand::random::<f64>() * 0.5 + 0.5
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(60);

    #[test]
    fn the_wait_doubles_with_each_failure_up_to_the_cap() {
        let waits: Vec<Duration> = (1..=10).map(|n| backoff(n, BASE, MAX, 1.0)).collect();
        assert_eq!(waits[0], Duration::from_millis(500));
        assert_eq!(waits[1], Duration::from_secs(1));
        assert_eq!(waits[2], Duration::from_secs(2));
        assert_eq!(waits[7], Duration::from_secs(60));
        assert_eq!(backoff(1000, BASE, MAX, 1.0), MAX);
    }

    #[test]
    fn jitter_takes_off_at_most_half() {
        assert_eq!(backoff(3, BASE, MAX, 0.5), Duration::from_secs(1));
        assert_eq!(backoff(3, BASE, MAX, 0.1), Duration::from_secs(1));
        for _ in 0..100 {
            let factor = jitter();
            assert!((0.5..=1.0).contains(&factor));
        }
    }
}
