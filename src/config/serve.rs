//! The settings of `serve`, the service itself, and the limits and timeouts derived from them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{DatabaseConfig, EncryptionConfig, EventsConfig, LinksConfig, LogConfig};
use crate::domain::limits::{self, WorkLimits};
use crate::domain::vocabulary::PrivacyLevel;
use crate::listen::ConnectionLimits;

/// Every setting of the service (`serve`).
#[derive(Debug, Clone, Args)]
pub struct Config {
    #[command(flatten)]
    pub database: DatabaseConfig,

    /// Address and port to listen on.
    #[arg(
        long,
        env = "LISTEN_ADDR",
        value_name = "LISTEN_ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub listen_addr: SocketAddr,

    /// The service's privacy level for tool events: none, metadata, redacted or full. A run that names no level
    /// gets this one; a run that names one gets the stricter of the two.
    #[arg(long, env = "PRIVACY_LEVEL", value_name = "PRIVACY_LEVEL", default_value = "metadata",
          value_parser = parse_privacy_level)]
    pub privacy_level: PrivacyLevel,

    /// Milliseconds before a request is answered 503; its decision, if any, still completes in the background.
    #[arg(long, env = "REQUEST_TIMEOUT_MS", value_name = "REQUEST_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub request_timeout_ms: u64,

    /// Largest request body in bytes; larger ones are answered 413.
    #[arg(long, env = "MAX_BODY_BYTES", value_name = "MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub max_body_bytes: u64,

    /// Most bytes of request bodies read and handled at once, each charged as its bytes arrive to the client whose
    /// key was checked, who may hold half of each share; a quarter is kept for bodies up to 256 KiB. Bytes that find
    /// no room wait up to a second, then are answered 503 `too_many_body_bytes`. Unset: four bodies of the largest
    /// size, 4 × (MAX_BODY_BYTES + MAX_WORKER_STATE_BYTES).
    #[arg(long, env = "MAX_BODY_BYTES_IN_FLIGHT", value_name = "MAX_BODY_BYTES_IN_FLIGHT",
          value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024 * 1024))]
    pub max_body_bytes_in_flight: Option<u64>,

    /// Most bodies over 256 KiB parsed and handled at once, each on a thread of its own at the lowest CPU priority;
    /// a body (sent in chunks too) takes its place once it has arrived over 256 KiB, and past it waits up to a
    /// second, then is answered 503 `too_many_body_bytes`. Unset: one fewer than the cores (at least one), which
    /// leaves a core for small requests and the database.
    #[arg(long, env = "LARGE_BODIES_AT_ONCE", value_name = "LARGE_BODIES_AT_ONCE",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub large_bodies_at_once: Option<u32>,

    /// Milliseconds a client may take to send a request's whole body; a slower one is answered 408 and its
    /// connection closed.
    #[arg(long, env = "BODY_READ_TIMEOUT_MS", value_name = "BODY_READ_TIMEOUT_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub body_read_timeout_ms: u64,

    /// Milliseconds a connection may take to send a whole request header (an idle keep-alive connection: to start
    /// one) before it is closed.
    #[arg(long, env = "HEADER_READ_TIMEOUT_MS", value_name = "HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub header_read_timeout_ms: u64,

    /// Most connections open at once; at the bound, new ones wait in the listen backlog until one closes. Keep it
    /// below the process's open-file limit (`ulimit -n`).
    #[arg(long, env = "MAX_CONNECTIONS", value_name = "MAX_CONNECTIONS", default_value_t = 4_096,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// Seconds in-flight requests get to finish after SIGTERM or Ctrl-C.
    #[arg(long, env = "SHUTDOWN_GRACE_SECS", value_name = "SHUTDOWN_GRACE_SECS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace_secs: u64,

    /// Seconds between sweeps for approved turns whose instance stopped mid-way.
    #[arg(long, env = "RECOVERY_INTERVAL_SECS", value_name = "RECOVERY_INTERVAL_SECS",
          default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub recovery_interval_secs: u64,

    /// Seconds a new turn waits for a decision when its registration or POST /turns names no `expires_at` or
    /// `approval_ttl_secs`; past it, the turn expires (every call gets the expired result). Unset: never.
    #[arg(long, env = "APPROVAL_TTL_SECS", value_name = "APPROVAL_TTL_SECS",
          value_parser = clap::value_parser!(u64).range(1..=10 * 365 * 24 * 3600))]
    pub approval_ttl_secs: Option<u64>,

    /// Milliseconds between sweeps for turns whose `expires_at` has passed, and for workers' claims that lapsed.
    #[arg(long, env = "EXPIRY_SWEEP_INTERVAL_MS", value_name = "EXPIRY_SWEEP_INTERVAL_MS",
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub expiry_sweep_interval_ms: u64,

    /// Seconds a worker's claim on released calls lasts from its grant or renewal (docs/design.md §15); past it, the
    /// calls it has not posted end `interrupted` and the run resumes. Renew before it runs out while a tool runs.
    #[arg(long, env = "WORKER_CLAIM_TTL_SECS", value_name = "WORKER_CLAIM_TTL_SECS",
          default_value_t = 300, value_parser = clap::value_parser!(u64).range(5..=3600))]
    pub worker_claim_ttl_secs: u64,

    /// Milliseconds an approved turn's lease outlasts its longest executor timeout. If the instance running the
    /// turn dies, another instance takes the turn over once the lease has run out.
    #[arg(long, env = "RESUME_LEASE_MARGIN_MS", value_name = "RESUME_LEASE_MARGIN_MS",
          default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub resume_lease_margin_ms: u64,

    /// Once four denies are being written, write the next ones together in one statement
    /// (`src/resume/denial_writer.rs`): more denies per second at saturation, a longer tail below it (BENCHMARKS.md).
    /// `false` (the default) writes each deny by a statement of its own, addressed to its run alone, as tables
    /// distributed by run id need (docs/design.md §12).
    #[arg(long, env = "DENY_BATCHES", value_name = "DENY_BATCHES", default_value_t = false,
          action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub deny_batches: bool,

    /// A TOML file configuring tool executors; without it every approved call is `not_permitted`.
    #[arg(long, env = "TOOLS_CONFIG", value_name = "TOOLS_CONFIG")]
    pub tools_config: Option<PathBuf>,

    /// Allow `http://` executors with a `secret_env` in TOOLS_CONFIG: the secret then travels in clear, so only
    /// where the network between the service and its executors is trusted.
    #[arg(long, env = "EXECUTORS_ALLOW_INSECURE_SECRETS", value_name = "EXECUTORS_ALLOW_INSECURE_SECRETS",
          default_value_t = false, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub executors_allow_insecure_secrets: bool,

    /// Most tool calls in one turn; a registration or new turn with more is answered 422 `too_many_calls`.
    #[arg(long, env = "MAX_CALLS_PER_TURN", value_name = "MAX_CALLS_PER_TURN",
          default_value_t = limits::DEFAULT_MAX_CALLS_PER_TURN as u64,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub max_calls_per_turn: u64,

    /// Most bytes of one pending call's arguments text; more is answered 422 `arguments_too_large`.
    #[arg(long, env = "MAX_ARGUMENTS_BYTES", value_name = "MAX_ARGUMENTS_BYTES",
          default_value_t = limits::DEFAULT_MAX_ARGUMENTS_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(2..=1024 * 1024 * 1024))]
    pub max_arguments_bytes: u64,

    /// Most argument bytes one page of GET /v1/approvals loads; the arguments of later calls are omitted and
    /// marked `arguments_omitted`.
    #[arg(long, env = "INBOX_ARGUMENTS_BYTES", value_name = "INBOX_ARGUMENTS_BYTES",
          default_value_t = limits::DEFAULT_INBOX_ARGUMENTS_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(0..=1024 * 1024 * 1024))]
    pub inbox_arguments_bytes: u64,

    /// Most bytes of a run's `worker_state` text (registration or POST /turns); more is answered 413
    /// `worker_state_too_large`. A body that carries a state may exceed MAX_BODY_BYTES by the state's size.
    #[arg(long, env = "MAX_WORKER_STATE_BYTES", value_name = "MAX_WORKER_STATE_BYTES",
          default_value_t = limits::DEFAULT_MAX_WORKER_STATE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1..=1024 * 1024 * 1024))]
    pub max_worker_state_bytes: u64,

    /// Most days ahead an owner-scope remembered decision may end (its `expires_at`, or a decision's
    /// `remember_until`); later is answered 422 `rule_ttl_too_long`.
    #[arg(long, env = "MAX_RULE_TTL_DAYS", value_name = "MAX_RULE_TTL_DAYS",
          default_value_t = limits::DEFAULT_MAX_RULE_TTL_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=366))]
    pub max_rule_ttl_days: u32,

    /// Days to keep tool-event payloads and finished (cancelled or completed) runs. When set, `serve` purges
    /// older ones every PURGE_INTERVAL_SECS; unset, nothing is purged unless `purge --older-than-days` is run.
    #[arg(long, env = "RETENTION_DAYS", value_name = "RETENTION_DAYS",
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub retention_days: Option<u32>,

    /// Seconds between purges (of events always, of payloads and runs while RETENTION_DAYS is set).
    #[arg(long, env = "PURGE_INTERVAL_SECS", value_name = "PURGE_INTERVAL_SECS",
          default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(60..=604_800))]
    pub purge_interval_secs: u64,

    #[command(flatten)]
    pub events: EventsConfig,

    #[command(flatten)]
    pub links: LinksConfig,

    #[command(flatten)]
    pub encryption: EncryptionConfig,

    #[command(flatten)]
    pub log: LogConfig,
}

impl Config {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// FEED_MAX_WAIT_SECS, capped at a whole second below REQUEST_TIMEOUT_MS.
    pub fn feed_max_wait(&self) -> Duration {
        let below_timeout = (self.request_timeout_ms / 1000).saturating_sub(1);
        Duration::from_secs(self.events.feed_max_wait_secs.min(below_timeout))
    }

    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        }
    }

    pub fn work_limits(&self) -> WorkLimits {
        let size = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        WorkLimits {
            max_calls_per_turn: size(self.max_calls_per_turn),
            max_arguments_bytes: size(self.max_arguments_bytes),
            inbox_arguments_bytes: size(self.inbox_arguments_bytes),
            max_worker_state_bytes: size(self.max_worker_state_bytes),
            default_approval_ttl_secs: self.approval_ttl_secs,
            max_rule_ttl_days: self.max_rule_ttl_days,
        }
    }
}

fn parse_privacy_level(text: &str) -> Result<PrivacyLevel, String> {
    PrivacyLevel::parse(text)
        .ok_or_else(|| format!("{text:?} is not one of none, metadata, redacted, full"))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Command;
    use crate::config::testing::parse;

    #[test]
    fn an_invalid_privacy_level_is_refused_naming_the_variable() {
        let error = parse(&["serve", "--privacy-level", "secret"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("PRIVACY_LEVEL"), "{error}");
    }

    #[test]
    fn a_worker_claim_lasts_five_minutes_unless_set_within_its_bound() {
        let serve = |args: &[&str]| {
            parse(&[&["serve"], args].concat()).map(|cli| match cli.into_command() {
                Command::Serve(config) => config.worker_claim_ttl_secs,
                other => panic!("parsed as {other:?}"),
            })
        };
        assert_eq!(serve(&[]).unwrap(), 300);
        assert_eq!(serve(&["--worker-claim-ttl-secs", "5"]).unwrap(), 5);
        assert_eq!(serve(&["--worker-claim-ttl-secs", "3600"]).unwrap(), 3600);
        for outside in ["4", "3601", "0"] {
            let error = serve(&["--worker-claim-ttl-secs", outside])
                .unwrap_err()
                .to_string();
            assert!(error.contains("WORKER_CLAIM_TTL_SECS"), "{error}");
        }
    }

    #[test]
    fn a_feed_wait_is_capped_a_second_below_the_request_timeout() {
        let config =
            |args: &[&str]| match parse(&[&["serve"], args].concat()).unwrap().into_command() {
                Command::Serve(config) => config,
                other => panic!("parsed as {other:?}"),
            };
        let short = config(&["--request-timeout-ms", "20000"]);
        assert!(
            short.validate().is_ok(),
            "a short request timeout needs no shorter FEED_MAX_WAIT_SECS"
        );
        assert_eq!(short.feed_max_wait(), Duration::from_secs(19));
        assert_eq!(config(&[]).feed_max_wait(), Duration::from_secs(25));
        assert_eq!(
            config(&["--request-timeout-ms", "500"]).feed_max_wait(),
            Duration::ZERO
        );
    }
}
