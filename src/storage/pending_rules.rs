//! The rules that would decide a waiting turn's calls (docs/design.md §18), read in the statement that reads the
//! calls, so that a run view or an inbox page costs no statement more for them, with rules or without.
//!
//! Each call's live rules of its tool are joined to it (`left join lateral`): the run's (`run` scope, by the partial
//! index `remembered_rules_run`) and its owner's (`owner` scope, by `remembered_rules_owner`), each with its author's
//! row, so that §4 is weighed at use as a registration weighs it. A call with no rule comes back once with the rule's
//! columns null; a call with several, once per rule, its own columns (its arguments, its result) only on the first of
//! those rows (`rule_rank` 1), so that a call's payload crosses the wire once however many rules its tool has. Which one would decide the call is the rule book's choice
//! ([`crate::domain::remembered::deciding_candidate`]); nothing here judges a rule. Nothing is locked: a view shows
//! the rules as they stood when it was read.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{FromRow as _, PgExecutor, Row as _};
use uuid::Uuid;

use super::remembered_rules::live_rule_named;
use super::turn_calls::{CALL_COLUMNS, CallRow, StoredCall};
use super::{StorageError, sql};
use crate::domain::remembered::{CandidateRule, RuleScope};
use crate::sealing::Sealer;

/// The prefix of a joined rule's columns.
const PREFIX: &str = "rule_";

/// The join of a call's candidate rules: `call` is the alias of its `turn_calls` row, `owner` the expression of its
/// run's owner, `tenant` that of the tenant (a bound parameter). The rule's columns are named `rule_…`.
pub(super) fn candidates_join(call: &str, owner: &str, tenant: &str) -> String {
    format!(
        "left join lateral (
           select r.id as rule_id, r.scope as rule_scope, r.tool as rule_tool, r.arguments as rule_arguments,
                  r.arguments_sealed as rule_arguments_sealed, r.verdict as rule_verdict, r.reason as rule_reason,
                  r.created_by as rule_created_by, r.created_at as rule_created_at, r.expires_at as rule_expires_at,
                  u.uid is not null as rule_author_found, u.is_admin as rule_is_admin,
                  u.can_approve_others as rule_can_approve_others, u.disabled as rule_disabled,
                  u.approvable_tools as rule_approvable_tools,
                  row_number() over () as rule_rank,
                  bool_or(r.arguments is not null or r.arguments_sealed is not null) over () as rule_any_arguments
           from remembered_rules r
           left join backend_users u on u.tenant = r.tenant and u.uid = r.created_by
           where r.revoked_at is null and (r.expires_at is null or r.expires_at > now()) and r.tool = {call}.tool
             and ((r.scope = 'run' and r.run_id = {call}.run_id)
                  or (r.scope = 'owner' and r.tenant = {tenant} and r.owner_uid = {owner}))
         ) candidate on true"
    )
}

/// The candidate rule a row joined, if any.
pub(super) fn candidate(
    sealer: &Sealer,
    row: &PgRow,
) -> Result<Option<CandidateRule>, StorageError> {
    let id: Option<Uuid> = row.try_get("rule_id")?;
    if id.is_none() {
        return Ok(None);
    }
    let scope: String = row.try_get("rule_scope")?;
    let expires_at: Option<DateTime<Utc>> = row.try_get("rule_expires_at")?;
    Ok(Some(CandidateRule {
        rule: live_rule_named(sealer, row, PREFIX)?,
        scope: RuleScope::parse(&scope)
            .ok_or_else(|| StorageError::Corrupt(format!("the scope of rule {id:?}")))?,
        expires_at,
    }))
}

/// The calls of a waiting turn in the turn's order, each with the live rules of its tool that may decide it (their
/// author not judged yet): one statement, as [`super::turn_calls::calls`] is.
pub async fn calls_with_rules(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    tenant: &str,
    run_id: Uuid,
    turn_index: i32,
    owner_uid: i64,
) -> Result<Vec<(CallRow, Vec<CandidateRule>)>, StorageError> {
    // The call's columns on its first row only: the rows after it carry its other rules (see the module's comment).
    let columns: Vec<String> = CALL_COLUMNS
        .split(',')
        .map(str::trim)
        .map(|column| match column {
            "position" => "c.position".to_owned(),
            _ => format!(
                "case when coalesce(candidate.rule_rank, 1) = 1 then c.{column} end as {column}"
            ),
        })
        .collect();
    let rows = sql::query(sqlx::AssertSqlSafe(format!(
        "select {}, candidate.*
         from turn_calls c
         {}
         where c.run_id = $1 and c.turn_index = $2
         order by c.position",
        columns.join(", "),
        candidates_join("c", "$4", "$3"),
    )))
    .bind(run_id)
    .bind(turn_index)
    .bind(tenant)
    .bind(owner_uid)
    .fetch_all(db)
    .await?;
    let mut calls: Vec<(CallRow, Vec<CandidateRule>)> = Vec::new();
    for row in &rows {
        let position: i32 = row.try_get("position")?;
        if calls
            .last()
            .is_none_or(|(call, _)| call.position != position)
        {
            let call = StoredCall::from_row(row)?.open(sealer, run_id)?;
            calls.push((call, Vec::new()));
        }
        if let (Some(candidate), Some((_, rules))) = (candidate(sealer, row)?, calls.last_mut()) {
            rules.push(candidate);
        }
    }
    Ok(calls)
}
