//! The feed's waiting readers on this instance (docs/design.md §17): counted per client and per instance against their
//! caps, so that one client's long polls cannot take what others need, and woken by tenant, so that one tenant's
//! events never make another tenant's readers read again.
//!
//! A slot is held by a [`Registration`] and given back when it is dropped, whatever ends the wait: an answer, or
//! the request's future dropped because its client hung up (`http::events_feed` is not detached for the wait).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::metrics::FeedCounts;

/// The most feed readers that may wait at once (FEED_MAX_WAITERS_PER_CLIENT, FEED_MAX_WAITERS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedCaps {
    /// Of one client (one API key).
    pub per_client: usize,
    /// Of this instance, all clients together.
    pub per_instance: usize,
}

impl FeedCaps {
    pub const DEFAULT_PER_CLIENT: usize = 64;
    pub const DEFAULT_PER_INSTANCE: usize = 1024;
}

impl Default for FeedCaps {
    fn default() -> Self {
        FeedCaps {
            per_client: Self::DEFAULT_PER_CLIENT,
            per_instance: Self::DEFAULT_PER_INSTANCE,
        }
    }
}

/// Why a reader was not let wait: whose cap was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Client,
    Instance,
}

/// Every waiting feed reader of this instance.
pub(crate) struct FeedWaiters {
    caps: FeedCaps,
    slots: Arc<Mutex<Slots>>,
    woken: AtomicU64,
    refused_client: AtomicU64,
    refused_instance: AtomicU64,
}

#[derive(Default)]
struct Slots {
    total: usize,
    /// Waiting readers per client name (names are unique across tenants); a client with none has no entry.
    clients: HashMap<String, usize>,
    /// The wake-up of each tenant with waiting readers; a tenant with none has no entry.
    tenants: HashMap<String, TenantWake>,
}

struct TenantWake {
    wake: watch::Sender<()>,
    waiters: usize,
}

fn locked(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    // A panic while counting leaves counts that are still usable.
    slots
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FeedWaiters {
    pub(crate) fn new(caps: FeedCaps) -> Self {
        FeedWaiters {
            caps,
            slots: Arc::default(),
            woken: AtomicU64::new(0),
            refused_client: AtomicU64::new(0),
            refused_instance: AtomicU64::new(0),
        }
    }

    /// Takes a slot for a reader of `client` in `tenant`, unless a cap is reached.
    pub(crate) fn register(&self, tenant: &str, client: &str) -> Result<Registration, Refused> {
        let mut slots = locked(&self.slots);
        let of_client = slots.clients.get(client).copied().unwrap_or(0);
        let refused = if of_client >= self.caps.per_client {
            Some((Refused::Client, &self.refused_client))
        } else if slots.total >= self.caps.per_instance {
            Some((Refused::Instance, &self.refused_instance))
        } else {
            None
        };
        if let Some((refused, counter)) = refused {
            counter.fetch_add(1, Ordering::Relaxed);
            return Err(refused);
        }
        slots.total += 1;
        *slots.clients.entry(client.to_owned()).or_default() += 1;
        let tenant_wake = slots
            .tenants
            .entry(tenant.to_owned())
            .or_insert_with(|| TenantWake {
                wake: watch::Sender::new(()),
                waiters: 0,
            });
        tenant_wake.waiters += 1;
        Ok(Registration {
            wake: tenant_wake.wake.subscribe(),
            tenant: tenant.to_owned(),
            client: client.to_owned(),
            slots: Arc::clone(&self.slots),
        })
    }

    /// Wakes the readers of these tenants.
    pub(crate) fn wake(&self, tenants: &[String]) {
        if tenants.is_empty() {
            return;
        }
        let slots = locked(&self.slots);
        for tenant in tenants {
            if let Some(tenant_wake) = slots.tenants.get(tenant) {
                tenant_wake.wake.send_replace(());
            }
        }
    }

    /// Wakes every reader.
    pub(crate) fn wake_all(&self) {
        for tenant_wake in locked(&self.slots).tenants.values() {
            tenant_wake.wake.send_replace(());
        }
    }

    /// Counts a wake-up after which a reader reads again.
    pub(crate) fn woken(&self) {
        self.woken.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> FeedCounts {
        FeedCounts {
            waiting: locked(&self.slots).total,
            woken: self.woken.load(Ordering::Relaxed),
            refused_client: self.refused_client.load(Ordering::Relaxed),
            refused_instance: self.refused_instance.load(Ordering::Relaxed),
        }
    }
}

/// A reader's slot and its tenant's wake-up; dropping it gives the slot back.
pub struct Registration {
    wake: watch::Receiver<()>,
    tenant: String,
    client: String,
    slots: Arc<Mutex<Slots>>,
}

impl Registration {
    /// Marks the tenant's wake-ups so far as seen.
    pub(crate) fn mark_seen(&mut self) {
        self.wake.borrow_and_update();
    }

    /// Resolves at the tenant's next wake-up after [`Registration::mark_seen`].
    pub(crate) async fn changed(&mut self) {
        // The sender lives in `slots` while this registration does, so this never fails; if it did, nothing could
        // wake the reader any more, and its wait runs out.
        if self.wake.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut slots = locked(&self.slots);
        slots.total -= 1;
        if let Some(count) = slots.clients.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                slots.clients.remove(&self.client);
            }
        }
        if let Some(tenant_wake) = slots.tenants.get_mut(&self.tenant) {
            tenant_wake.waiters -= 1;
            if tenant_wake.waiters == 0 {
                slots.tenants.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiters(per_client: usize, per_instance: usize) -> FeedWaiters {
        FeedWaiters::new(FeedCaps {
            per_client,
            per_instance,
        })
    }

    #[test]
    fn a_client_at_its_cap_is_refused_and_its_slots_come_back_when_dropped() {
        let feed = waiters(2, 10);
        let first = feed.register("t", "a").unwrap();
        let _second = feed.register("t", "a").unwrap();
        assert_eq!(feed.register("t", "a").err(), Some(Refused::Client));
        assert!(
            feed.register("t", "b").is_ok(),
            "another client has its own cap"
        );
        drop(first);
        assert!(feed.register("t", "a").is_ok());
        let counts = feed.counts();
        assert_eq!(
            (counts.waiting, counts.refused_client),
            (1, 1),
            "the refused and the dropped hold none"
        );
    }

    #[test]
    fn the_instance_at_its_cap_refuses_every_client() {
        let feed = waiters(5, 3);
        let held: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|client| feed.register("t", client).unwrap())
            .collect();
        assert_eq!(feed.register("u", "d").err(), Some(Refused::Instance));
        drop(held);
        let counts = feed.counts();
        assert_eq!((counts.waiting, counts.refused_instance), (0, 1));
        assert!(locked(&feed.slots).clients.is_empty());
        assert!(locked(&feed.slots).tenants.is_empty());
    }

    #[tokio::test]
    async fn a_tenant_s_wake_up_reaches_only_its_own_readers() {
        let feed = waiters(5, 10);
        let mut mine = feed.register("mine", "a").unwrap();
        let mut theirs = feed.register("theirs", "b").unwrap();
        mine.mark_seen();
        theirs.mark_seen();
        feed.wake(&["theirs".to_owned()]);
        assert!(!mine.wake.has_changed().unwrap());
        assert!(theirs.wake.has_changed().unwrap());
        feed.wake_all();
        assert!(mine.wake.has_changed().unwrap());
        mine.changed().await;
    }
}
