//! Backend users of the host application, per tenant.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{StorageError, sql};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserRow {
    pub uid: i64,
    pub username: String,
    pub is_admin: bool,
    pub can_approve_others: bool,
    pub disabled: bool,
    /// The tools whose write calls this user may approve; `None`: no limit (docs/design.md §4).
    pub approvable_tools: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What the host application says about a user.
#[derive(Debug, Clone)]
pub struct UserFields<'a> {
    pub username: &'a str,
    pub is_admin: bool,
    pub can_approve_others: bool,
    pub disabled: bool,
    pub approvable_tools: Option<&'a [String]>,
}

/// Inserts or replaces a user; `updated_at` moves only when something changed, so a repeated PUT is a no-op.
pub async fn upsert(
    db: impl PgExecutor<'_>,
    tenant: &str,
    uid: i64,
    fields: &UserFields<'_>,
) -> Result<UserRow, StorageError> {
    let row = sql::query_as::<UserRow>(
        "insert into backend_users as u (tenant, uid, username, is_admin, can_approve_others, disabled,
                                         approvable_tools)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (tenant, uid) do update set
             username = excluded.username,
             is_admin = excluded.is_admin,
             can_approve_others = excluded.can_approve_others,
             disabled = excluded.disabled,
             approvable_tools = excluded.approvable_tools,
             updated_at = case
                 when (u.username, u.is_admin, u.can_approve_others, u.disabled, u.approvable_tools)
                      is distinct from (excluded.username, excluded.is_admin, excluded.can_approve_others,
                                        excluded.disabled, excluded.approvable_tools)
                 then now() else u.updated_at end
         returning uid, username, is_admin, can_approve_others, disabled, approvable_tools, created_at, updated_at",
    )
    .bind(tenant)
    .bind(uid)
    .bind(fields.username)
    .bind(fields.is_admin)
    .bind(fields.can_approve_others)
    .bind(fields.disabled)
    .bind(fields.approvable_tools)
    .fetch_one(db)
    .await?;
    Ok(row)
}

pub async fn find(
    db: impl PgExecutor<'_>,
    tenant: &str,
    uid: i64,
) -> Result<Option<UserRow>, StorageError> {
    let row = sql::query_as::<UserRow>(
        "select uid, username, is_admin, can_approve_others, disabled, approvable_tools, created_at, updated_at
         from backend_users where tenant = $1 and uid = $2",
    )
    .bind(tenant)
    .bind(uid)
    .fetch_optional(db)
    .await?;
    Ok(row)
}
