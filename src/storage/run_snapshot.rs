//! A run read for a decision without its lock: what the decision rules need, the transcript and the calls through
//! the current turn, in one statement and so one snapshot.
//!
//! The usual decision (a waiting turn nobody has decided) is made from this read and recorded by a write that moves
//! the run on only while it is still waiting on the turn that was read (`deciding::record_denial`,
//! `deciding::take_turn`): a concurrent decision, an expiry or a new turn changes the run's status or turn, so such a
//! write records nothing and the decision is made again under the run's lock. The usual decision therefore holds no
//! lock and no transaction between its read and its write, and costs two statements (BENCHMARKS.md): the API key's
//! lookup is part of the read.

use std::mem::take;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::{FromRow, PgConnection, Postgres, Row};
use uuid::Uuid;

use super::deciding::{self, RunForDecision};
use super::runs::{self, CallRow, StoredCall};
use super::{Database, StorageError, sql};
use crate::sealing::Sealer;

/// Who the decision is read for: the holder of an API key, whose client is read in the same statement (the key's
/// lookup costs no statement of its own), or a tenant already known (a verified decision token's).
#[derive(Debug, Clone, Copy)]
pub enum Reader<'a> {
    /// The key of this hash, whose client must hold `scope` for the run to be read at all: a client without it is
    /// refused from the client's row alone, and nothing of the run (sealed or not) is opened for it.
    KeyHash {
        hash: &'a [u8],
        scope: &'a str,
    },
    Tenant(&'a str),
}

/// The live client holding the key, as the snapshot read it.
#[derive(Debug, Clone)]
pub struct KeyHolder {
    pub name: String,
    pub tenant: String,
    pub scopes: Vec<String>,
}

/// What one read for a decision found.
#[derive(Debug)]
pub struct Snapshot {
    /// For [`Reader::KeyHash`], the live client holding the key (`None`: the key is unknown or revoked, and nothing
    /// about the run was read); for [`Reader::Tenant`], `None`.
    pub key_holder: Option<KeyHolder>,
    /// The run, if the reader's tenant has one of that id (and, for a key, its client holds the scope).
    pub run: Option<RunSnapshot>,
    /// What was read, so that a decision can tell it is made from the read of its own run and decider.
    pub run_id: Uuid,
    pub decider_uid: Option<i64>,
    /// The connection it was read on, for the decision's write (one connection, so one release, per decision);
    /// `None` behind a transaction pooler, where each statement runs in a transaction of its own.
    pub connection: Option<PoolConnection<Postgres>>,
}

/// A run as one snapshot showed it, with the calls a decision on its current turn is resolved against.
#[derive(Debug)]
pub struct RunSnapshot {
    pub facts: RunForDecision,
    /// The current turn's calls, in turn order.
    pub calls: Vec<CallRow>,
    /// The earlier turns' calls that have a result, in turn and call order.
    pub earlier_calls: Vec<CallRow>,
}

/// Reads the run for a decision without locking it, with the key's client when the reader is a key.
///
/// Directly connected, the statement runs outside any transaction, on a connection the snapshot keeps for the
/// write (and that gives its buffers back after a large transcript). Behind a transaction pooler it runs inside a
/// transaction, as every statement there does (`storage::database`).
pub async fn read(
    db: &Database,
    reader: Reader<'_>,
    run_id: Uuid,
    decider_uid: Option<i64>,
) -> Result<Snapshot, StorageError> {
    let (key_holder, run, connection) = if db.is_behind_pooler() {
        let mut tx = db.begin().await?;
        match read_on(&mut tx, db.sealer(), reader, run_id, decider_uid).await {
            Ok((key_holder, run)) => {
                tx.commit().await?;
                (key_holder, run, None)
            }
            Err(error) => {
                // Said at once rather than on the connection's next use, so the pooler frees the server connection.
                let _ = tx.rollback().await;
                return Err(error);
            }
        }
    } else {
        let mut conn = db.pool().acquire().await?;
        let (key_holder, run) =
            read_on(&mut conn, db.sealer(), reader, run_id, decider_uid).await?;
        (key_holder, run, Some(conn))
    };
    Ok(Snapshot {
        key_holder,
        run,
        run_id,
        decider_uid,
        connection,
    })
}

/// The statement, after the `reader` expression that names the tenant (and the key's client, and whether the run may
/// be read for it): the run and its
/// decision facts as in `deciding::lock_run`, without `for update`, and the calls as one array per column (one row
/// whatever the number of calls, so the transcript is sent once).
macro_rules! snapshot_sql {
    ($reader:literal) => {
        concat!(
            "with reader as (",
            $reader,
            ")
select reader.name as key_client_name, reader.tenant as key_client_tenant, reader.scopes as key_client_scopes,
       r.id is not null as run_found,
       r.id, r.tenant, r.owner_uid, r.status, r.privacy_level, r.require_second_approver,
       r.registration_hash, r.tools, r.turn_index, r.turn_digest, r.turn_request_hash, r.lease_owner,
       r.lease_until, r.expires_at, r.created_at, r.updated_at, r.messages, r.messages_from_jsonb,
       r.messages_sealed,
       u.uid is not null as decider_found, u.is_admin, u.can_approve_others, u.disabled, u.approvable_tools,
       e.turn_index as decision_turn_index, e.approved, e.decider_uid, e.decided_by, e.reason,
       e.turn_digest as decision_turn_digest, e.client_name, e.decided_at, e.token_kid, e.calls,
       coalesce(r.expires_at <= clock_timestamp(), false) as past_expiry,
       x.turn_index is not null as expired,
       c.*
from reader
left join runs r on r.id = $1 and r.tenant = reader.tenant and reader.may_read
left join backend_users u on u.tenant = r.tenant and u.uid = $3
left join approval_events e on e.run_id = r.id and e.turn_index = r.turn_index
left join turn_expiries x on x.run_id = r.id and x.turn_index = r.turn_index
left join lateral (
    select array_agg(k.turn_index) as call_turn_index, array_agg(k.position::integer) as call_position,
           array_agg(k.call_id) as call_call_id, array_agg(k.tool::text) as call_tool,
           array_agg(k.arguments) as call_arguments, array_agg(k.arguments_sealed) as call_arguments_sealed,
           array_agg(k.effect::text) as call_effect, array_agg(k.started_at) as call_started_at,
           array_agg(k.outcome::text) as call_outcome, array_agg(k.is_error) as call_is_error,
           array_agg(k.content) as call_content, array_agg(k.content_sealed) as call_content_sealed,
           array_agg(k.finished_at) as call_finished_at, array_agg(k.edited_arguments) as call_edited_arguments,
           array_agg(k.edited_arguments_sealed) as call_edited_arguments_sealed
    from turn_calls k
    where k.run_id = r.id and k.turn_index <= r.turn_index and (k.turn_index = r.turn_index or k.outcome is not null)
) c on true"
        )
    };
}

/// `$2` is the key's hash: no row at all when no live client holds it; `$4` the scope the run is read for.
const BY_KEY: &str = snapshot_sql!(
    "select name, tenant, scopes, $4 = any (scopes) as may_read
     from api_clients where key_hash = $2 and revoked_at is null"
);
/// `$2` is the tenant, whose reader was judged before: always one row.
const BY_TENANT: &str = snapshot_sql!(
    "select null::text as name, $2::text as tenant, null::text[] as scopes, true as may_read"
);

async fn read_on(
    conn: &mut PgConnection,
    sealer: &Sealer,
    reader: Reader<'_>,
    run_id: Uuid,
    decider_uid: Option<i64>,
) -> Result<(Option<KeyHolder>, Option<RunSnapshot>), StorageError> {
    let query = match reader {
        Reader::KeyHash { hash, scope } => sql::query(BY_KEY)
            .bind(run_id)
            .bind(hash)
            .bind(decider_uid)
            .bind(scope),
        Reader::Tenant(tenant) => sql::query(BY_TENANT)
            .bind(run_id)
            .bind(tenant)
            .bind(decider_uid),
    };
    let row = query.fetch_optional(&mut *conn).await?;
    let Some(row) = row else {
        return Ok((None, None));
    };
    let key_holder = match reader {
        Reader::KeyHash { .. } => Some(KeyHolder {
            name: row.try_get("key_client_name")?,
            tenant: row.try_get("key_client_tenant")?,
            scopes: row.try_get("key_client_scopes")?,
        }),
        Reader::Tenant(_) => None,
    };
    if !row.try_get::<bool, _>("run_found")? {
        return Ok((key_holder, None));
    }
    let facts = deciding::run_for_decision(sealer, &row)?;
    let mut calls = CallColumns::from_row(&row)?.into_calls()?;
    // The row's bytes share the allocation of the connection's read buffer: dropped before the buffers are given
    // back, so that nothing holds a large transcript's allocation past this read.
    drop(row);
    runs::release_buffers(conn, facts.transcript.text_len());
    // An aggregate keeps no order of its own: the turn's order is restored here.
    calls.sort_by_key(|call| (call.turn_index, call.position));
    let (calls, earlier_calls) =
        deciding::split_at_turn(sealer, run_id, facts.run.turn_index, calls)?;
    let run = RunSnapshot {
        facts,
        calls,
        earlier_calls,
    };
    Ok((key_holder, Some(run)))
}

/// The calls as the snapshot answers them: one array per column, all of one length (`None` when there are none).
#[derive(FromRow)]
struct CallColumns {
    call_turn_index: Option<Vec<i32>>,
    call_position: Option<Vec<i32>>,
    call_call_id: Option<Vec<String>>,
    call_tool: Option<Vec<String>>,
    call_arguments: Option<Vec<Option<String>>>,
    call_arguments_sealed: Option<Vec<Option<Vec<u8>>>>,
    call_effect: Option<Vec<String>>,
    call_started_at: Option<Vec<Option<DateTime<Utc>>>>,
    call_outcome: Option<Vec<Option<String>>>,
    call_is_error: Option<Vec<Option<bool>>>,
    call_content: Option<Vec<Option<String>>>,
    call_content_sealed: Option<Vec<Option<Vec<u8>>>>,
    call_finished_at: Option<Vec<Option<DateTime<Utc>>>>,
    call_edited_arguments: Option<Vec<Option<String>>>,
    call_edited_arguments_sealed: Option<Vec<Option<Vec<u8>>>>,
}

impl CallColumns {
    fn from_row(row: &PgRow) -> Result<Self, StorageError> {
        Ok(<Self as FromRow<PgRow>>::from_row(row)?)
    }

    /// The calls, one per index of the arrays; arrays of different lengths are a defect of the statement.
    fn into_calls(self) -> Result<Vec<StoredCall>, StorageError> {
        let count = self.call_position.as_ref().map_or(0, Vec::len);
        let mut columns = (
            column(self.call_turn_index, count)?,
            column(self.call_position, count)?,
            column(self.call_call_id, count)?,
            column(self.call_tool, count)?,
            column(self.call_arguments, count)?,
            column(self.call_arguments_sealed, count)?,
            column(self.call_effect, count)?,
            column(self.call_started_at, count)?,
            column(self.call_outcome, count)?,
            column(self.call_is_error, count)?,
            column(self.call_content, count)?,
            column(self.call_content_sealed, count)?,
            column(self.call_finished_at, count)?,
            column(self.call_edited_arguments, count)?,
            column(self.call_edited_arguments_sealed, count)?,
        );
        let calls = (0..count)
            .map(|i| StoredCall {
                turn_index: take(&mut columns.0[i]),
                position: take(&mut columns.1[i]),
                call_id: take(&mut columns.2[i]),
                tool: take(&mut columns.3[i]),
                arguments: take(&mut columns.4[i]),
                arguments_sealed: take(&mut columns.5[i]),
                effect: take(&mut columns.6[i]),
                started_at: take(&mut columns.7[i]),
                outcome: take(&mut columns.8[i]),
                is_error: take(&mut columns.9[i]),
                content: take(&mut columns.10[i]),
                content_sealed: take(&mut columns.11[i]),
                finished_at: take(&mut columns.12[i]),
                edited_arguments: take(&mut columns.13[i]),
                edited_arguments_sealed: take(&mut columns.14[i]),
            })
            .collect();
        Ok(calls)
    }
}

/// One column's values, checked to number `count`.
fn column<T>(values: Option<Vec<T>>, count: usize) -> Result<Vec<T>, StorageError> {
    let values = values.unwrap_or_default();
    if values.len() != count {
        return Err(StorageError::Corrupt(format!(
            "the calls' columns have {} and {count} values",
            values.len()
        )));
    }
    Ok(values)
}
