//! Backend users of the host application, per tenant.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{StorageError, sql};
use crate::domain::authorize::DeciderFacts;
use crate::domain::notify::Named;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct UserRow {
    pub uid: i64,
    pub username: String,
    pub is_admin: bool,
    pub can_approve_others: bool,
    pub disabled: bool,
    /// The tools whose write calls this user may approve; `None`: no limit (docs/design.md §4).
    pub approvable_tools: Option<Vec<String>>,
    /// Where the mail of docs/design.md §20 goes; `None`: no mail. Never logged.
    pub email: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl UserRow {
    /// What §4's rule needs of this user.
    pub fn facts(&self) -> DeciderFacts {
        DeciderFacts {
            is_admin: self.is_admin,
            can_approve_others: self.can_approve_others,
            disabled: self.disabled,
        }
    }
}

/// A user's facts as a left join reads their columns: `None` when the join found no user.
pub fn facts_of_joined(
    is_admin: Option<bool>,
    can_approve_others: Option<bool>,
    disabled: Option<bool>,
) -> Option<DeciderFacts> {
    Some(DeciderFacts {
        is_admin: is_admin?,
        can_approve_others: can_approve_others?,
        disabled: disabled?,
    })
}

/// What the host application says about a user. No `Debug`: it holds a mail address, which is never logged.
#[derive(Clone)]
pub struct UserFields<'a> {
    pub username: &'a str,
    pub is_admin: bool,
    pub can_approve_others: bool,
    pub disabled: bool,
    pub approvable_tools: Option<&'a [String]>,
    pub email: Option<&'a str>,
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
                                         approvable_tools, email)
         values ($1, $2, $3, $4, $5, $6, $7, $8)
         on conflict (tenant, uid) do update set
             username = excluded.username,
             is_admin = excluded.is_admin,
             can_approve_others = excluded.can_approve_others,
             disabled = excluded.disabled,
             approvable_tools = excluded.approvable_tools,
             email = excluded.email,
             updated_at = case
                 when (u.username, u.is_admin, u.can_approve_others, u.disabled, u.approvable_tools, u.email)
                      is distinct from (excluded.username, excluded.is_admin, excluded.can_approve_others,
                                        excluded.disabled, excluded.approvable_tools, excluded.email)
                 then now() else u.updated_at end
         returning uid, username, is_admin, can_approve_others, disabled, approvable_tools, email, created_at, updated_at",
    )
    .bind(tenant)
    .bind(uid)
    .bind(fields.username)
    .bind(fields.is_admin)
    .bind(fields.can_approve_others)
    .bind(fields.disabled)
    .bind(fields.approvable_tools)
    .bind(fields.email)
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
        "select uid, username, is_admin, can_approve_others, disabled, approvable_tools, email, created_at, updated_at
         from backend_users where tenant = $1 and uid = $2",
    )
    .bind(tenant)
    .bind(uid)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// The people a turn's `notify` names, as the tenant's users table has them (docs/design.md §20), in the
/// caller's transaction; a uid with no row comes back without facts.
pub async fn named(
    db: impl PgExecutor<'_>,
    tenant: &str,
    uids: &[i64],
) -> Result<Vec<Named>, StorageError> {
    let rows = sql::query_as::<(i64, Option<bool>, Option<bool>, Option<bool>, bool)>(
        "select n.uid, u.is_admin, u.can_approve_others, u.disabled, u.email is not null
         from unnest($2::bigint[]) with ordinality as n (uid, place)
         left join backend_users u on u.tenant = $1 and u.uid = n.uid
         order by n.place",
    )
    .bind(tenant)
    .bind(uids)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(uid, is_admin, can_approve_others, disabled, has_email)| Named {
                uid,
                facts: facts_of_joined(is_admin, can_approve_others, disabled),
                has_email,
            },
        )
        .collect())
}
