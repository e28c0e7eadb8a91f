//! The Ed25519 public keys each API client registers for its decision tokens, several at once for rotation.
//!
//! A token decides as any uid of its client's tenant, so only a client holding `decisions:write` may have keys
//! (docs/design.md §13): `add` refuses any other, and `find` says whether the client still holds it, since a client's
//! scopes may change after its keys were added.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::{StorageError, sql};
use crate::domain::scopes::Scope;

/// The scope a client must hold for its token keys to be added and to verify.
pub const TOKEN_SCOPE: Scope = Scope::DecisionsWrite;

/// A client's key as the token check needs it: the client's state and the key's.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenKey {
    pub client_name: String,
    pub tenant: String,
    pub client_revoked: bool,
    /// Whether the client holds [`TOKEN_SCOPE`] now.
    pub client_may_decide: bool,
    pub public_key: Vec<u8>,
    pub retired: bool,
}

/// A key as `clients token-key list` shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ListedKey {
    pub client_name: String,
    pub kid: String,
    pub created_at: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
}

/// The key `kid` of client `client_name`, whether or not either is still live.
pub async fn find(
    db: impl PgExecutor<'_>,
    client_name: &str,
    kid: &str,
) -> Result<Option<TokenKey>, StorageError> {
    let row = sql::query_as::<TokenKey>(
        "select c.name as client_name, c.tenant, c.revoked_at is not null as client_revoked,
                $3 = any (c.scopes) as client_may_decide, k.public_key, k.retired_at is not null as retired
         from api_clients c join client_token_keys k on k.client_id = c.id
         where c.name = $1 and k.kid = $2",
    )
    .bind(client_name)
    .bind(kid)
    .bind(TOKEN_SCOPE.as_str())
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Whether a client of that name exists and has been revoked.
pub async fn client_revoked(
    db: impl PgExecutor<'_>,
    client_name: &str,
) -> Result<Option<bool>, StorageError> {
    let row: Option<(bool,)> =
        sql::query_as("select revoked_at is not null from api_clients where name = $1")
            .bind(client_name)
            .fetch_optional(db)
            .await?;
    Ok(row.map(|(revoked,)| revoked))
}

/// What adding a key came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    Added,
    NoSuchClient,
    KidTaken,
    /// The client does not hold [`TOKEN_SCOPE`]: its tokens could never decide, and must not read.
    ClientMayNotDecide,
}

/// Registers a key for a live client holding [`TOKEN_SCOPE`].
pub async fn add(
    db: impl PgExecutor<'_>,
    client_name: &str,
    kid: &str,
    public_key: &[u8; 32],
) -> Result<Added, StorageError> {
    // One statement, so the scope is judged on the row the key is added to; the client's scopes come back with the
    // inserted row's count to tell a client without the scope from no client.
    let result = sql::query_as::<(i64, Option<bool>)>(
        "with client as (
             select id, $4 = any (scopes) as may_decide from api_clients where name = $1 and revoked_at is null
         ), added as (
             insert into client_token_keys (client_id, kid, public_key)
             select id, $2, $3 from client where may_decide
             returning 1
         )
         select (select count(*) from added), (select may_decide from client)",
    )
    .bind(client_name)
    .bind(kid)
    .bind(public_key.as_slice())
    .bind(TOKEN_SCOPE.as_str())
    .fetch_one(db)
    .await;
    match result {
        Ok((1, _)) => Ok(Added::Added),
        Ok((_, Some(false))) => Ok(Added::ClientMayNotDecide),
        Ok(_) => Ok(Added::NoSuchClient),
        Err(error) if super::is_unique_violation(&error, Some("client_token_keys_pkey")) => {
            Ok(Added::KidTaken)
        }
        Err(error) => Err(error.into()),
    }
}

/// Retires a live key; `Ok(false)` when the client has no live key of that kid.
pub async fn retire(
    db: impl PgExecutor<'_>,
    client_name: &str,
    kid: &str,
) -> Result<bool, StorageError> {
    let result = sql::query(
        "update client_token_keys k set retired_at = now()
         from api_clients c
         where k.client_id = c.id and c.name = $1 and k.kid = $2 and k.retired_at is null",
    )
    .bind(client_name)
    .bind(kid)
    .execute(db)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Every key of every client, retired ones included.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<ListedKey>, StorageError> {
    let rows = sql::query_as::<ListedKey>(
        "select c.name as client_name, k.kid, k.created_at, k.retired_at
         from client_token_keys k join api_clients c on c.id = k.client_id
         order by c.id, k.created_at, k.kid",
    )
    .fetch_all(db)
    .await?;
    Ok(rows)
}
