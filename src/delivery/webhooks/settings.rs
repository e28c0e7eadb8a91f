//! The settings of webhook delivery, which the dispatcher and every delivery task read: their own file so that
//! both take them from below (`config::event_delivery` builds them from the command line).

use std::time::Duration;

use super::deliver;

/// How deliveries run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Subscriptions this instance delivers at once.
    pub concurrency: usize,
    /// Most requests of one subscription in flight at once, each of a different run (`window`); 1 sends its
    /// events strictly one after another.
    pub requests_per_subscription: usize,
    /// How long a claimed subscription is held without news from its holder; longer than one request.
    pub lease: Duration,
    pub limits: deliver::Limits,
    /// First wait after a failure; it doubles with each further failure, up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long deliveries may fail before the subscription is marked `failing` (it is still retried, every
    /// `backoff_max` at most, so a receiver that comes back gets everything).
    pub retry_window: Duration,
    /// How often the dispatcher looks for retries that came due, besides being woken by new events.
    pub sweep_interval: Duration,
    /// How long a delivery task keeps its subscription while every slot of this instance is taken (others may be
    /// waiting); past it, it sends nothing more and gives the subscription up once its requests have answered.
    pub max_hold: Duration,
}
