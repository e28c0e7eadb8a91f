//! Runs and their working transcripts; the pending calls of each turn are `turn_calls`'s.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{Connection, PgConnection, PgExecutor, Row as _};
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{StorageError, row_text, sql};
use crate::domain::model_input::ModelInputFormat;
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::{Effect, ExecutorKind, PrivacyLevel, RunStatus};
use crate::sealing::Sealer;

// The calls have their own module; runs re-exports them so its callers keep their paths.
pub(super) use super::turn_calls::{CALL_COLUMNS, StoredCall};
pub use super::turn_calls::{CallRow, call_ids, calls, calls_before, insert_calls};

/// A run without its transcript, which can be large and is loaded only where it is needed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunRow {
    pub id: Uuid,
    pub tenant: String,
    pub owner_uid: i64,
    #[sqlx(try_from = "String")]
    pub status: StoredStatus,
    #[sqlx(try_from = "String")]
    pub privacy_level: StoredLevel,
    /// The format the run was registered in (docs/design.md §14).
    #[sqlx(try_from = "String")]
    pub format: StoredFormat,
    pub require_second_approver: bool,
    pub registration_hash: Vec<u8>,
    pub tools: Json<Vec<DeclaredTool>>,
    pub turn_index: i32,
    pub turn_digest: String,
    pub turn_request_hash: Option<Vec<u8>>,
    pub lease_owner: Option<Uuid>,
    pub lease_until: Option<DateTime<Utc>>,
    /// When the current turn expires if nobody decides it; `None`: never.
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Where the run came from, as its registration named it (docs/design.md §2; migration 0022).
    pub source: Option<String>,
}

/// A tool as the run declared it at registration. `executor` and `editable` are left out of the stored JSON when the
/// run did not declare them, so runs registered before they existed read as they were written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeclaredTool {
    pub name: String,
    pub effect: Effect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editable: Option<bool>,
}

/// `RunStatus` read from its column; an unknown text is a corrupt row, not a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredStatus(pub RunStatus);

impl TryFrom<String> for StoredStatus {
    type Error = StorageError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        RunStatus::parse(&text)
            .map(StoredStatus)
            .ok_or_else(|| StorageError::Corrupt(format!("run status {text:?}")))
    }
}

/// `PrivacyLevel` read from its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredLevel(pub PrivacyLevel);

impl TryFrom<String> for StoredLevel {
    type Error = StorageError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        PrivacyLevel::parse(&text)
            .map(StoredLevel)
            .ok_or_else(|| StorageError::Corrupt(format!("privacy level {text:?}")))
    }
}

/// `ModelInputFormat` read from its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredFormat(pub ModelInputFormat);

impl TryFrom<String> for StoredFormat {
    type Error = StorageError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        ModelInputFormat::parse(&text)
            .map(StoredFormat)
            .ok_or_else(|| StorageError::Corrupt(format!("format {text:?}")))
    }
}

impl RunRow {
    pub fn format(&self) -> ModelInputFormat {
        self.format.0
    }

    pub fn status(&self) -> RunStatus {
        self.status.0
    }

    pub fn privacy_level(&self) -> PrivacyLevel {
        self.privacy_level.0
    }

    /// The run's own declaration of a tool, if it declared it.
    pub fn declared(&self, tool: &str) -> Option<&DeclaredTool> {
        self.tools.0.iter().find(|declared| declared.name == tool)
    }
}

/// What registration stores.
#[derive(Debug)]
pub struct NewRun<'a> {
    pub id: Uuid,
    pub tenant: &'a str,
    pub owner_uid: i64,
    pub privacy_level: PrivacyLevel,
    pub require_second_approver: bool,
    pub registration_hash: &'a [u8],
    pub tools: &'a [DeclaredTool],
    pub messages: &'a TranscriptText,
    pub turn_digest: &'a str,
    pub expiry: Expiry,
    pub source: Option<&'a str>,
}

/// When a new turn expires: at a time, after a number of seconds from the database's clock, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    At(DateTime<Utc>),
    AfterSecs(u64),
    Never,
}

impl Expiry {
    /// The two parameters of [`EXPIRES_AT`]: an instant, and seconds from now.
    fn params(self) -> (Option<DateTime<Utc>>, Option<f64>) {
        match self {
            Expiry::At(at) => (Some(at), None),
            Expiry::AfterSecs(secs) => (None, Some(secs as f64)),
            Expiry::Never => (None, None),
        }
    }
}

/// The expression of a new turn's `expires_at` over an instant `$a` and seconds `$s` ([`Expiry::params`]), on the
/// database's clock so that every instance computes it alike.
macro_rules! expires_at_sql {
    ($a:literal, $s:literal) => {
        concat!(
            "coalesce(",
            $a,
            "::timestamptz, now() + make_interval(secs => ",
            $s,
            "::float8))"
        )
    };
}

const RUN_COLUMNS: &str = "id, tenant, owner_uid, status, privacy_level, format, require_second_approver, registration_hash,
     tools, turn_index, turn_digest, turn_request_hash, lease_owner, lease_until, expires_at, created_at, updated_at,
     source";

/// Inserts a run waiting for approval on turn 0; `None` when the id is taken (by any tenant).
pub async fn insert(
    conn: &mut PgConnection,
    sealer: &Sealer,
    run: &NewRun<'_>,
) -> Result<Option<RunRow>, StorageError> {
    let messages = seal_transcript(sealer, run.id, run.messages.as_str());
    let system = sealed::seal_optional(
        sealer,
        Column::System,
        Row::run(run.id),
        run.messages.system_str(),
    );
    let row = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "insert into runs (id, tenant, owner_uid, status, privacy_level, require_second_approver,
                           registration_hash, tools, messages, turn_index, turn_digest, messages_sealed,
                           expires_at, format, system, system_sealed, source)
         values ($1, $2, $3, 'waiting_for_approval', $4, $5, $6, $7, $8, 0, $9, $10, {}, $13, $14, $15, $16)
         on conflict (id) do nothing
         returning {RUN_COLUMNS}",
        expires_at_sql!("$11", "$12")
    )))
    .bind(run.id)
    .bind(run.tenant)
    .bind(run.owner_uid)
    .bind(run.privacy_level.as_str())
    .bind(run.require_second_approver)
    .bind(run.registration_hash)
    .bind(Json(run.tools))
    .bind(messages.clear)
    .bind(run.turn_digest)
    .bind(messages.sealed)
    .bind(run.expiry.params().0)
    .bind(run.expiry.params().1)
    .bind(run.messages.format().as_str())
    .bind(system.clear)
    .bind(system.sealed)
    .bind(run.source)
    .fetch_optional(&mut *conn)
    .await?;
    release_buffers(conn, run.messages.text_len());
    Ok(row)
}

/// The run with this id in this tenant; another tenant's run is `None`, exactly like a missing one.
pub async fn find(
    db: impl PgExecutor<'_>,
    tenant: &str,
    id: Uuid,
) -> Result<Option<RunRow>, StorageError> {
    let row = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "select {RUN_COLUMNS} from runs where id = $1 and tenant = $2"
    )))
    .bind(id)
    .bind(tenant)
    .fetch_optional(db)
    .await?;
    Ok(row)
}

/// Like [`find`], holding the run's row lock until the transaction ends. Every writer locks the run row first.
pub async fn lock(
    conn: &mut PgConnection,
    tenant: &str,
    id: Uuid,
) -> Result<Option<RunRow>, StorageError> {
    let row = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "select {RUN_COLUMNS} from runs where id = $1 and tenant = $2 for update"
    )))
    .bind(id)
    .bind(tenant)
    .fetch_optional(conn)
    .await?;
    Ok(row)
}

/// Whether some run holds this id, whichever tenant it belongs to.
pub async fn id_taken(db: impl PgExecutor<'_>, id: Uuid) -> Result<bool, StorageError> {
    let taken = sql::query_scalar("select exists (select 1 from runs where id = $1)")
        .bind(id)
        .fetch_one(db)
        .await?;
    Ok(taken)
}

/// The working transcript through the current turn.
pub async fn messages(
    conn: &mut PgConnection,
    sealer: &Sealer,
    id: Uuid,
) -> Result<TranscriptText, StorageError> {
    Ok(transcript_with_turns(conn, sealer, id).await?.transcript)
}

/// The working transcript, with where its turns end.
#[derive(Debug)]
pub struct StoredTranscript {
    pub transcript: TranscriptText,
    /// The run's current turn.
    pub turn_index: i32,
    /// The list's length in bytes through the previous turn's last entry (migration 0011), if a turn was appended
    /// since that migration.
    pub previous_turn_end: Option<usize>,
}

/// The working transcript through the current turn, with the run's turn and where the previous one ends.
pub async fn transcript_with_turns(
    conn: &mut PgConnection,
    sealer: &Sealer,
    id: Uuid,
) -> Result<StoredTranscript, StorageError> {
    let row = sql::query(
        "select messages, messages_sealed, messages_from_jsonb, format, system, system_sealed, turn_index,
                previous_turn_end
         from runs where id = $1",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    let turn_index: i32 = row.try_get("turn_index")?;
    let previous_turn_end: Option<i32> = row.try_get("previous_turn_end")?;
    let transcript = open_transcript(sealer, id, row)?;
    release_buffers(conn, transcript.text_len());
    Ok(StoredTranscript {
        transcript,
        turn_index,
        previous_turn_end: previous_turn_end.and_then(|end| usize::try_from(end).ok()),
    })
}

/// A transcript larger than this, read or written, gives its connection's buffers back ([`release_buffers`]).
const LARGE_TRANSCRIPT_BYTES: usize = 256 * 1024;

/// After a large transcript was read or written, gives the connection's buffers back to the allocator. sqlx keeps a
/// connection's read and write buffers as large as the largest message they ever held, for as long as the
/// connection lives, so every pooled connection that once carried a 10,000-message transcript would hold megabytes
/// while idle: memory would be bounded by the largest transcripts seen, not by what is in flight. The
/// next large transcript grows them again.
pub(super) fn release_buffers(conn: &mut PgConnection, bytes: usize) {
    if bytes > LARGE_TRANSCRIPT_BYTES {
        conn.shrink_buffers();
    }
}

/// The transcript's JSON text, sealed when keys are configured.
fn seal_transcript(sealer: &Sealer, run_id: Uuid, text: &str) -> sealed::Stored {
    sealed::seal(sealer, Column::Transcript, Row::run(run_id), text)
}

/// The transcript of a row with the columns `messages`, `messages_sealed`, `messages_from_jsonb`, `format`, `system`
/// and `system_sealed`: its clear JSON text, kept in the row's own buffer (`row_text`), or its sealed one opened. The
/// row is consumed: read everything else from it first.
pub(super) fn open_transcript(
    sealer: &Sealer,
    run_id: Uuid,
    row: PgRow,
) -> Result<TranscriptText, StorageError> {
    let from_jsonb: bool = row.try_get("messages_from_jsonb")?;
    let StoredFormat(format) = row.try_get::<String, _>("format")?.try_into()?;
    let system = sealed::open(
        sealer,
        Column::System,
        Row::run(run_id),
        row.try_get("system")?,
        row.try_get::<Option<&[u8]>, _>("system_sealed")?,
    )?
    .map(Bytes::from);
    let sealed: Option<&[u8]> = row.try_get("messages_sealed")?;
    let text = match sealed {
        Some(sealed) => {
            let opened = sealed::open_required(
                sealer,
                Column::Transcript,
                Row::run(run_id),
                None,
                Some(sealed),
            )?;
            Bytes::from(opened)
        }
        None => row_text::text_of(row, "messages")?.ok_or_else(|| {
            sealed::neither_clear_nor_sealed(Column::Transcript, Row::run(run_id))
        })?,
    };
    TranscriptText::from_stored(text, from_jsonb)
        .map(|transcript| transcript.in_format(format, system))
        .map_err(|error| StorageError::Corrupt(format!("run {run_id}: {error}")))
}

/// Moves a run to `status`, ending any lease.
pub async fn set_status(
    conn: &mut PgConnection,
    id: Uuid,
    status: RunStatus,
) -> Result<RunRow, StorageError> {
    let row = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "update runs set status = $2, lease_owner = null, lease_until = null, updated_at = now()
         where id = $1 returning {RUN_COLUMNS}"
    )))
    .bind(id)
    .bind(status.as_str())
    .fetch_one(conn)
    .await?;
    Ok(row)
}

/// Takes over turns whose lease ran out (their instance died); returns `(run id, tenant)` of each one taken.
pub async fn claim_expired_leases(
    db: impl PgExecutor<'_>,
    lease_owner: Uuid,
    lease: std::time::Duration,
    limit: i64,
) -> Result<Vec<(Uuid, String)>, StorageError> {
    let rows = sql::query_as::<(Uuid, String)>(
        "update runs set lease_owner = $1, lease_until = now() + make_interval(secs => $2)
         where id in (select id from runs where status = 'resuming' and lease_until < now()
                      order by lease_until limit $3 for update skip locked)
         returning id, tenant",
    )
    .bind(lease_owner)
    .bind(lease.as_secs_f64())
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// The turn a `POST /turns` opens.
#[derive(Debug, Clone, Copy)]
pub struct NextTurn<'a> {
    pub turn_index: i32,
    pub turn_digest: &'a str,
    /// SHA-256 of the request body, so a retried append is answered with the same run.
    pub request_hash: &'a [u8],
    pub expiry: Expiry,
}

/// Appends what followed the model input, opening the next turn. `appended` is the text of a JSON array: the entries
/// the service wrote (the results) and the loop's own, as it sent them; nothing stored is written again.
/// With keys, the transcript is opened, extended and sealed again here (the caller holds the run's lock); without,
/// Postgres appends to the clear one, and a sealed one is answered `Undecryptable` rather than lost. Either way the
/// list's length before the append is kept, where the model input of the turn that ended is cut (migration 0011).
pub async fn append_turn(
    conn: &mut PgConnection,
    sealer: &Sealer,
    id: Uuid,
    appended: &str,
    next: NextTurn<'_>,
) -> Result<RunRow, StorageError> {
    let NextTurn {
        turn_index,
        turn_digest,
        request_hash,
        expiry,
    } = next;
    // A transcript is an array of objects, so the text of `appended` joins the stored one's at a comma.
    let (clear_appended, sealed, previous_end) = if sealer.is_enabled() {
        let messages = messages(&mut *conn, sealer, id).await?;
        let text = messages.appended_text(appended);
        let previous_end = i32::try_from(messages.text_len()).ok();
        (
            None,
            seal_transcript(sealer, id, &text).sealed,
            previous_end,
        )
    } else {
        (Some(appended), None, None)
    };
    let written = clear_appended.map_or(0, str::len) + sealed.as_ref().map_or(0, Vec::len);
    let row = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "update runs set messages = case when $6::bytea is null then left(messages, -1) || ',' || substr($2, 2) end,
             messages_sealed = $6, messages_from_jsonb = messages_from_jsonb and $6::bytea is null,
             previous_turn_end = coalesce($9::integer, octet_length(messages)),
             turn_index = $3, turn_digest = $4, turn_request_hash = $5,
             status = 'waiting_for_approval', expires_at = {}, updated_at = now()
         where id = $1 and ($6::bytea is not null or messages is not null) returning {RUN_COLUMNS}",
        expires_at_sql!("$7", "$8")
    )))
    .bind(id)
    .bind(clear_appended)
    .bind(turn_index)
    .bind(turn_digest)
    .bind(request_hash)
    .bind(sealed)
    .bind(expiry.params().0)
    .bind(expiry.params().1)
    .bind(previous_end)
    .fetch_optional(&mut *conn)
    .await?;
    release_buffers(&mut *conn, written);
    match row {
        Some(row) => Ok(row),
        // Without keys, a sealed transcript: opening it names its key in the error.
        None => {
            messages(&mut *conn, sealer, id).await?;
            Err(StorageError::Corrupt(format!("run {id} has no transcript")))
        }
    }
}

/// Locks up to `limit` waiting runs whose turn has expired, skipping runs another transaction holds (a decision,
/// or another instance's sweeper): they are expired, or decided, by whoever holds them.
pub async fn lock_expired(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<RunRow>, StorageError> {
    let rows = sql::query_as::<RunRow>(sqlx::AssertSqlSafe(format!(
        "select {RUN_COLUMNS} from runs
         where status = 'waiting_for_approval' and expires_at <= now()
         order by expires_at limit $1 for update skip locked"
    )))
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows)
}
