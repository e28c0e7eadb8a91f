//! Postgres access: the pool, migrations, and one module of plain async functions per table group.
//!
//! Functions take `impl PgExecutor` or `&mut PgConnection`; the caller owns the transaction. Nothing here knows HTTP.

pub mod approvals;
pub mod claims;
pub mod clients;
pub mod connect;
pub mod database;
pub mod decision_record;
pub mod decision_statements;
pub mod denials;
pub mod hosts;
pub mod links;
pub mod mail_outbox;
pub mod outbox;
pub mod pending_rules;
pub mod primary;
pub mod rekeying;
pub mod remembered_rules;
pub mod retention;
mod row_text;
pub mod run_snapshot;
pub mod runs;
pub mod sealed;
pub mod sql;
pub mod token_keys;
pub mod turn_calls;
pub mod users;
pub mod webhooks;
pub mod worker_results;
pub mod worker_state;

use sqlx::migrate::Migrator;

pub use database::Database;
pub(crate) use sql::Query;

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
    #[error("the database settings are not usable: {0}")]
    Config(String),
    /// A sealed value under a key that is not configured, or that does not authenticate (docs/design.md §11).
    #[error("a stored value of run {run_id} does not decrypt (key id {key_id})")]
    Undecryptable { run_id: uuid::Uuid, key_id: String },
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
        | sqlx::Error::Tls(_)
        | sqlx::Error::BeginFailed => true,
        sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().as_deref().is_some_and(is_transient_code),
        _ => false,
    }
}

/// Statement timeout / cancel, admin shutdown, crash shutdown, cannot connect now, too many connections,
/// serialization failure, deadlock, a read-only transaction (the server became a standby; the pool moves to the new
/// primary), and the whole class 08, connection exceptions, which is also what PgBouncer answers when it has no
/// server connection to give (`08P01`, e.g. `query_wait_timeout`, `server login has been failing`): the same
/// request can succeed a moment later.
fn is_transient_code(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "57014" | "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01" | "25006"
        )
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

/// Whether the database answers and every embedded migration is applied. A database that was never migrated has
/// no migrations table at all: that is "not migrated" too, not an error.
pub async fn is_ready(pool: &Database) -> Result<bool, StorageError> {
    let has_table: bool = sql::query_scalar("select to_regclass('_sqlx_migrations') is not null")
        .fetch_one(pool)
        .await?;
    if !has_table {
        return Ok(false);
    }
    let applied: i64 = sql::query_scalar("select count(*) from _sqlx_migrations where success")
        .fetch_one(pool)
        .await?;
    Ok(applied as usize >= MIGRATOR.iter().count())
}
