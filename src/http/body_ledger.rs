//! One share of MAX_BODY_BYTES_IN_FLIGHT, in KiB, counted per payer: the bytes of bodies that have arrived, held
//! until their handlers end (docs/design.md §17, `body_budget`).
//!
//! A payer is the client a body is charged to (`charged_body::Payer`). No payer may hold more than its cap of the
//! share, so one client cannot take a whole share, however many bodies it sends at once: the rest stays for the
//! others. A take that does not fit waits for bytes to be given back, up to [`WAIT`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a body's bytes, or an arrived large body, wait for room before the request is answered 503: long
/// enough for a large body ahead of it to be handled, short enough that a client is told to come back rather than
/// left hanging.
pub const WAIT: Duration = Duration::from_secs(1);

/// A share of the budget: its KiB free, and what each payer holds of it.
pub struct Ledger {
    /// Most KiB one payer may hold.
    per_payer: usize,
    accounts: Mutex<Accounts>,
    /// Woken whenever bytes are given back, for the takes waiting for them.
    freed: Notify,
}

struct Accounts {
    free: usize,
    /// Only payers holding something: an entry is removed when its payer gives back its last KiB.
    by_payer: HashMap<Arc<str>, usize>,
}

/// KiB taken from a ledger by one payer, given back when dropped.
pub struct Charge {
    ledger: Arc<Ledger>,
    payer: Arc<str>,
    kib: usize,
}

impl Ledger {
    /// A share of `kib` KiB, of which one payer may hold `per_payer` (at most the whole share).
    pub fn new(kib: usize, per_payer: usize) -> Arc<Self> {
        Arc::new(Ledger {
            per_payer: per_payer.min(kib),
            accounts: Mutex::new(Accounts {
                free: kib,
                by_payer: HashMap::new(),
            }),
            freed: Notify::new(),
        })
    }

    /// Takes `kib` for `payer` if they fit now, in the share and in the payer's cap: the path of every small body,
    /// one lock and no allocation beyond the payer's entry.
    pub fn try_take(self: &Arc<Self>, payer: &Arc<str>, kib: usize) -> Option<Charge> {
        let mut accounts = self.accounts();
        let held = accounts.by_payer.get(payer).copied().unwrap_or(0);
        if accounts.free < kib || held + kib > self.per_payer {
            return None;
        }
        accounts.free -= kib;
        *accounts.by_payer.entry(Arc::clone(payer)).or_default() += kib;
        Some(Charge {
            ledger: Arc::clone(self),
            payer: Arc::clone(payer),
            kib,
        })
    }

    /// Takes `kib` for `payer`, waiting up to [`WAIT`] for them to fit; `None` if they never did.
    pub async fn take(self: Arc<Self>, payer: Arc<str>, kib: usize) -> Option<Charge> {
        tokio::time::timeout(WAIT, async {
            loop {
                // Registered before the try, so that bytes given back between the try and the wait wake it.
                let freed = self.freed.notified();
                tokio::pin!(freed);
                freed.as_mut().enable();
                if let Some(charge) = self.try_take(&payer, kib) {
                    return charge;
                }
                freed.await;
            }
        })
        .await
        .ok()
    }

    /// KiB free in the share now.
    pub fn free(&self) -> usize {
        self.accounts().free
    }

    /// KiB `payer` holds now.
    pub fn held_by(&self, payer: &str) -> usize {
        self.accounts().by_payer.get(payer).copied().unwrap_or(0)
    }

    fn give_back(&self, payer: &Arc<str>, kib: usize) {
        {
            let mut accounts = self.accounts();
            accounts.free += kib;
            if let Some(held) = accounts.by_payer.get_mut(payer) {
                *held -= kib.min(*held);
                if *held == 0 {
                    accounts.by_payer.remove(payer);
                }
            }
        }
        self.freed.notify_waiters();
    }

    fn accounts(&self) -> MutexGuard<'_, Accounts> {
        // Every change under the lock is a few additions; a panic cannot leave the counts half-written.
        self.accounts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Charge {
    /// Adds `other`'s KiB to this charge (the same ledger and payer), so that a body charged in steps holds one.
    pub fn absorb(&mut self, mut other: Charge) {
        self.kib += std::mem::take(&mut other.kib);
    }

    pub fn kib(&self) -> usize {
        self.kib
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.kib > 0 {
            self.ledger.give_back(&self.payer, self.kib);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payer(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn a_payer_takes_no_more_than_its_cap_and_the_rest_stays_for_the_others() {
        let ledger = Ledger::new(100, 50);
        let held = ledger.try_take(&payer("a"), 50).expect("within the cap");
        assert!(ledger.try_take(&payer("a"), 1).is_none(), "over a's cap");
        let other = ledger.try_take(&payer("b"), 50).expect("b has its own cap");
        assert_eq!(ledger.free(), 0);
        drop((held, other));
        assert_eq!(ledger.free(), 100);
        assert_eq!(ledger.held_by("a"), 0);
    }

    #[test]
    fn an_absorbed_charge_is_given_back_once_with_the_one_that_absorbed_it() {
        let ledger = Ledger::new(100, 100);
        let mut first = ledger.try_take(&payer("a"), 10).expect("fits");
        first.absorb(ledger.try_take(&payer("a"), 20).expect("fits"));
        assert_eq!((first.kib(), ledger.free()), (30, 70));
        drop(first);
        assert_eq!(ledger.free(), 100);
    }

    #[tokio::test]
    async fn a_take_that_does_not_fit_waits_for_bytes_given_back_then_gives_up_after_the_wait() {
        let ledger = Ledger::new(10, 10);
        let held = ledger.try_take(&payer("a"), 10).expect("fits");
        let waiting = tokio::spawn(Arc::clone(&ledger).take(payer("b"), 5));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
        let taken = waiting.await.expect("the take ends");
        assert_eq!(taken.map(|charge| charge.kib()), Some(5));

        let _full = ledger.try_take(&payer("a"), 10).expect("fits again");
        let started = tokio::time::Instant::now();
        assert!(Arc::clone(&ledger).take(payer("b"), 1).await.is_none());
        assert!(started.elapsed() >= WAIT);
    }
}
