//! What every handler may use: the shared state of the service and the request limits of the HTTP layer.
//!
//! Apart from `app` (which builds the router from the handlers) so that handlers and the router both depend on
//! it and neither on the other: the dependency runs `app` → `http` → `state`, one way.

use std::sync::Arc;
use std::time::Duration;

use crate::storage::Database;

use crate::admitted_keys::AdmittedKeys;
use crate::approval_links::LinkSettings;
use crate::delivery::EventsHub;
use crate::delivery::webhooks::subscription::Policy as WebhookPolicy;
use crate::domain::limits::{self, WorkLimits};
use crate::resume::Resumer;

/// What every handler may use.
#[derive(Clone)]
pub struct AppState {
    pub pool: Database,
    pub resumer: Arc<Resumer>,
    pub limits: Limits,
    /// Wakes feed readers when events become readable.
    pub events: EventsHub,
    /// What tenants may subscribe, and how their webhook secrets rotate (docs/design.md §17).
    pub webhooks: WebhookPolicy,
    /// Keys found live lately: a decision's body is read before its key is checked only with one of these.
    pub admitted_keys: AdmittedKeys,
    /// Where people reach the service and how long approval links last (docs/design.md §20).
    pub links: LinkSettings,
}

/// Request limits of the HTTP layer.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    /// How long a request's whole body may take to arrive; past it, 408.
    pub body_read_timeout: Duration,
    /// The work one request may cause: calls per turn, argument bytes per call and per inbox page.
    pub work: WorkLimits,
    /// Most bytes of request bodies in flight (MAX_BODY_BYTES_IN_FLIGHT); `None`: the default for the body limits
    /// above ([`Limits::body_bytes_in_flight`]).
    pub body_bytes_in_flight: Option<usize>,
    /// Most bodies over `SMALL_BODY_BYTES` parsed and handled at once (LARGE_BODIES_AT_ONCE); `None`: the default
    /// ([`Limits::large_bodies_at_once`]).
    pub large_bodies_at_once: Option<usize>,
}

impl Limits {
    /// The largest body a route reads: a registration's or a new turn's, with room for a worker state beside a
    /// transcript of MAX_BODY_BYTES (docs/design.md §15).
    pub fn largest_body(&self) -> usize {
        self.max_body_bytes
            .saturating_add(self.work.max_worker_state_bytes)
    }

    /// MAX_BODY_BYTES_IN_FLIGHT, or its default for these body limits.
    pub fn body_bytes_in_flight(&self) -> usize {
        self.body_bytes_in_flight
            .unwrap_or_else(|| limits::default_body_bytes_in_flight(self.largest_body()))
    }

    /// LARGE_BODIES_AT_ONCE, or its default for this machine's cores.
    pub fn large_bodies_at_once(&self) -> usize {
        self.large_bodies_at_once.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            limits::default_large_bodies_at_once(cores)
        })
    }
}

/// The admitted keys alone, for the decision route's extractor (`http::decision_credential`): a clone of one `Arc`
/// instead of the whole state on the path of every decision.
impl axum::extract::FromRef<AppState> for AdmittedKeys {
    fn from_ref(state: &AppState) -> Self {
        state.admitted_keys.clone()
    }
}
