//! Approval links (docs/design.md §20, migrations/0020): stored by the hash of their secret, read by run and hash,
//! revoked, and marked used once they decided.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::{StorageError, sql};

/// A link to store: everything but its secret, of which only the hash is kept.
pub struct NewLink<'a> {
    pub run_id: Uuid,
    pub id: Uuid,
    pub tenant: &'a str,
    pub secret_hash: &'a [u8; 32],
    pub uid: i64,
    pub turn_index: i32,
    pub turn_digest: &'a str,
    pub nonce: &'a str,
    pub made_by: &'a str,
    /// Seconds from the database's clock to the link's end.
    pub ttl_secs: i64,
}

/// A stored link, with what the database's clock says of it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LinkRow {
    pub run_id: Uuid,
    pub id: Uuid,
    pub tenant: String,
    pub uid: i64,
    pub turn_index: i32,
    pub turn_digest: String,
    pub nonce: String,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub used_at: Option<DateTime<Utc>>,
    /// `expires_at` has passed, by the database's clock (time is the database's, as for every expiry).
    pub expired: bool,
}

const LINK_COLUMNS: &str = "run_id, id, tenant, uid, turn_index, turn_digest, nonce, expires_at, revoked_at, \
                            used_at, expires_at <= now() as expired";

/// Stores a link that lasts `ttl_secs` from now; answers when it ends.
pub async fn insert(
    db: impl PgExecutor<'_>,
    link: &NewLink<'_>,
) -> Result<DateTime<Utc>, StorageError> {
    let expires_at = sql::query_scalar::<DateTime<Utc>>(
        "insert into approval_links (run_id, id, tenant, secret_hash, uid, turn_index, turn_digest, nonce, made_by,
                                     expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + make_interval(secs => $10))
         returning expires_at",
    )
    .bind(link.run_id)
    .bind(link.id)
    .bind(link.tenant)
    .bind(&link.secret_hash[..])
    .bind(link.uid)
    .bind(link.turn_index)
    .bind(link.turn_digest)
    .bind(link.nonce)
    .bind(link.made_by)
    .bind(link.ttl_secs as f64)
    .fetch_one(db)
    .await?;
    Ok(expires_at)
}

/// The link of `run_id` whose secret hashes to `secret_hash`, if there is one.
pub async fn find_by_secret(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    secret_hash: &[u8; 32],
) -> Result<Option<LinkRow>, StorageError> {
    let row = sql::query_as::<LinkRow>(sqlx::AssertSqlSafe(format!(
        "select {LINK_COLUMNS} from approval_links where run_id = $1 and secret_hash = $2"
    )))
    .bind(run_id)
    .bind(&secret_hash[..])
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Revokes link `id` of `run_id` in `tenant`; `false` when there is no such link. Revoking twice keeps the first
/// time.
pub async fn revoke(
    db: impl PgExecutor<'_>,
    tenant: &str,
    run_id: Uuid,
    id: Uuid,
) -> Result<bool, StorageError> {
    let found = sql::query(
        "update approval_links set revoked_at = coalesce(revoked_at, now())
         where run_id = $1 and id = $2 and tenant = $3",
    )
    .bind(run_id)
    .bind(id)
    .bind(tenant)
    .execute(db)
    .await?;
    Ok(found.rows_affected() == 1)
}

/// Records that link `id` decided its turn (the first time only).
pub async fn mark_used(
    db: impl PgExecutor<'_>,
    run_id: Uuid,
    id: Uuid,
) -> Result<(), StorageError> {
    sql::query("update approval_links set used_at = now() where run_id = $1 and id = $2 and used_at is null")
        .bind(run_id)
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}
