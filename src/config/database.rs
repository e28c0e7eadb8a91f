//! How every subcommand that works on the database reaches Postgres, and the checks of those settings.

use std::time::Duration;

use clap::Args;

use super::{ConfigError, LogConfig};
use crate::domain::secret::Secret;

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
    pub fn pool_settings(&self) -> crate::storage::connect::PoolSettings {
        crate::storage::connect::PoolSettings {
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
#[cfg(test)]
mod tests {
    use crate::config::testing::{every_command, parse};

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
    fn the_database_url_is_never_printed() {
        let cli = parse(&["--database-url", "postgres://u:hunter2@h/db"]).unwrap();
        assert!(!format!("{cli:?}").contains("hunter2"));
    }
}
