//! The command line and the configuration: every setting is an environment variable and also a flag.
//!
//! Values are parsed once, at start-up; an invalid value stops the start with a message that names the variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::domain::limits::{self, WorkLimits};
use crate::domain::scopes::Scope;
use crate::domain::tokens::PrivacyLevel;
use crate::events::FeedCaps;
use crate::events::webhooks::Settings as WebhookSettings;
use crate::events::webhooks::deliver::Limits as DeliveryLimits;
use crate::events::webhooks::subscription::Policy as WebhookPolicy;
use crate::listen::ConnectionLimits;
use crate::sealing::Sealer;

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
    about = "Resumes AI-agent runs suspended for human approval.",
    after_help = "Without a subcommand, serves (as `serve`) with the settings above. Every setting is also an \
                  environment variable, named in brackets; each subcommand's --help lists the settings it uses."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve`'s settings, taken here too because serving is what the binary does without a subcommand.
    #[command(flatten)]
    pub serve: Config,
}

impl Cli {
    /// The subcommand to run; none given means `serve` with the top-level settings.
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Serve(self.serve))
    }
}

/// Each subcommand carries exactly the settings it uses, so that its `--help` shows those and nothing else.
// One `Command` is parsed once at start-up and moved into the subcommand it names: the size of its largest variant
// (`serve`'s settings) costs nothing worth boxing it for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service (the default).
    Serve(Config),
    /// Apply the database migrations and exit.
    Migrate(DatabaseCommand),
    /// Manage API clients and their keys.
    #[command(subcommand)]
    Clients(ClientsCommand),
    /// Delete tool-event payloads and finished runs older than the retention period, and say what was removed.
    Purge {
        /// Days to keep.
        #[arg(long, env = "RETENTION_DAYS", value_name = "DAYS",
              value_parser = clap::value_parser!(u32).range(1..=36_500))]
        older_than_days: Option<u32>,
        /// Hours to keep events, delivered or not.
        #[arg(long, env = "EVENT_RETENTION_HOURS", value_name = "HOURS", default_value_t = 168,
              value_parser = clap::value_parser!(u64).range(1..=87_600))]
        event_retention_hours: u64,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Follow the tenant's events over HTTP (`GET /v1/events`) and print each as a JSON line; needs no database,
    /// only the service's URL and a key with `events:read`.
    Watch(WatchArgs),
    /// Manage webhook subscriptions.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Encryption at rest: count stored values per key, or re-encrypt them under the first key.
    #[command(subcommand)]
    Keys(KeysCommand),
}

/// `keys …` (DESIGN.md §11). Both read ENCRYPTION_KEYS as `serve` does.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print, per encrypted column, how many values are stored in clear and under each key id.
    Status {
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Re-encrypt every value that is in clear or under another key under the first key of ENCRYPTION_KEYS, in
    /// batches of short transactions, while the service serves. Safe to stop and run again: it resumes where it
    /// stopped.
    Rotate {
        /// Rows per batch (each batch is one transaction).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch_size: i64,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

impl KeysCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            KeysCommand::Status { common, .. } | KeysCommand::Rotate { common, .. } => common,
        }
    }

    pub fn encryption(&self) -> &EncryptionConfig {
        match self {
            KeysCommand::Status { encryption, .. } | KeysCommand::Rotate { encryption, .. } => {
                encryption
            }
        }
    }
}

/// The keys of encryption at rest (DESIGN.md §11).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Encryption at rest")]
pub struct EncryptionConfig {
    /// Keys that encrypt transcripts, arguments, results and tool-event payloads at rest: `id:base64(32 bytes)`,
    /// comma-separated; the first encrypts, every one decrypts. Unset: stored in clear (and said at start-up).
    #[arg(
        long,
        env = "ENCRYPTION_KEYS",
        value_name = "ENCRYPTION_KEYS",
        hide_env_values = true
    )]
    pub encryption_keys: Option<Secret>,
}

impl EncryptionConfig {
    /// The key ring; refused naming the variable and the entry, never the key.
    pub fn sealer(&self) -> Result<Sealer, ConfigError> {
        let keys = self.encryption_keys.as_ref().map_or("", Secret::expose);
        Sealer::parse(keys).map_err(|error| ConfigError {
            variable: "ENCRYPTION_KEYS",
            message: error.to_string(),
        })
    }
}

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
        #[command(flatten)]
        policy: WebhookAddPolicy,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List subscriptions with their state and backlog; secrets are never shown.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Remove a subscription.
    Remove {
        id: uuid::Uuid,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Give a subscription a new signing secret and print it, once; the old one keeps signing beside it for the
    /// overlap, then retires.
    RotateSecret {
        id: uuid::Uuid,
        /// Seconds the old secret keeps signing beside the new one (0: it retires at once).
        #[arg(long, env = "WEBHOOK_SECRET_OVERLAP_SECS", value_name = "WEBHOOK_SECRET_OVERLAP_SECS",
              default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(0..=2_592_000))]
        overlap_secs: u64,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

/// What `webhooks add` checks as the API does (DESIGN.md §17): the same variables as `serve`.
#[derive(Debug, Clone, Args)]
pub struct WebhookAddPolicy {
    /// Most webhook subscriptions one tenant may have.
    #[arg(long, env = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT", value_name = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT",
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub webhook_max_subscriptions_per_tenant: u64,
    /// Let the URL's host be or resolve to loopback, link-local and private addresses.
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", value_name = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
          default_value_t = false, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub webhook_allow_private_addresses: bool,
}

impl WebhooksCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            WebhooksCommand::Add { common, .. }
            | WebhooksCommand::List { common, .. }
            | WebhooksCommand::Remove { common, .. }
            | WebhooksCommand::RotateSecret { common, .. } => common,
        }
    }

    /// The keys a new or rotated secret is sealed with; `None` for the commands that store no secret.
    pub fn encryption(&self) -> Option<&EncryptionConfig> {
        match self {
            WebhooksCommand::Add { encryption, .. }
            | WebhooksCommand::RotateSecret { encryption, .. } => Some(encryption),
            WebhooksCommand::List { .. } | WebhooksCommand::Remove { .. } => None,
        }
    }
}

impl Command {
    /// The logging settings of whichever subcommand this is.
    pub fn log(&self) -> &LogConfig {
        match self {
            Command::Serve(config) => &config.log,
            Command::Migrate(common) | Command::Purge { common, .. } => &common.log,
            Command::Watch(watch) => &watch.log,
            Command::Clients(command) => &command.common().log,
            Command::Webhooks(command) => &command.common().log,
            Command::Keys(command) => &command.common().log,
        }
    }

    /// The database settings of whichever subcommand this is; `watch` has none (it reads the feed over HTTP).
    pub fn database(&self) -> Option<&DatabaseConfig> {
        match self {
            Command::Serve(config) => Some(&config.database),
            Command::Migrate(common) | Command::Purge { common, .. } => Some(&common.database),
            Command::Clients(command) => Some(&command.common().database),
            Command::Webhooks(command) => Some(&command.common().database),
            Command::Keys(command) => Some(&command.common().database),
            Command::Watch(_) => None,
        }
    }

    /// Checks the settings against each other, naming the variable at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.log().validate()?;
        if let Some(database) = self.database() {
            database.validate()?;
        }
        match self {
            Command::Serve(config) => config.validate(),
            Command::Keys(command) => command.encryption().sealer().map(drop),
            Command::Webhooks(command) => command
                .encryption()
                .map_or(Ok(()), |encryption| encryption.sealer().map(drop)),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Create a client and print its key, once.
    Add {
        /// A unique name: letters, digits, `_`, `.`, `-`.
        name: String,
        /// A scope the client holds; repeat the flag for several.
        #[arg(long = "scope", required = true, value_name = "SCOPE", value_parser = scope_parser())]
        scopes: Vec<Scope>,
        /// The tenant (host application installation) whose users and runs the client sees.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// A web origin (`https://chat.example.com`) whose pages may call the routes a decision token may use;
        /// repeat the flag for several.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Replace the web origins a client allows (none given: no origin).
    SetOrigins {
        name: String,
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List clients with their scopes; keys are never shown.
    List {
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Revoke a client's key.
    Revoke {
        name: String,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Manage the Ed25519 public keys a client's decision tokens are signed with.
    #[command(subcommand, name = "token-key")]
    TokenKey(TokenKeyCommand),
}

/// `clients token-key …`: several keys may be live at once, so a key is rotated by adding the next one, moving the
/// host's signer to it, and retiring the old one once its last token has expired (15 minutes at most).
#[derive(Debug, Subcommand)]
pub enum TokenKeyCommand {
    /// Register a public key for a client's decision tokens under a `kid`.
    Add {
        /// The client whose backend signs the tokens (their `iss`).
        name: String,
        /// The key id the tokens name in their header: letters, digits, `_`, `.`, `-`.
        #[arg(long)]
        kid: String,
        /// A file with the Ed25519 public key: PEM (`-----BEGIN PUBLIC KEY-----`, as `openssl pkey -pubout`
        /// writes it) or its 32 bytes in base64 (as libsodium gives them).
        #[arg(long, value_name = "FILE")]
        public_key: PathBuf,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Retire a key: tokens signed with it are refused from now on.
    Retire {
        name: String,
        #[arg(long)]
        kid: String,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List every client's token keys, retired ones included.
    List {
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

impl ClientsCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            ClientsCommand::Add { common, .. }
            | ClientsCommand::List { common }
            | ClientsCommand::Revoke { common, .. }
            | ClientsCommand::SetOrigins { common, .. } => common,
            ClientsCommand::TokenKey(
                TokenKeyCommand::Add { common, .. }
                | TokenKeyCommand::Retire { common, .. }
                | TokenKeyCommand::List { common },
            ) => common,
        }
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON lines when standard error (where logs go) is not a terminal, readable text when it is.
    Auto,
    Json,
    Pretty,
}

/// The settings of a subcommand that only works on the database: the connection and logging.
#[derive(Debug, Clone, Args)]
pub struct DatabaseCommand {
    #[command(flatten)]
    pub database: DatabaseConfig,
    #[command(flatten)]
    pub log: LogConfig,
}

/// How to reach Postgres, and how long to wait for it.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Database")]
pub struct DatabaseConfig {
    /// Postgres connection URL; the database is created if it does not exist. May name several servers for a
    /// failover, as libpq reads it: `postgres://h1:5432,h2:5432/db?target_session_attrs=read-write` tries them in
    /// order and keeps the first that accepts writes, moving to another when it stops accepting them.
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/approval_resume",
        hide_default_value = true,
        hide_env_values = true
    )]
    pub database_url: Secret,

    /// A direct Postgres URL (not through a pooler) for the migrations and for creating the database; defaults to
    /// DATABASE_URL. Required with DATABASE_PGBOUNCER: the migrations hold a session-level advisory lock.
    #[arg(
        long,
        env = "DATABASE_MIGRATION_URL",
        value_name = "DATABASE_MIGRATION_URL",
        hide_env_values = true
    )]
    pub database_migration_url: Option<Secret>,

    /// DATABASE_URL leads to a transaction-pooling PgBouncer (`pool_mode = transaction`): statements are unnamed
    /// (no prepared statement outlives its transaction), each statement outside a transaction gets one of its own,
    /// and the timeouts are set per transaction (`SET LOCAL`) instead of as startup parameters.
    #[arg(long, env = "DATABASE_PGBOUNCER", value_name = "DATABASE_PGBOUNCER", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub database_pgbouncer: bool,

    /// With several servers in DATABASE_URL, milliseconds between checks that the one in use still accepts
    /// writes; a connection refused by a read-only server triggers a check at once.
    #[arg(long, env = "DATABASE_PRIMARY_CHECK_MS", value_name = "DATABASE_PRIMARY_CHECK_MS",
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(50..=600_000))]
    pub database_primary_check_ms: u64,

    /// Most database connections this instance holds.
    #[arg(long, env = "DATABASE_POOL_SIZE", value_name = "DATABASE_POOL_SIZE", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_pool_size: u32,

    /// Milliseconds a request waits for a free connection before it is answered 503.
    #[arg(long, env = "DATABASE_ACQUIRE_TIMEOUT_MS", value_name = "DATABASE_ACQUIRE_TIMEOUT_MS",
          default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub database_acquire_timeout_ms: u64,

    /// Milliseconds Postgres lets one statement run (and wait for a lock) before cancelling it.
    #[arg(long, env = "DATABASE_STATEMENT_TIMEOUT_MS", value_name = "DATABASE_STATEMENT_TIMEOUT_MS",
          default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub database_statement_timeout_ms: u64,
}

impl DatabaseConfig {
    /// Checks the URLs (several hosts are read here, not by sqlx) and that PgBouncer comes with a direct URL.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::storage::hosts::parse(self.database_url.expose()).map_err(|error| ConfigError {
            variable: "DATABASE_URL",
            message: error.to_string(),
        })?;
        if let Some(url) = &self.database_migration_url {
            crate::storage::hosts::parse(url.expose()).map_err(|error| ConfigError {
                variable: "DATABASE_MIGRATION_URL",
                message: error.to_string(),
            })?;
        }
        if self.database_pgbouncer && self.database_migration_url.is_none() {
            return Err(ConfigError {
                variable: "DATABASE_MIGRATION_URL",
                message: "DATABASE_PGBOUNCER needs a direct URL for the migrations, which hold a session-level lock"
                    .into(),
            });
        }
        Ok(())
    }

    /// How the pool reaches Postgres.
    pub fn pool_settings(&self) -> crate::storage::PoolSettings {
        crate::storage::PoolSettings {
            database_url: self.database_url.expose().to_owned(),
            migration_url: self
                .database_migration_url
                .as_ref()
                .map(|url| url.expose().to_owned()),
            pgbouncer: self.database_pgbouncer,
            max_connections: self.database_pool_size,
            acquire_timeout: self.acquire_timeout(),
            statement_timeout: self.statement_timeout(),
            primary_check: Duration::from_millis(self.database_primary_check_ms),
        }
    }

    pub fn statement_timeout(&self) -> Duration {
        Duration::from_millis(self.database_statement_timeout_ms)
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.database_acquire_timeout_ms)
    }
}

/// How the process logs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogConfig {
    /// Log format: auto, json or pretty.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_name = "LOG_FORMAT",
        default_value = "auto",
        value_enum
    )]
    pub log_format: LogFormat,

    /// Log filter in `tracing` syntax, e.g. `info` or `approval_resume=debug,info`.
    #[arg(
        long,
        env = "LOG_LEVEL",
        value_name = "LOG_LEVEL",
        default_value = "info,sqlx=warn"
    )]
    pub log_level: String,
}

impl LogConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        tracing_subscriber::EnvFilter::try_new(&self.log_level).map_err(|error| ConfigError {
            variable: "LOG_LEVEL",
            message: error.to_string(),
        })?;
        Ok(())
    }
}

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

    /// Milliseconds between sweeps for turns whose `expires_at` has passed.
    #[arg(long, env = "EXPIRY_SWEEP_INTERVAL_MS", value_name = "EXPIRY_SWEEP_INTERVAL_MS",
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub expiry_sweep_interval_ms: u64,

    /// Milliseconds an approved turn's lease outlasts its longest executor timeout. If the instance running the
    /// turn dies, another instance takes the turn over once the lease has run out.
    #[arg(long, env = "RESUME_LEASE_MARGIN_MS", value_name = "RESUME_LEASE_MARGIN_MS",
          default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub resume_lease_margin_ms: u64,

    /// Once four denies are being written, write the next ones together in one statement
    /// (`src/resume/denial_writer.rs`): more denies per second at saturation, a longer tail below it (BENCHMARKS.md).
    /// `false` (the default) writes each deny by a statement of its own, addressed to its run alone, as tables
    /// distributed by run id need (DESIGN.md §12).
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
    pub encryption: EncryptionConfig,

    #[command(flatten)]
    pub log: LogConfig,
}

/// How events reach consumers (DESIGN.md §10): the feed and webhooks.
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
    /// are answered 429 `too_many_waiting_readers` with `Retry-After` (DESIGN.md §17). At most FEED_MAX_WAITERS.
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
    /// What the API lets a tenant subscribe (DESIGN.md §17).
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
        let database = &self.database;
        if database.database_statement_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_STATEMENT_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    database.database_statement_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        if database.database_acquire_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "DATABASE_ACQUIRE_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({})",
                    database.database_acquire_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        let events = &self.events;
        if events.webhook_backoff_base_ms > events.webhook_backoff_max_secs * 1000 {
            return Err(ConfigError {
                variable: "WEBHOOK_BACKOFF_BASE_MS",
                message: format!(
                    "{} must not be above WEBHOOK_BACKOFF_MAX_SECS ({} s)",
                    events.webhook_backoff_base_ms, events.webhook_backoff_max_secs
                ),
            });
        }
        if events.feed_max_waiters_per_client > events.feed_max_waiters {
            return Err(ConfigError {
                variable: "FEED_MAX_WAITERS_PER_CLIENT",
                message: format!(
                    "{} must not be above FEED_MAX_WAITERS ({})",
                    events.feed_max_waiters_per_client, events.feed_max_waiters
                ),
            });
        }
        self.encryption.sealer()?;
        if self.body_read_timeout_ms >= self.request_timeout_ms {
            return Err(ConfigError {
                variable: "BODY_READ_TIMEOUT_MS",
                message: format!(
                    "{} must be below REQUEST_TIMEOUT_MS ({}), or a slow body would be answered 503 instead of 408",
                    self.body_read_timeout_ms, self.request_timeout_ms
                ),
            });
        }
        Ok(())
    }

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
            default_approval_ttl_secs: self.approval_ttl_secs,
        }
    }
}

fn parse_privacy_level(text: &str) -> Result<PrivacyLevel, String> {
    PrivacyLevel::parse(text)
        .ok_or_else(|| format!("{text:?} is not one of none, metadata, redacted, full"))
}

/// The scopes as clap's possible values, each with what it allows, so that `clients add --help` lists them.
fn scope_parser() -> impl clap::builder::TypedValueParser<Value = Scope> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        Scope::ALL.map(|scope| PossibleValue::new(scope.as_str()).help(scope.allows())),
    )
    .try_map(|name| Scope::parse(&name).ok_or(format!("{name:?} is not a scope")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("approval-resume").chain(args.iter().copied()))
    }

    #[test]
    fn an_invalid_privacy_level_is_refused_naming_the_variable() {
        let error = parse(&["serve", "--privacy-level", "secret"])
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
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "DATABASE_STATEMENT_TIMEOUT_MS");
    }

    #[test]
    fn a_body_timeout_not_below_the_request_timeout_is_refused() {
        let cli = parse(&[
            "--body-read-timeout-ms",
            "30000",
            "--request-timeout-ms",
            "30000",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "BODY_READ_TIMEOUT_MS");
    }

    #[test]
    fn a_client_s_cap_on_feed_readers_above_the_instance_s_is_refused() {
        let cli = parse(&[
            "--feed-max-waiters-per-client",
            "100",
            "--feed-max-waiters",
            "99",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "FEED_MAX_WAITERS_PER_CLIENT");
        let defaults = parse(&[]).unwrap().into_command();
        assert!(defaults.validate().is_ok());
    }

    /// Every command and subcommand, by its path of names (`["clients", "add"]`), with its clap definition.
    fn every_command() -> Vec<(Vec<String>, clap::Command)> {
        fn walk(
            path: Vec<String>,
            command: clap::Command,
            into: &mut Vec<(Vec<String>, clap::Command)>,
        ) {
            for sub in command.get_subcommands() {
                let mut sub_path = path.clone();
                sub_path.push(sub.get_name().to_owned());
                walk(sub_path, sub.clone(), into);
            }
            into.push((path, command));
        }
        use clap::CommandFactory;
        let mut all = Vec::new();
        let mut root = Cli::command();
        root.build();
        walk(Vec::new(), root, &mut all);
        all
    }

    /// The environment variables a command's help names.
    fn variables(command: &clap::Command) -> Vec<String> {
        let mut names: Vec<String> = command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
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

    #[test]
    fn the_help_never_shows_the_database_url_from_the_environment() {
        for (path, command) in every_command() {
            if let Some(url) = command
                .get_arguments()
                .find(|arg| arg.get_id() == "database_url")
            {
                assert!(
                    url.is_hide_env_values_set() && url.is_hide_default_value_set(),
                    "{path:?}"
                );
            }
        }
    }

    #[test]
    fn each_subcommand_takes_only_the_settings_it_uses() {
        let database = [
            "DATABASE_ACQUIRE_TIMEOUT_MS",
            "DATABASE_MIGRATION_URL",
            "DATABASE_PGBOUNCER",
            "DATABASE_POOL_SIZE",
            "DATABASE_PRIMARY_CHECK_MS",
            "DATABASE_STATEMENT_TIMEOUT_MS",
            "DATABASE_URL",
            "LOG_FORMAT",
            "LOG_LEVEL",
        ];
        let serve_only = [
            "LISTEN_ADDR",
            "PRIVACY_LEVEL",
            "TOOLS_CONFIG",
            "REQUEST_TIMEOUT_MS",
            "HEADER_READ_TIMEOUT_MS",
            "BODY_READ_TIMEOUT_MS",
            "MAX_CONNECTIONS",
        ];
        // Serve and the `keys` subcommands, nothing else.
        let encryption = "ENCRYPTION_KEYS";
        let mut checked = 0;
        // clap's own `help` subcommands take no settings.
        let commands = every_command()
            .into_iter()
            .filter(|(path, _)| !path.iter().any(|name| name == "help"));
        for (path, command) in commands {
            let names = variables(&command);
            let path = path.join(" ");
            match path.as_str() {
                "" | "serve" => {
                    for name in database.iter().chain(&serve_only).chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                }
                "keys status" | "keys rotate" => {
                    for name in database.iter().chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                // They store a secret, sealed with the keys `serve` uses.
                "webhooks add" | "webhooks rotate-secret" => {
                    for name in database.iter().chain([&encryption]) {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                "clients" | "clients token-key" | "webhooks" | "keys" => {
                    assert!(names.is_empty(), "{path}: {names:?}")
                }
                // It follows the feed over HTTP: no database, no service settings.
                "watch" => {
                    for name in database.iter().take(4).chain(&serve_only) {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                }
                _ => {
                    assert!(
                        !names.iter().any(|n| n == encryption),
                        "{path} takes {encryption}"
                    );
                    for name in &serve_only {
                        assert!(!names.iter().any(|n| n == name), "{path} takes {name}");
                    }
                    for name in &database {
                        assert!(names.iter().any(|n| n == name), "{path}: {name} missing");
                    }
                }
            }
            checked += 1;
        }
        assert!(checked >= 8, "only {checked} commands seen");
    }

    #[test]
    fn pgbouncer_without_a_direct_migration_url_is_refused_for_every_subcommand() {
        for args in [
            &["serve", "--database-pgbouncer", "true"][..],
            &["clients", "list", "--database-pgbouncer", "true"],
        ] {
            let error = parse(args).unwrap().into_command().validate().unwrap_err();
            assert_eq!(error.variable, "DATABASE_MIGRATION_URL", "{args:?}");
        }
        let cli = parse(&[
            "migrate",
            "--database-pgbouncer",
            "true",
            "--database-migration-url",
            "postgres://postgres@127.0.0.1:5432/app",
        ])
        .unwrap();
        assert!(cli.into_command().validate().is_ok());
    }

    #[test]
    fn an_unreadable_host_list_is_refused_naming_the_variable() {
        let cli = parse(&[
            "migrate",
            "--database-url",
            "postgres://u:hunter2@h1,,h2/db",
        ])
        .unwrap();
        let error = cli.into_command().validate().unwrap_err();
        assert_eq!(error.variable, "DATABASE_URL");
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn a_malformed_encryption_key_stops_serve_and_keys_naming_the_variable_not_the_key() {
        // 31 bytes: one short.
        let short = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==";
        for args in [
            &["serve", "--encryption-keys", short][..],
            &["keys", "status", "--encryption-keys", short],
            &["keys", "rotate", "--encryption-keys", "k1"],
        ] {
            let error = parse(args).unwrap().into_command().validate().unwrap_err();
            assert_eq!(error.variable, "ENCRYPTION_KEYS", "{args:?}");
            assert!(!error.to_string().contains("AAEC"), "{error}");
        }
        let valid = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let cli = parse(&["serve", "--encryption-keys", valid]).unwrap();
        assert!(!format!("{cli:?}").contains("AAEC"));
        assert!(cli.into_command().validate().is_ok());
    }

    #[test]
    fn clients_add_help_lists_every_scope_with_what_it_allows() {
        use clap::CommandFactory;
        let mut command = Cli::command();
        let help = command
            .find_subcommand_mut("clients")
            .and_then(|clients| clients.find_subcommand_mut("add"))
            .expect("clients add")
            .render_long_help()
            .to_string();
        for scope in Scope::ALL {
            let listed = help.lines().any(|line| {
                line.trim_start()
                    .strip_prefix(&format!("- {}:", scope.as_str()))
                    .is_some_and(|rest| rest.trim() == scope.allows())
            });
            assert!(
                listed,
                "{} not listed with what it allows:\n{help}",
                scope.as_str()
            );
        }
        assert!(!help.contains("LISTEN_ADDR"), "{help}");
    }

    #[test]
    fn an_unknown_scope_is_refused_naming_the_known_ones() {
        let error = parse(&["clients", "add", "chat", "--scope", "runs:delete"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("decisions:anonymous"), "{error}");
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
        match cli.into_command() {
            Command::Clients(ClientsCommand::Add { scopes, tenant, .. }) => {
                assert_eq!(scopes, vec![Scope::RunsRead, Scope::DecisionsWrite]);
                assert_eq!(tenant, "default");
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
