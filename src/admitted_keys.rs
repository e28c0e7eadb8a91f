//! The API keys this instance found live, holding a decision scope, in the last minute: whose decision bodies it
//! reads before the key is checked (`http::decision_credential`).
//!
//! A decision's key is checked by the statement that reads its run, after the body is read, so that the busiest
//! route spends no statement of its own on the key. A caller without a valid key must not make the service read
//! and parse a body (docs/design.md §8: the key is checked first), so a key that is not here is looked up on its own
//! before the body, and put here when it passes. This only decides whether a body is read before the key is checked:
//! the run's read still checks every key, so an entry that outlived its key's revocation makes no decision pass, it
//! only lets that body be read first, for at most [`FRESH_FOR`]. Entries are only ever made for keys that passed, so a
//! stranger cannot fill this; it is bounded anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a key found live is trusted to have its body read before its check.
pub const FRESH_FOR: Duration = Duration::from_secs(60);

/// Most keys remembered; past it, all are forgotten (each is looked up once more).
const MOST: usize = 10_000;

/// The key hashes found live lately, shared by the handlers of this instance; cheap to clone.
#[derive(Clone, Default)]
pub struct AdmittedKeys {
    found: Arc<Mutex<HashMap<[u8; 32], Instant>>>,
}

impl AdmittedKeys {
    /// Whether the key of this hash was found live within [`FRESH_FOR`].
    pub fn recently_admitted(&self, hash: &[u8; 32]) -> bool {
        let found = self
            .found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        found.get(hash).is_some_and(|at| at.elapsed() < FRESH_FOR)
    }

    /// Remembers that the key of this hash was just found live, holding a decision scope.
    pub fn admitted(&self, hash: [u8; 32]) {
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if found.len() >= MOST {
            found.clear();
        }
        found.insert(hash, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_key_found_live_is_admitted_before_its_check() {
        let keys = AdmittedKeys::default();
        assert!(!keys.recently_admitted(&[1; 32]));
        keys.admitted([1; 32]);
        assert!(keys.recently_admitted(&[1; 32]));
        assert!(!keys.recently_admitted(&[2; 32]));
    }

    #[test]
    fn the_remembered_keys_are_bounded() {
        let keys = AdmittedKeys::default();
        for n in 0..=MOST {
            let mut hash = [0; 32];
            hash[..8].copy_from_slice(&(n as u64).to_le_bytes());
            keys.admitted(hash);
        }
        assert!(keys.found.lock().unwrap().len() <= MOST);
    }
}
