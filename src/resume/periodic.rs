//! The loop every background task of the decision path shares: run one round every `interval`, never two at once
//! and never catching up missed rounds in a burst, until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::resumer::Resumer;

/// Spawns `round(resumer)` every `interval` until `shutdown` changes. A round that overruns delays the next one
/// rather than stacking rounds up behind it.
pub fn spawn_every<F, Fut>(
    resumer: Arc<Resumer>,
    interval: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
    round: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Arc<Resumer>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut shutdown = shutdown;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => round(resumer.clone()).await,
                _ = shutdown.changed() => return,
            }
        }
    })
}
