//! The approvals inbox: runs waiting for approval that an acting user may decide, newest first, by keyset paging.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgExecutor, Row as _};
use uuid::Uuid;

use super::pending_rules;
use super::runs::{DeclaredTool, StoredFormat, StoredLevel};
use super::sealed::{self, Column, Row};
use super::{StorageError, sql};
use crate::domain::remembered::CandidateRule;
use crate::domain::vocabulary::Effect;
use crate::sealing::Sealer;

/// One waiting run of the inbox.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WaitingRun {
    pub id: Uuid,
    pub owner_uid: i64,
    #[sqlx(try_from = "String")]
    pub privacy_level: StoredLevel,
    /// The format the run was registered in (docs/design.md §14).
    #[sqlx(try_from = "String")]
    pub format: StoredFormat,
    pub require_second_approver: bool,
    pub turn_index: i32,
    pub turn_digest: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The run's declared tools: who runs each and whether it may be edited (docs/design.md §15).
    pub tools: Json<Vec<DeclaredTool>>,
    /// Where the run came from (docs/design.md §2).
    pub source: Option<String>,
}

impl WaitingRun {
    /// The run's own declaration of a tool, if it declared it.
    pub fn declared(&self, tool: &str) -> Option<&DeclaredTool> {
        self.tools.0.iter().find(|declared| declared.name == tool)
    }
}

/// What the inbox is asked for.
#[derive(Debug, Clone)]
pub struct InboxQuery<'a> {
    pub tenant: &'a str,
    /// `Some(uid)`: only that user's own runs (a user who may not decide others' runs). `None`: every owner's.
    pub only_owner: Option<i64>,
    pub owner_filter: Option<i64>,
    pub tool_filter: Option<&'a str>,
    /// Continue after this `(created_at, id)`, exclusive.
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

/// One page of waiting runs, newest first; ties on `created_at` are broken by id so paging never skips a run.
pub async fn waiting_runs(
    db: impl PgExecutor<'_>,
    query: &InboxQuery<'_>,
) -> Result<Vec<WaitingRun>, StorageError> {
    let (after_at, after_id) = query.after.unzip();
    let rows = sql::query_as::<WaitingRun>(
        "select r.id, r.owner_uid, r.privacy_level, r.format, r.require_second_approver, r.turn_index, r.turn_digest,
                r.expires_at, r.created_at, r.tools, r.source
         from runs r
         where r.tenant = $1 and r.status = 'waiting_for_approval'
           and (r.expires_at is null or r.expires_at > now())
           and ($2::bigint is null or r.owner_uid = $2)
           and ($3::bigint is null or r.owner_uid = $3)
           and ($4::text is null or exists (select 1 from turn_calls c
                where c.run_id = r.id and c.turn_index = r.turn_index and c.tool = $4))
           and ($5::timestamptz is null or (r.created_at, r.id) < ($5, $6))
         order by r.created_at desc, r.id desc
         limit $7",
    )
    .bind(query.tenant)
    .bind(query.only_owner)
    .bind(query.owner_filter)
    .bind(query.tool_filter)
    .bind(after_at)
    .bind(after_id)
    .bind(query.limit)
    .fetch_all(db)
    .await?;
    Ok(rows)
}

/// One pending call as the inbox shows it.
#[derive(Debug, Clone)]
pub struct InboxCallRow {
    pub run_id: Uuid,
    pub call_id: String,
    pub tool: String,
    pub effect: String,
    /// Loaded only for a run that shows arguments, while the page's budget lasts.
    pub arguments: Option<String>,
    /// The run shows arguments, but the page's budget ran out before this call's.
    pub arguments_omitted: bool,
    /// The live rules of its tool that may decide it (docs/design.md §18), their authors not judged yet.
    pub rules: Vec<CandidateRule>,
    /// The call's arguments to match the rules against, read (whatever the page shows) only when one of them
    /// matches on arguments, and counted against the page's budget like shown ones: never shown.
    pub rule_arguments: Option<String>,
    /// A rule of the call matches on arguments that the page's budget left unread: no rule is shown for it.
    pub rules_unknown: bool,
}

impl InboxCallRow {
    pub fn effect(&self) -> Effect {
        // The column's check constraint allows only the two values.
        Effect::parse(&self.effect).unwrap_or(Effect::Read)
    }
}

/// The pending calls of the current turn of each listed run, in one query, in page and turn order, each with the live
/// rules that may decide it (`pending_rules`: joined in the same statement, so that rules cost the page nothing more).
///
/// `shows_arguments[i]` says whether the page shows the arguments of `runs[i]` (its privacy level allows it). Those
/// are loaded in page order while their running total stays within `budget` bytes; the later ones are not read
/// into the service at all, only marked omitted. Postgres knows a text's length without reading it.
pub async fn pending_calls(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    tenant: &str,
    runs: &[WaitingRun],
    shows_arguments: &[bool],
    budget: usize,
) -> Result<Vec<InboxCallRow>, StorageError> {
    let ids: Vec<Uuid> = runs.iter().map(|run| run.id).collect();
    let turns: Vec<i32> = runs.iter().map(|run| run.turn_index).collect();
    let owners: Vec<i64> = runs.iter().map(|run| run.owner_uid).collect();
    // A sealed value's length less its header, nonce and tag (src/sealing.rs) is its text's: the budget counts
    // the same bytes whether the arguments are stored clear or sealed.
    let rows = sql::query(sqlx::AssertSqlSafe(format!(
        "select calls.run_id, calls.turn_index, calls.position, calls.call_id, calls.tool, calls.effect,
                case when first and shows and loaded <= $4 then calls.arguments end as arguments,
                case when first and shows and loaded <= $4 then calls.arguments_sealed end as arguments_sealed,
                shows and loaded > $4 as arguments_omitted,
                case when first and matches and not (shows and loaded <= $4) and weighed <= $4
                     then calls.arguments end as match_arguments,
                case when first and matches and not (shows and loaded <= $4) and weighed <= $4
                     then calls.arguments_sealed end as match_arguments_sealed,
                matches and not (shows and loaded <= $4) and weighed > $4 as match_omitted,
                candidate.*
         from (select c.run_id, c.turn_index, c.call_id, c.tool, c.effect, c.arguments, c.arguments_sealed,
                      c.position, t.page_order, t.shows, t.owner_uid,
                      sum(case when t.shows
                               then coalesce(octet_length(c.arguments),
                                             octet_length(c.arguments_sealed) - 30 - get_byte(c.arguments_sealed, 1))
                               else 0 end)
                          over (order by t.page_order, c.position) as loaded,
                      sum(coalesce(octet_length(c.arguments),
                                   octet_length(c.arguments_sealed) - 30 - get_byte(c.arguments_sealed, 1)))
                          over (order by t.page_order, c.position) as weighed
               from turn_calls c
               join unnest($1::uuid[], $2::int[], $3::bool[], $5::bigint[])
                      with ordinality as t(run_id, turn_index, shows, owner_uid, page_order)
                 on c.run_id = t.run_id and c.turn_index = t.turn_index) calls
         {},
         lateral (select coalesce(candidate.rule_rank, 1) = 1 as first,
                         coalesce(candidate.rule_any_arguments, false) as matches) once
         order by page_order, position",
        pending_rules::candidates_join("calls", "calls.owner_uid", "$6"),
    )))
    .bind(&ids)
    .bind(&turns)
    .bind(shows_arguments)
    .bind(i64::try_from(budget).unwrap_or(i64::MAX))
    .bind(&owners)
    .bind(tenant)
    .fetch_all(db)
    .await?;
    let mut calls: Vec<(i32, InboxCallRow)> = Vec::new();
    for row in &rows {
        let run_id: Uuid = row.try_get("run_id")?;
        let turn_index: i32 = row.try_get("turn_index")?;
        let position: i32 = row.try_get("position")?;
        let at = Row::call(run_id, turn_index, position);
        let open = |clear: &str, sealed: &str| -> Result<Option<String>, StorageError> {
            let sealed_value: Option<Vec<u8>> = row.try_get(sealed)?;
            sealed::open(
                sealer,
                Column::CallArguments,
                at,
                row.try_get(clear)?,
                sealed_value.as_deref(),
            )
        };
        let same_call = calls
            .last()
            .is_some_and(|(seen, call)| call.run_id == run_id && *seen == position);
        if !same_call {
            calls.push((
                position,
                InboxCallRow {
                    arguments: open("arguments", "arguments_sealed")?,
                    run_id,
                    call_id: row.try_get("call_id")?,
                    tool: row.try_get("tool")?,
                    effect: row.try_get("effect")?,
                    arguments_omitted: row.try_get("arguments_omitted")?,
                    rules: Vec::new(),
                    rules_unknown: false,
                    rule_arguments: None,
                },
            ));
        }
        let Some((_, call)) = calls.last_mut() else {
            continue;
        };
        if row.try_get("match_omitted")? {
            // A rule matches on arguments the page's budget leaves unread: which rule would decide the call is not
            // known, so none is shown (rather than one a deny on those arguments would overrule).
            call.rules_unknown = true;
        }
        if call.rule_arguments.is_none() {
            call.rule_arguments = open("match_arguments", "match_arguments_sealed")?
                .or_else(|| call.arguments.clone());
        }
        if let Some(candidate) = pending_rules::candidate(sealer, row)? {
            call.rules.push(candidate);
        }
    }
    Ok(calls.into_iter().map(|(_, call)| call).collect())
}
