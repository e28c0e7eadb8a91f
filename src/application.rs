//! One instance of the service wired together: the resumer over the database and the state every handler shares.
//!
//! `main` assembles the served binary through [`Application::build`], and the API tests assemble theirs through it
//! too, so a test runs the service as it is put together rather than a copy of that assembly. What is read from the
//! configuration (and the background tasks `main` starts beside it) stays with the caller: a test passes its own.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use uuid::Uuid;

use crate::app;
use crate::approval_links::LinkSettings;
use crate::delivery::EventsHub;
use crate::delivery::webhooks::subscription::Policy as WebhookPolicy;
use crate::domain::vocabulary::PrivacyLevel;
use crate::executor::Executors;
use crate::listen::ConnectionLimits;
use crate::resume::{DenialWriter, Resumer};
use crate::state::{AppState, Limits};
use crate::storage::Database;

/// What an instance is built from.
pub struct Wiring {
    pub pool: Database,
    pub executors: Executors,
    /// The instance's privacy level, for runs that name none.
    pub privacy_floor: PrivacyLevel,
    /// This instance's id: the holder of the resume leases it takes.
    pub instance_id: Uuid,
    pub lease_margin: Duration,
    /// `WORKER_CLAIM_TTL_SECS`: how long a worker's claim on released calls lasts (docs/design.md §15).
    pub claim_ttl: Duration,
    /// `DENY_BATCHES`: `Some(n)` writes denies together beyond `n` in flight (`Some(0)`: every deny queues), `None`
    /// each on its own.
    pub deny_batch_beyond: Option<usize>,
    pub limits: Limits,
    pub events: EventsHub,
    pub webhooks: WebhookPolicy,
    /// PUBLIC_URL and LINK_TTL_SECS (docs/design.md §20).
    pub links: LinkSettings,
}

/// An instance of the service, ready to route requests.
#[derive(Clone)]
pub struct Application {
    pub state: AppState,
}

impl Application {
    /// Starts the resumer's deny writer over `wiring.pool` and assembles the shared state. Must run inside a Tokio
    /// runtime.
    pub fn build(wiring: Wiring) -> Application {
        let resumer = Arc::new(Resumer {
            pool: wiring.pool.clone(),
            executors: wiring.executors,
            privacy_floor: wiring.privacy_floor,
            instance_id: wiring.instance_id,
            lease_margin: wiring.lease_margin,
            claim_ttl: wiring.claim_ttl,
            denials: DenialWriter::start(wiring.pool.clone(), wiring.deny_batch_beyond),
        });
        Application {
            state: AppState {
                pool: wiring.pool,
                resumer,
                limits: wiring.limits,
                events: wiring.events,
                webhooks: wiring.webhooks,
                admitted_keys: Default::default(),
                links: wiring.links,
            },
        }
    }

    /// The resumer, for the background tasks that resume and expire runs beside the requests.
    pub fn resumer(&self) -> Arc<Resumer> {
        Arc::clone(&self.state.resumer)
    }

    /// The router with every route and layer, over this instance's state.
    pub fn router(&self) -> Router {
        app::router(self.state.clone())
    }

    /// Serves the router on `listener` until `shutdown` resolves, then drains for at most `grace`.
    pub async fn serve(
        self,
        listener: TcpListener,
        connections: ConnectionLimits,
        shutdown: impl Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> std::io::Result<()> {
        app::serve(listener, self.state, connections, shutdown, grace).await
    }
}
