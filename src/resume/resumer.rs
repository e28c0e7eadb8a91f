//! What the decision path needs, shared by every request and the background tasks: the pool, the executors, the
//! privacy floor, this instance's lease on the turns it runs, the length of a worker's claim, and the writer of denies.

use std::time::Duration;

use uuid::Uuid;

use super::denial_writer::DenialWriter;
use crate::domain::vocabulary::PrivacyLevel;
use crate::executor::Executors;
use crate::storage::Database;

/// What the decision path needs, shared by every request and the recovery task.
pub struct Resumer {
    pub pool: Database,
    pub executors: Executors,
    /// The service's privacy level; a run may only make it stricter.
    pub privacy_floor: PrivacyLevel,
    /// Identifies this process as the holder of a `resuming` turn's lease.
    pub instance_id: Uuid,
    /// How much longer than its longest executor call a turn's lease lasts; past it, another instance takes over.
    pub lease_margin: Duration,
    /// How long a worker's claim on released calls lasts from its grant or renewal (`WORKER_CLAIM_TTL_SECS`).
    pub claim_ttl: Duration,
    /// Writes the denies decided from a snapshot, together when they arrive together.
    pub denials: DenialWriter,
}

impl Resumer {
    /// How long a `resuming` turn is held before another instance may take it over.
    pub fn lease(&self) -> Duration {
        self.executors.longest_timeout() + self.lease_margin
    }
}
