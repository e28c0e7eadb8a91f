//! The settings of `watch`, which follows the feed over HTTP and needs no database.

use clap::Args;

use super::LogConfig;
use crate::domain::secret::Secret;

/// Where `watch` reads the feed, and from where.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The service's base URL.
    #[arg(
        long,
        env = "APPROVAL_RESUME_URL",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// An API key with the `events:read` scope.
    #[arg(
        long,
        env = "APPROVAL_RESUME_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub key: Secret,
    /// Start after this cursor (a `next_cursor`); without it, from the oldest event kept.
    #[arg(long)]
    pub after: Option<String>,
    /// Seconds each long poll waits; at most the service's FEED_MAX_WAIT_SECS.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait: u64,
    #[command(flatten)]
    pub log: LogConfig,
}
