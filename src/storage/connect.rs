//! How the service reaches Postgres: the pool's settings, one or several servers (`hosts`, `primary`), directly
//! or through a transaction pooler (`database`, `sql`), and the migrations over a direct connection of their own.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};

use super::database::Database;
use super::primary::Primary;
use super::{MIGRATOR, StorageError, hosts, is_unique_violation, sql};

/// How the pool talks to Postgres.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// One server, or several for a failover (`hosts`).
    pub database_url: String,
    /// A direct URL for the migrations and for creating the database; `database_url` when `None`.
    pub migration_url: Option<String>,
    /// A transaction pooler (PgBouncer, `pool_mode = transaction`) is in front: see `database` and `sql`.
    pub pgbouncer: bool,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// Postgres cancels any statement that runs longer, so the database gives up before the HTTP layer does.
    pub statement_timeout: Duration,
    /// With several servers, how often the follower checks that the current one still accepts writes.
    pub primary_check: Duration,
}

impl PoolSettings {
    fn migration_url(&self) -> &str {
        self.migration_url.as_deref().unwrap_or(&self.database_url)
    }

    /// The settings each transaction or session carries. `idle_in_transaction_session_timeout`: if a connection
    /// were ever left inside a transaction (a cancelled `BEGIN`, see transact-rs/sqlx#4393), Postgres itself ends
    /// it instead of letting it hold locks. `jit` off: no statement of this service is long enough to gain from
    /// compiling, and the webhook claim over a large events table crossed `jit_above_cost` and spent more time
    /// compiling than running (docs/operations.md). Behind a pooler these are `set local` in each transaction,
    /// so they never reach another client's session.
    fn session_settings(&self) -> [(&'static str, String); 4] {
        let statement_ms = self.statement_timeout.as_millis().to_string();
        let idle_ms = (self.statement_timeout.as_millis() * 2)
            .max(1000)
            .to_string();
        [
            ("statement_timeout", statement_ms.clone()),
            ("lock_timeout", statement_ms),
            ("idle_in_transaction_session_timeout", idle_ms),
            ("jit", "off".to_owned()),
        ]
    }
}

/// Opens the pool. Lazily: the service starts, and answers 503, while no server is reachable.
pub async fn connect(settings: &PoolSettings) -> Result<Database, StorageError> {
    let hosts = hosts::parse(&settings.database_url)
        .map_err(|error| StorageError::Config(format!("DATABASE_URL: {error}")))?;
    sql::use_named_statements(!settings.pgbouncer);
    let session_settings = settings.session_settings();
    let servers: Vec<PgConnectOptions> = hosts
        .servers
        .into_iter()
        .map(|server| {
            let server = server.application_name("approval-resume");
            if settings.pgbouncer {
                // PgBouncer refuses unknown startup parameters such as `options`; `Database` sets the timeouts
                // and `jit` per transaction instead, and `extra_float_digits` (sqlx's default, which PgBouncer
                // accepts only when told to ignore it) is left at the server's: no column of this schema is a float.
                // No statement is cached: they are all unnamed (`sql`).
                server.statement_cache_capacity(0).extra_float_digits(None)
            } else {
                server.options(
                    session_settings
                        .iter()
                        .map(|(name, value)| (*name, value.as_str())),
                )
            }
        })
        .collect();
    // No ping before each acquire: sqlx already pings every connection when it is released and closes a broken
    // one, so the ping on acquire only catches a connection that died while idle (a restarted or terminated
    // backend), at the cost of one round trip on every request. Such a request is answered 503 and retried.
    let options = PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .test_before_acquire(false);
    let pool = if hosts.read_write {
        let primary = Primary::new(servers);
        // At start, the first server that accepts writes; when none does yet, the first, until the follower finds one.
        let first = primary.choose().await.unwrap_or_else(|| primary.current());
        let admitting = primary.clone();
        let acquiring = primary.clone();
        let pool = options
            .after_connect(move |connection, _| {
                let primary = admitting.clone();
                Box::pin(async move { primary.admit(connection).await })
            })
            .before_acquire(move |_, meta| {
                let current = acquiring.is_current(meta.age);
                Box::pin(async move { Ok(current) })
            })
            .connect_lazy_with(first);
        primary.attach(pool.clone());
        primary.spawn_follower(settings.primary_check);
        pool
    } else {
        let server = servers
            .into_iter()
            .next()
            .ok_or_else(|| StorageError::Config("DATABASE_URL names no server".into()))?;
        options.connect_lazy_with(server)
    };
    Ok(if settings.pgbouncer {
        Database::behind_pooler(pool, &session_settings)
    } else {
        Database::direct(pool)
    })
}

/// Creates the database when it does not exist and runs the embedded migrations, over a connection of their own
/// to the migration URL (a direct one: sqlx's migrator holds a session-level advisory lock, so that several
/// instances starting at once apply each migration once, and a transaction pooler does not keep sessions).
pub async fn migrate(settings: &PoolSettings) -> Result<(), StorageError> {
    let hosts = hosts::parse(settings.migration_url())
        .map_err(|error| StorageError::Config(format!("DATABASE_MIGRATION_URL: {error}")))?;
    let server = if hosts.read_write {
        Primary::new(hosts.servers).choose().await.ok_or_else(|| {
            StorageError::Config("no server of the migration URL accepts writes".into())
        })?
    } else {
        hosts
            .servers
            .into_iter()
            .next()
            .ok_or_else(|| StorageError::Config("the migration URL names no server".into()))?
    };
    let server = server.application_name("approval-resume-migrate");
    create_database_if_missing(&server).await?;
    let mut connection: PgConnection = server.connect().await?;
    MIGRATOR.run(&mut connection).await?;
    connection.close().await?;
    Ok(())
}

async fn create_database_if_missing(options: &PgConnectOptions) -> Result<(), StorageError> {
    let Some(name) = options.get_database().map(str::to_owned) else {
        return Ok(());
    };
    // Connect to the maintenance database; the target may not exist yet.
    let mut admin: PgConnection = options.clone().database("postgres").connect().await?;
    let exists: bool =
        sql::query_scalar("select exists (select 1 from pg_database where datname = $1)")
            .bind(&name)
            .fetch_one(&mut admin)
            .await?;
    if !exists {
        let create = format!("create database \"{}\"", name.replace('"', "\"\""));
        match sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&mut admin)
            .await
        {
            Ok(_) => tracing::info!(database = %name, "created the database"),
            // Another instance created it between our check and our create.
            Err(error) if is_duplicate_database(&error) => {}
            Err(error) => return Err(error.into()),
        }
    }
    admin.close().await?;
    Ok(())
}

fn is_duplicate_database(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P04"))
        || is_unique_violation(error, None)
}
