//! The settings of event delivery (docs/design.md §10): the feed's long polls and the webhooks' workers and policy.

use std::time::Duration;

use clap::Args;

use crate::delivery::FeedCaps;
use crate::delivery::webhooks::Settings as WebhookSettings;
use crate::delivery::webhooks::deliver::Limits as DeliveryLimits;
use crate::delivery::webhooks::subscription::Policy as WebhookPolicy;

/// How events reach consumers (docs/design.md §10): the feed and webhooks.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Events and webhooks")]
pub struct EventsConfig {
    /// Milliseconds between this instance's polls for newly readable events while a feed reader or webhook
    /// subscription waits for them; an event committed on another instance is seen within one interval.
    #[arg(long, env = "EVENTS_POLL_INTERVAL_MS", value_name = "EVENTS_POLL_INTERVAL_MS",
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub events_poll_interval_ms: u64,

    /// Hours events are kept for the feed and webhooks, delivered or not (they are also deleted with their run).
    /// This bounds the backlog of a receiver that stays down.
    #[arg(long, env = "EVENT_RETENTION_HOURS", value_name = "EVENT_RETENTION_HOURS",
          default_value_t = 168, value_parser = clap::value_parser!(u64).range(1..=87_600))]
    pub event_retention_hours: u64,

    /// Most seconds a feed reader may ask to wait (`wait=`); capped at a second below REQUEST_TIMEOUT_MS, so that a
    /// long poll is answered before the request times out.
    #[arg(long, env = "FEED_MAX_WAIT_SECS", value_name = "FEED_MAX_WAIT_SECS",
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub feed_max_wait_secs: u64,

    /// Most feed readers of one client (one API key) waiting at once on this instance (`wait=` above 0); more
    /// are answered 429 `too_many_waiting_readers` with `Retry-After` (docs/design.md §17). At most FEED_MAX_WAITERS.
    #[arg(long, env = "FEED_MAX_WAITERS_PER_CLIENT", value_name = "FEED_MAX_WAITERS_PER_CLIENT",
          default_value_t = FeedCaps::DEFAULT_PER_CLIENT as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub feed_max_waiters_per_client: u64,

    /// Most feed readers of all clients together waiting at once on this instance; more are answered 429
    /// `too_many_waiting_readers` with `Retry-After`.
    #[arg(long, env = "FEED_MAX_WAITERS", value_name = "FEED_MAX_WAITERS",
          default_value_t = FeedCaps::DEFAULT_PER_INSTANCE as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub feed_max_waiters: u64,

    /// Webhook subscriptions this instance delivers at once; 0: this instance delivers none.
    #[arg(long, env = "WEBHOOK_CONCURRENCY", value_name = "WEBHOOK_CONCURRENCY",
          default_value_t = 16, value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub webhook_concurrency: u64,

    /// Most requests one webhook subscription has in flight at once, each of a different run (a run's events are
    /// sent one at a time, in order); 1 sends a subscription's events strictly one after another.
    #[arg(long, env = "WEBHOOK_REQUESTS_PER_SUBSCRIPTION", value_name = "WEBHOOK_REQUESTS_PER_SUBSCRIPTION",
          default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub webhook_requests_per_subscription: u64,

    /// Milliseconds one webhook request may take, connect to last byte.
    #[arg(long, env = "WEBHOOK_TIMEOUT_MS", value_name = "WEBHOOK_TIMEOUT_MS",
          default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub webhook_timeout_ms: u64,

    /// Milliseconds before the first retry of a failed webhook; each further failure doubles it (with jitter).
    #[arg(long, env = "WEBHOOK_BACKOFF_BASE_MS", value_name = "WEBHOOK_BACKOFF_BASE_MS",
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub webhook_backoff_base_ms: u64,

    /// Most seconds between retries of a failed webhook.
    #[arg(long, env = "WEBHOOK_BACKOFF_MAX_SECS", value_name = "WEBHOOK_BACKOFF_MAX_SECS",
          default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_backoff_max_secs: u64,

    /// Seconds a subscription's deliveries may keep failing before it is marked `failing`. It is still retried
    /// every WEBHOOK_BACKOFF_MAX_SECS, so a receiver that comes back gets every event kept.
    #[arg(long, env = "WEBHOOK_RETRY_WINDOW_SECS", value_name = "WEBHOOK_RETRY_WINDOW_SECS",
          default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub webhook_retry_window_secs: u64,

    /// Most bytes of a receiver's answer read.
    #[arg(long, env = "WEBHOOK_MAX_RESPONSE_BYTES", value_name = "WEBHOOK_MAX_RESPONSE_BYTES",
          default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(0..=16_777_216))]
    pub webhook_max_response_bytes: u64,

    /// Let webhooks reach loopback, link-local, private and other internal addresses. Off by default (server-side
    /// request forgery: a tenant's URL must not reach the service's own network), such a URL is refused when a
    /// subscription is created and at each delivery; for tests and private deployments.
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", value_name = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
          default_value_t = false, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub webhook_allow_private_addresses: bool,

    /// Most webhook subscriptions one tenant may have; creating one more answers 409 `too_many_subscriptions`.
    #[arg(long, env = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT", value_name = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT",
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub webhook_max_subscriptions_per_tenant: u64,

    /// Milliseconds a webhook subscription keeps its delivery slot while every slot of the instance is taken; then
    /// it gives the slot up once its requests in flight have answered, and the next claim takes tenants in turns.
    #[arg(long, env = "WEBHOOK_SLOT_HOLD_MS", value_name = "WEBHOOK_SLOT_HOLD_MS",
          default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub webhook_slot_hold_ms: u64,

    /// Most seconds a rotated webhook secret keeps signing beside its successor (the rotation's `overlap_secs`
    /// defaults to it and may not exceed it); 0: the old secret retires at once.
    #[arg(long, env = "WEBHOOK_SECRET_OVERLAP_SECS", value_name = "WEBHOOK_SECRET_OVERLAP_SECS",
          default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(0..=2_592_000))]
    pub webhook_secret_overlap_secs: u64,
}

impl EventsConfig {
    /// What the API lets a tenant subscribe (docs/design.md §17).
    pub fn webhook_policy(&self) -> WebhookPolicy {
        WebhookPolicy {
            max_per_tenant: i64::try_from(self.webhook_max_subscriptions_per_tenant)
                .unwrap_or(i64::MAX),
            allow_private: self.webhook_allow_private_addresses,
            secret_overlap: Duration::from_secs(self.webhook_secret_overlap_secs),
        }
    }

    /// The caps on feed readers waiting at once (FEED_MAX_WAITERS_PER_CLIENT, FEED_MAX_WAITERS).
    pub fn feed_caps(&self) -> FeedCaps {
        let size = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        FeedCaps {
            per_client: size(self.feed_max_waiters_per_client),
            per_instance: size(self.feed_max_waiters),
        }
    }

    pub fn event_retention(&self) -> Duration {
        Duration::from_secs(self.event_retention_hours * 3600)
    }

    /// How this instance delivers webhooks. A subscription's lease outlasts one request by a margin, so that only
    /// a holder that died (or hangs past its own timeout) loses it.
    pub fn webhook_settings(&self) -> WebhookSettings {
        let timeout = Duration::from_millis(self.webhook_timeout_ms);
        WebhookSettings {
            concurrency: usize::try_from(self.webhook_concurrency).unwrap_or(usize::MAX),
            requests_per_subscription: usize::try_from(self.webhook_requests_per_subscription)
                .unwrap_or(1),
            lease: timeout + Duration::from_secs(10),
            limits: DeliveryLimits {
                timeout,
                max_response_bytes: usize::try_from(self.webhook_max_response_bytes)
                    .unwrap_or(usize::MAX),
                allow_private: self.webhook_allow_private_addresses,
            },
            backoff_base: Duration::from_millis(self.webhook_backoff_base_ms),
            backoff_max: Duration::from_secs(self.webhook_backoff_max_secs),
            retry_window: Duration::from_secs(self.webhook_retry_window_secs),
            sweep_interval: Duration::from_secs(1),
            max_hold: Duration::from_millis(self.webhook_slot_hold_ms),
        }
    }
}
#[cfg(test)]
mod tests {
    use crate::config::Command;
    use crate::config::testing::parse;

    #[test]
    fn private_webhook_addresses_are_refused_unless_allowed() {
        let cli = parse(&[]).unwrap();
        assert!(!cli.serve.events.webhook_settings().limits.allow_private);
        let cli = parse(&["serve", "--webhook-allow-private-addresses", "true"]).unwrap();
        match cli.into_command() {
            Command::Serve(config) => {
                assert!(config.events.webhook_settings().limits.allow_private)
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
