//! A run read for a decision without its lock: what the decision rules need, the transcript and the calls through
//! the current turn, in one statement and so one snapshot.
//!
//! The usual decision (a waiting turn nobody has decided) is made from this read and recorded by a write that moves
//! the run on only while it is still waiting on the turn that was read (`decision_statements::record_denial`,
//! `decision_statements::take_turn`): a concurrent decision, an expiry or a new turn changes the run's status or turn,
//! so such a write records nothing and the decision is made again under the run's lock. The usual decision therefore
//! holds no lock and no transaction between its read and its write, and costs two statements (BENCHMARKS.md): the API
//! key's lookup is part of the read.

use sqlx::error::BoxDynError;
use sqlx::pool::PoolConnection;
use sqlx::postgres::types::{Oid, PgRecordDecoder};
use sqlx::postgres::{PgHasArrayType, PgTypeInfo, PgValueRef};
use sqlx::{Decode, PgConnection, Postgres, Row, Type};
use uuid::Uuid;

use super::decision_statements::{self, RunForDecision};
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
/// be read for it): the run and its decision facts as in `decision_statements::lock_run`, without `for update`, and the
/// calls as one array of records ([`CallRecord`]: one row whatever the number of calls, so the transcript is sent
/// once). One aggregate of records costs Postgres less than one per column: its executor starts one aggregate and
/// describes one column instead of fifteen, about a fifth of the read (`bench/postgres_instructions.sh`). The domain
/// columns are cast to their base types, which a record's decoder knows.
macro_rules! snapshot_sql {
    ($reader:literal) => {
        concat!(
            "with reader as (",
            $reader,
            ")
select reader.name as key_client_name, reader.tenant as key_client_tenant, reader.scopes as key_client_scopes,
       r.id is not null as run_found,
       r.id, r.tenant, r.owner_uid, r.status, r.privacy_level, r.format, r.require_second_approver,
       r.registration_hash, r.tools, r.turn_index, r.turn_digest, r.turn_request_hash, r.lease_owner,
       r.lease_until, r.expires_at, r.created_at, r.updated_at, r.messages, r.messages_from_jsonb,
       r.messages_sealed, r.system, r.system_sealed, r.source,
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
    select array_agg(row(k.turn_index, k.position::integer, k.call_id, k.tool::text, k.arguments, k.arguments_sealed,
                         k.effect::text, k.started_at, k.outcome::text, k.is_error, k.content, k.content_sealed,
                         k.finished_at, k.edited_arguments, k.edited_arguments_sealed)) as call_records
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
    let calls: Option<Vec<CallRecord>> = row.try_get("call_records")?;
    let mut calls: Vec<StoredCall> = calls
        .unwrap_or_default()
        .into_iter()
        .map(|CallRecord(call)| call)
        .collect();
    // The transcript keeps the row's bytes (they share the allocation of the connection's read buffer; the
    // connection's own buffers are given back all the same), and with them the calls' bytes, already decoded. When
    // those are the larger part the transcript is copied instead, so nothing is held twice while the answer is
    // written (or, for an approval, while its tools run).
    let calls_bytes: usize = calls.iter().map(StoredCall::stored_bytes).sum();
    let mut facts = decision_statements::run_for_decision(sealer, row)?;
    if calls_bytes > facts.transcript.text_len() {
        facts.transcript = facts.transcript.copied();
    }
    runs::release_buffers(conn, facts.transcript.text_len());
    // An aggregate keeps no order of its own: the turn's order is restored here.
    calls.sort_by_key(|call| (call.turn_index, call.position));
    let (calls, earlier_calls) =
        decision_statements::split_at_turn(sealer, run_id, facts.run.turn_index, calls)?;
    let run = RunSnapshot {
        facts,
        calls,
        earlier_calls,
    };
    Ok((key_holder, Some(run)))
}

/// One call as the snapshot's `call_records` array holds it: an anonymous record of the values of
/// `runs::CALL_COLUMNS`, in that order and of their base types. (Not `calls`: the decision's own `calls` column is
/// in the same row.)
struct CallRecord(StoredCall);

/// `record` and `record[]`, Postgres's types of anonymous rows.
const RECORD: Oid = Oid(2249);
const RECORD_ARRAY: Oid = Oid(2287);

impl Type<Postgres> for CallRecord {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(RECORD)
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        ty.oid() == Some(RECORD)
    }
}

impl PgHasArrayType for CallRecord {
    fn array_type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(RECORD_ARRAY)
    }

    fn array_compatible(ty: &PgTypeInfo) -> bool {
        ty.oid() == Some(RECORD_ARRAY)
    }
}

impl<'r> Decode<'r, Postgres> for CallRecord {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let mut record = PgRecordDecoder::new(value)?;
        Ok(CallRecord(StoredCall {
            turn_index: record.try_decode()?,
            position: record.try_decode()?,
            call_id: record.try_decode()?,
            tool: record.try_decode()?,
            arguments: record.try_decode()?,
            arguments_sealed: record.try_decode()?,
            effect: record.try_decode()?,
            started_at: record.try_decode()?,
            outcome: record.try_decode()?,
            is_error: record.try_decode()?,
            content: record.try_decode()?,
            content_sealed: record.try_decode()?,
            finished_at: record.try_decode()?,
            edited_arguments: record.try_decode()?,
            edited_arguments_sealed: record.try_decode()?,
            // Not read: the decision made from this snapshot is on a waiting turn, none of whose calls is released
            // yet, and the earlier turns' calls serve only their results. The hot path reads no column it needs not.
            released_at: None,
        }))
    }
}
