//! The command line and the configuration: every setting is an environment variable and also a flag.
//!
//! Values are parsed once, at start-up; an invalid value stops the start with a message that names the variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::domain::scopes::Scope;
use crate::domain::tokens::PrivacyLevel;
use crate::events::webhooks::Settings as WebhookSettings;
use crate::events::webhooks::deliver::Limits as DeliveryLimits;

/// A value that must never be printed: `Debug` and `Display` show `[secret]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[secret]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[secret]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "approval-resume",
    version,
    about = "Resumes AI-agent runs suspended for human approval."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: Config,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Manage API clients and their keys.
    #[command(subcommand)]
    Clients(ClientsCommand),
    /// Delete tool-event payloads and finished runs older than the retention period, and say what was removed.
    Purge {
        /// Days to keep; defaults to RETENTION_DAYS.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=36_500))]
        older_than_days: Option<u32>,
    },
    /// Follow the tenant's events over HTTP (`GET /v1/events`) and print each as a JSON line; needs no database,
    /// only the service's URL and a key with `events:read`.
    Watch(WatchArgs),
    /// Manage webhook subscriptions.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
}

/// Where `watch` reads the feed, and from where.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The service's base URL.
    #[arg(
        long,
        env = "APPROVAL_RESUME_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// An API key with the `events:read` scope.
    #[arg(long, env = "APPROVAL_RESUME_KEY", hide_env_values = true)]
    pub key: Secret,
    /// Start after this cursor (a `next_cursor`); without it, from the oldest event kept.
    #[arg(long)]
    pub after: Option<String>,
    /// Seconds each long poll waits; at most the service's FEED_MAX_WAIT_SECS.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wait: u64,
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Subscribe a URL to a tenant's events and print the signing secret, once.
    Add {
        /// An http(s) URL that receives a signed POST per event.
        #[arg(long)]
        url: String,
        /// An event type to send (run.waiting, run.resumed, run.expired, run.cancelled, run.completed); repeat
        /// the flag for several; without it, all of them.
        #[arg(long = "event")]
        events: Vec<String>,
        /// The tenant whose events are sent.
        #[arg(long, default_value = "default")]
        tenant: String,
    },
    /// List subscriptions with their state and backlog; secrets are never shown.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Remove a subscription.
    Remove { id: uuid::Uuid },
}

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Create a client and print its key, once.
    Add {
        /// A unique name: letters, digits, `_`, `.`, `-`.
        name: String,
        /// A scope the client holds; repeat the flag for several.
        #[arg(long = "scope", required = true, value_parser = parse_scope)]
        scopes: Vec<Scope>,
        /// The tenant (host application installation) whose users and runs the client sees.
        #[arg(long, default_value = "default")]
        tenant: String,
    },
    /// List clients with their scopes; keys are never shown.
    List,
    /// Revoke a client's key.
    Revoke { name: String },
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON lines when standard error (where logs go) is not a terminal, readable text when it is.
    Auto,
    Json,
    Pretty,
}

/// Every setting of the service.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Postgres connection URL; the database is created if it does not exist.
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        global = true,
        default_value = "postgres://postgres@127.0.0.1:5432/approval_resume",
        hide_default_value = true,
        hide_env_values = true
    )]
    pub database_url: Secret,

    /// Address and port to listen on.
    #[arg(
        long,
        env = "LISTEN_ADDR",
        value_name = "LISTEN_ADDR",
        global = true,
        default_value = "127.0.0.1:8080"
    )]
    pub listen_addr: SocketAddr,

    /// The service's privacy level for tool events: none, metadata, redacted or full. A run may only be stricter.
    #[arg(long, env = "PRIVACY_LEVEL", value_name = "PRIVACY_LEVEL", global = true, default_value = "metadata",
          value_parser = parse_privacy_level)]
    pub privacy_level: PrivacyLevel,

    /// Most database connections this instance holds.
    #[arg(long, env = "DATABASE_POOL_SIZE", value_name = "DATABASE_POOL_SIZE", global = true, default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_pool_size: u32,

    /// Milliseconds a request waits for a free connection before it is answered 503.
    #[arg(long, env = "DATABASE_ACQUIRE_TIMEOUT_MS", value_name = "DATABASE_ACQUIRE_TIMEOUT_MS", global = true,
          default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub database_acquire_timeout_ms: u64,

    /// Milliseconds Postgres lets one statement run (and wait for a lock) before cancelling it.
    #[arg(long, env = "DATABASE_STATEMENT_TIMEOUT_MS", value_name = "DATABASE_STATEMENT_TIMEOUT_MS", global = true,
          default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub database_statement_timeout_ms: u64,

    /// Milliseconds before a request is answered 503; its decision, if any, still completes in the background.
    #[arg(long, env = "REQUEST_TIMEOUT_MS", value_name = "REQUEST_TIMEOUT_MS", global = true, default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub request_timeout_ms: u64,

    /// Largest request body in bytes; larger ones are answered 413.
    #[arg(long, env = "MAX_BODY_BYTES", value_name = "MAX_BODY_BYTES", global = true, default_value_t = 8 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub max_body_bytes: u64,

    /// Seconds in-flight requests get to finish after SIGTERM or Ctrl-C.
    #[arg(long, env = "SHUTDOWN_GRACE_SECS", value_name = "SHUTDOWN_GRACE_SECS", global = true, default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace_secs: u64,

    /// Seconds between sweeps for approved turns whose instance stopped mid-way.
    #[arg(long, env = "RECOVERY_INTERVAL_SECS", value_name = "RECOVERY_INTERVAL_SECS", global = true,
          default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub recovery_interval_secs: u64,

    /// Milliseconds an approved turn's lease outlasts its longest executor timeout. If the instance running the
    /// turn dies, another instance takes the turn over once the lease has run out.
    #[arg(long, env = "RESUME_LEASE_MARGIN_MS", value_name = "RESUME_LEASE_MARGIN_MS", global = true,
          default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub resume_lease_margin_ms: u64,

    /// A TOML file configuring tool executors; without it every approved call is `not_permitted`.
    #[arg(long, env = "TOOLS_CONFIG", value_name = "TOOLS_CONFIG", global = true)]
    pub tools_config: Option<PathBuf>,

    /// Days to keep tool-event payloads and finished (cancelled or completed) runs. When set, `serve` purges
    /// older ones every PURGE_INTERVAL_SECS; unset, nothing is purged unless `purge --older-than-days` is run.
    #[arg(long, env = "RETENTION_DAYS", value_name = "RETENTION_DAYS", global = true,
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub retention_days: Option<u32>,

    /// Seconds between purges while RETENTION_DAYS is set.
    #[arg(long, env = "PURGE_INTERVAL_SECS", value_name = "PURGE_INTERVAL_SECS", global = true,
          default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(60..=604_800))]
    pub purge_interval_secs: u64,

    /// Milliseconds between this instance's polls for newly readable events while a feed reader or webhook
    /// subscription waits for them; an event committed on another instance is seen within one interval.
    #[arg(long, env = "EVENTS_POLL_INTERVAL_MS", value_name = "EVENTS_POLL_INTERVAL_MS", global = true,
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub events_poll_interval_ms: u64,

    /// Hours events are kept for the feed and webhooks, delivered or not (they are also deleted with their run).
    /// This bounds the backlog of a receiver that stays down.
    #[arg(long, env = "EVENT_RETENTION_HOURS", value_name = "EVENT_RETENTION_HOURS", global = true,
          default_value_t = 168, value_parser = clap::value_parser!(u64).range(1..=87_600))]
    pub event_retention_hours: u64,

    /// Most seconds a feed reader may ask to wait (`wait=`); must be below REQUEST_TIMEOUT_MS.
    #[arg(long, env = "FEED_MAX_WAIT_SECS", value_name = "FEED_MAX_WAIT_SECS", global = true,
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub feed_max_wait_secs: u64,

    /// Webhook subscriptions this instance delivers at once; 0: this instance delivers none.
    #[arg(long, env = "WEBHOOK_CONCURRENCY", value_name = "WEBHOOK_CONCURRENCY", global = true,
          default_value_t = 16, value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub webhook_concurrency: u64,

    /// Milliseconds one webhook request may take, connect to last byte.
    #[arg(long, env = "WEBHOOK_TIMEOUT_MS", value_name = "WEBHOOK_TIMEOUT_MS", global = true,
          default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub webhook_timeout_ms: u64,

    /// Milliseconds before the first retry of a failed webhook; each further failure doubles it (with jitter).
    #[arg(long, env = "WEBHOOK_BACKOFF_BASE_MS", value_name = "WEBHOOK_BACKOFF_BASE_MS", global = true,
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub webhook_backoff_base_ms: u64,

    /// Most seconds between retries of a failed webhook.
    #[arg(long, env = "WEBHOOK_BACKOFF_MAX_SECS", value_name = "WEBHOOK_BACKOFF_MAX_SECS", global = true,
          default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_backoff_max_secs: u64,

    /// Seconds a subscription's deliveries may keep failing before it is marked `failing`. It is still retried
    /// every WEBHOOK_BACKOFF_MAX_SECS, so a receiver that comes back gets every event kept.
    #[arg(long, env = "WEBHOOK_RETRY_WINDOW_SECS", value_name = "WEBHOOK_RETRY_WINDOW_SECS", global = true,
          default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub webhook_retry_window_secs: u64,

    /// Most bytes of a receiver's answer read.
    #[arg(long, env = "WEBHOOK_MAX_RESPONSE_BYTES", value_name = "WEBHOOK_MAX_RESPONSE_BYTES", global = true,
          default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(0..=16_777_216))]
    pub webhook_max_response_bytes: u64,

    /// Let webhooks reach loopback, link-local and private addresses. Off by default (server-side request
    /// forgery: a tenant's URL must not reach the service's own network); for tests and private deployments.
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", value_name = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
          global = true, default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_private_addresses: bool,

    /// Log format: auto, json or pretty.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_name = "LOG_FORMAT",
        global = true,
        default_value = "auto",
        value_enum
    )]
    pub log_format: LogFormat,

    /// Log filter in `tracing` syntax, e.g. `info` or `approval_resume=debug,info`.
    #[arg(
        long,
        env = "LOG_LEVEL",
        value_name = "LOG_LEVEL",
        global = true,
        default_value = "info,sqlx=warn"
    )]
    pub log_level: String,
}

/// A setting that is valid on its own but not together with others.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl Config {
    /// Checks the settings against each other: the database must give up before the HTTP layer does, so a request
    /// that times out never leaves a statement running behind it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.database_statement_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_STATEMENT_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    self.database_statement_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        if self.database_acquire_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_ACQUIRE_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    self.database_acquire_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        if self.feed_max_wait_secs * 1000 >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "FEED_MAX_WAIT_SECS",
                message: format!(
                    "{} seconds must be below REQUEST_TIMEOUT_MS ({})",
                    self.feed_max_wait_secs, self.request_timeout_ms
                ),
            });
        }
        if self.webhook_backoff_base_ms > self.webhook_backoff_max_secs * 1000 {
            return Err(ConfigError {
                variable: "WEBHOOK_BACKOFF_BASE_MS",
                message: format!(
                    "{} must not be above WEBHOOK_BACKOFF_MAX_SECS ({} s)",
                    self.webhook_backoff_base_ms, self.webhook_backoff_max_secs
                ),
            });
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level).map_err(|error| ConfigError {
            variable: "LOG_LEVEL",
            message: error.to_string(),
        })?;
        Ok(())
    }

    pub fn statement_timeout(&self) -> Duration {
        Duration::from_millis(self.database_statement_timeout_ms)
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.database_acquire_timeout_ms)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
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
        }
    }
}

fn parse_privacy_level(text: &str) -> Result<PrivacyLevel, String> {
    PrivacyLevel::parse(text)
        .ok_or_else(|| format!("{text:?} is not one of none, metadata, redacted, full"))
}

fn parse_scope(text: &str) -> Result<Scope, String> {
    Scope::parse(text).ok_or_else(|| {
        let all: Vec<&str> = Scope::ALL.iter().map(|scope| scope.as_str()).collect();
        format!("{text:?} is not one of {}", all.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("approval-resume").chain(args.iter().copied()))
    }

    #[test]
    fn an_invalid_privacy_level_is_refused_naming_the_variable() {
        let error = parse(&["--privacy-level", "secret"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("PRIVACY_LEVEL"), "{error}");
    }

    #[test]
    fn a_statement_timeout_not_below_the_request_timeout_is_refused() {
        let cli = parse(&[
            "--database-statement-timeout-ms",
            "9000",
            "--request-timeout-ms",
            "9000",
        ])
        .unwrap();
        let error = cli.config.validate().unwrap_err();
        assert_eq!(error.variable, "DATABASE_STATEMENT_TIMEOUT_MS");
    }

    #[test]
    fn a_feed_wait_not_below_the_request_timeout_is_refused() {
        let cli = parse(&[
            "--feed-max-wait-secs",
            "30",
            "--request-timeout-ms",
            "30000",
        ])
        .unwrap();
        assert_eq!(
            cli.config.validate().unwrap_err().variable,
            "FEED_MAX_WAIT_SECS"
        );
        let cli = parse(&[
            "--feed-max-wait-secs",
            "29",
            "--request-timeout-ms",
            "30000",
        ])
        .unwrap();
        assert!(cli.config.validate().is_ok());
    }

    #[test]
    fn private_webhook_addresses_are_refused_unless_allowed() {
        let cli = parse(&[]).unwrap();
        assert!(!cli.config.webhook_settings().limits.allow_private);
        let cli = parse(&["--webhook-allow-private-addresses", "true"]).unwrap();
        assert!(cli.config.webhook_settings().limits.allow_private);
    }

    #[test]
    fn the_help_never_shows_the_database_url_from_the_environment() {
        use clap::CommandFactory;
        let command = Cli::command();
        let url = command
            .get_arguments()
            .find(|arg| arg.get_id() == "database_url")
            .expect("the DATABASE_URL setting");
        assert!(url.is_hide_env_values_set() && url.is_hide_default_value_set());
    }

    #[test]
    fn the_database_url_is_never_printed() {
        let cli = parse(&["--database-url", "postgres://u:hunter2@h/db"]).unwrap();
        assert!(!format!("{cli:?}").contains("hunter2"));
    }

    #[test]
    fn clients_add_takes_repeated_scopes() {
        let cli = parse(&[
            "clients",
            "add",
            "chat",
            "--scope",
            "runs:read",
            "--scope",
            "decisions:write",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Clients(ClientsCommand::Add { scopes, tenant, .. })) => {
                assert_eq!(scopes, vec![Scope::RunsRead, Scope::DecisionsWrite]);
                assert_eq!(tenant, "default");
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
