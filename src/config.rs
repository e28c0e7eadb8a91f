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
    /// Print every resumed-run notification (the `approval_resume_run_resumed` channel) as a JSON line.
    Watch,
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
    /// Postgres connection URL; the database is created if it does not exist. May name several servers for a
    /// failover, as libpq reads it: `postgres://h1:5432,h2:5432/db?target_session_attrs=read-write` tries them in
    /// order and keeps the first that accepts writes, moving to another when it stops accepting them.
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

    /// A direct Postgres URL (not through a pooler) for the migrations and for creating the database; defaults to
    /// DATABASE_URL. Required with DATABASE_PGBOUNCER: the migrations hold a session-level advisory lock.
    #[arg(
        long,
        env = "DATABASE_MIGRATION_URL",
        value_name = "DATABASE_MIGRATION_URL",
        global = true,
        hide_env_values = true
    )]
    pub database_migration_url: Option<Secret>,

    /// DATABASE_URL leads to a transaction-pooling PgBouncer (`pool_mode = transaction`): statements are unnamed
    /// (no prepared statement outlives its transaction), each statement outside a transaction gets one of its own,
    /// and the timeouts are set per transaction (`SET LOCAL`) instead of as startup parameters.
    #[arg(long, env = "DATABASE_PGBOUNCER", value_name = "DATABASE_PGBOUNCER", global = true,
          default_value_t = false, action = clap::ArgAction::Set)]
    pub database_pgbouncer: bool,

    /// With several servers in DATABASE_URL, milliseconds between checks that the one in use still accepts
    /// writes; a connection refused by a read-only server triggers a check at once.
    #[arg(long, env = "DATABASE_PRIMARY_CHECK_MS", value_name = "DATABASE_PRIMARY_CHECK_MS", global = true,
          default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(50..=600_000))]
    pub database_primary_check_ms: u64,

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

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
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
    fn pgbouncer_without_a_direct_migration_url_is_refused() {
        let cli = parse(&["--database-pgbouncer", "true"]).unwrap();
        assert_eq!(
            cli.config.validate().unwrap_err().variable,
            "DATABASE_MIGRATION_URL"
        );
        let cli = parse(&[
            "--database-pgbouncer",
            "true",
            "--database-migration-url",
            "postgres://postgres@127.0.0.1:5432/app",
        ])
        .unwrap();
        assert!(cli.config.validate().is_ok());
    }

    #[test]
    fn an_unreadable_host_list_is_refused_naming_the_variable() {
        let cli = parse(&["--database-url", "postgres://u:hunter2@h1,,h2/db"]).unwrap();
        let error = cli.config.validate().unwrap_err();
        assert_eq!(error.variable, "DATABASE_URL");
        assert!(!error.to_string().contains("hunter2"), "{error}");
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
