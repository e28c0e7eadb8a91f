//! API clients: hashed keys, scopes and tenants.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{StorageError, sql};

/// A client as the authentication layer sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClientRow {
    pub name: String,
    pub tenant: String,
    pub key_prefix: String,
    pub scopes: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Stores a new client; `Ok(false)` when the name is taken.
pub async fn insert(
    db: impl PgExecutor<'_>,
    name: &str,
    tenant: &str,
    key_hash: &[u8],
    key_prefix: &str,
    scopes: &[String],
) -> Result<bool, StorageError> {
    let result = sql::query(
        "insert into api_clients (name, tenant, key_hash, key_prefix, scopes) values ($1, $2, $3, $4, $5)",
    )
    .bind(name)
    .bind(tenant)
    .bind(key_hash)
    .bind(key_prefix)
    .bind(scopes)
    .execute(db)
    .await;
    match result {
        Ok(_) => Ok(true),
        Err(error) if super::is_unique_violation(&error, Some("api_clients_name_key")) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// The live (not revoked) client holding the key with this hash.
pub async fn find_active_by_key_hash(
    db: impl PgExecutor<'_>,
    key_hash: &[u8],
) -> Result<Option<ClientRow>, StorageError> {
    let row = sql::query_as::<ClientRow>(
        "select name, tenant, key_prefix, scopes, allowed_origins, created_at, revoked_at
         from api_clients where key_hash = $1 and revoked_at is null",
    )
    .bind(key_hash)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Every client, revoked ones included, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<ClientRow>, StorageError> {
    let rows = sql::query_as::<ClientRow>(
        "select name, tenant, key_prefix, scopes, allowed_origins, created_at, revoked_at
         from api_clients order by id",
    )
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// Revokes a client's key; `Ok(false)` when no live client has that name.
pub async fn revoke(db: impl PgExecutor<'_>, name: &str) -> Result<bool, StorageError> {
    let result = sql::query(
        "update api_clients set revoked_at = now() where name = $1 and revoked_at is null",
    )
    .bind(name)
    .execute(db)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Whether a live client allows pages of `origin` to call the token routes.
pub async fn origin_allowed(db: impl PgExecutor<'_>, origin: &str) -> Result<bool, StorageError> {
    let (allowed,): (bool,) = sql::query_as(
        "select exists (select 1 from api_clients where revoked_at is null and $1 = any (allowed_origins))",
    )
    .bind(origin)
    .fetch_one(db)
    .await?;
    Ok(allowed)
}

/// Replaces a live client's allowed origins; `Ok(false)` when no live client has that name.
pub async fn set_origins(
    db: impl PgExecutor<'_>,
    name: &str,
    origins: &[String],
) -> Result<bool, StorageError> {
    let result = sql::query(
        "update api_clients set allowed_origins = $2 where name = $1 and revoked_at is null",
    )
    .bind(name)
    .bind(origins)
    .execute(db)
    .await?;
    Ok(result.rows_affected() == 1)
}
