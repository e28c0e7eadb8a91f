//! Postgres access: the pool, migrations, and one module of plain async functions per table group.
//!
//! Functions take `impl PgExecutor` or `&mut PgConnection`; the caller owns the transaction. Nothing here knows HTTP.

pub mod approvals;
pub mod clients;
pub mod deciding;
pub mod decisions;
pub mod retention;
pub mod runs;
pub mod token_keys;
pub mod users;

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

/// A statement with its parameters bound so far, for functions that bind a group of parameters shared by statements.
pub(crate) type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// The embedded migrations; they run at start-up and by `approval-resume migrate`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Errors of the storage layer. `Unavailable` means "try again later", everything else is a defect or a conflict.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("the database is unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("stored data is not what this version expects: {0}")]
    Corrupt(String),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl From<sqlx::Error> for StorageError {
    fn from(error: sqlx::Error) -> Self {
        if is_unavailable(&error) {
            StorageError::Unavailable(error)
        } else {
            StorageError::Database(error)
        }
    }
}

/// Errors that say nothing about the request, only that the database cannot serve it right now.
fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_) => true,
        sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => matches!(
            db.code().as_deref(),
            // statement timeout / cancel, admin shutdown, crash shutdown, cannot connect now, too many connections,
            // serialization failure, deadlock: the same request can succeed a moment later.
            Some(
                "57014"
                    | "57P01"
                    | "57P02"
                    | "57P03"
                    | "53300"
                    | "40001"
                    | "40P01"
                    | "08000"
                    | "08003"
                    | "08006"
            )
        ),
        _ => false,
    }
}

/// Whether an error is a violation of the named unique constraint (or any unique constraint when `None`).
pub fn is_unique_violation(error: &sqlx::Error, constraint: Option<&str>) -> bool {
    match error {
        sqlx::Error::Database(db) => {
            db.code().as_deref() == Some("23505")
                && constraint.is_none_or(|name| db.constraint() == Some(name))
        }
        _ => false,
    }
}

/// How the pool talks to Postgres.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub database_url: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// Postgres cancels any statement that runs longer, so the database gives up before the HTTP layer does.
    pub statement_timeout: Duration,
}

/// Opens the pool, creating the database first when it does not exist.
///
/// Each connection carries `idle_in_transaction_session_timeout`: if a connection were ever left inside a
/// transaction (a cancelled `BEGIN`, see transact-rs/sqlx#4393), Postgres itself ends that session instead of
/// letting it hold locks.
pub async fn connect(settings: &PoolSettings) -> Result<PgPool, StorageError> {
    let options = PgConnectOptions::from_str(&settings.database_url)
        .map_err(StorageError::Database)?
        .application_name("approval-resume");
    create_database_if_missing(&options).await?;
    let statement_ms = settings.statement_timeout.as_millis().to_string();
    let idle_ms = (settings.statement_timeout.as_millis() * 2)
        .max(1000)
        .to_string();
    let options = options.options([
        ("statement_timeout", statement_ms.as_str()),
        ("lock_timeout", statement_ms.as_str()),
        ("idle_in_transaction_session_timeout", idle_ms.as_str()),
    ]);
    // No ping before each acquire: sqlx already pings every connection when it is released and closes a broken
    // one, so the ping on acquire only catches a connection that died while idle (a restarted or terminated
    // backend), at the cost of one round trip on every request. Such a request is answered 503 and retried.
    let pool = PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .test_before_acquire(false)
        .connect_lazy_with(options);
    Ok(pool)
}

/// Runs the embedded migrations; safe to call from several instances at once (sqlx takes an advisory lock).
pub async fn migrate(pool: &PgPool) -> Result<(), StorageError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// Whether the database answers and every embedded migration is applied. A database that was never migrated has
/// no migrations table at all: that is "not migrated" too, not an error.
pub async fn is_ready(pool: &PgPool) -> Result<bool, StorageError> {
    let has_table: bool = sqlx::query_scalar("select to_regclass('_sqlx_migrations') is not null")
        .fetch_one(pool)
        .await?;
    if !has_table {
        return Ok(false);
    }
    let applied: i64 = sqlx::query_scalar("select count(*) from _sqlx_migrations where success")
        .fetch_one(pool)
        .await?;
    Ok(applied as usize >= MIGRATOR.iter().count())
}

async fn create_database_if_missing(options: &PgConnectOptions) -> Result<(), StorageError> {
    let Some(name) = options.get_database().map(str::to_owned) else {
        return Ok(());
    };
    // Connect to the maintenance database; the target may not exist yet.
    let mut admin: PgConnection = options.clone().database("postgres").connect().await?;
    let exists: bool =
        sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
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
