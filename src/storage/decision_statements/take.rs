//! The approval's take: one statement records an approval and takes its turn under this instance's lease, with the
//! denied calls' results, the edited calls' arguments and the first call to be sent marked started.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::{FromRow, PgExecutor, Row};
use uuid::Uuid;

use super::super::decision_record::{
    self, DECISION_COLUMNS, DecisionColumns, DecisionRow, NewDecision,
};
use super::super::sealed::{self, Column, Row as SealedRow};
use super::super::{StorageError, sql};
use super::closing_params::{Param, Positional};
use super::still_waiting;
use crate::domain::results::ToolResult;
use crate::sealing::Sealer;

/// What an approval writes as it takes its turn (see [`take_turn`]).
pub struct TakingTurn<'a> {
    pub decision: &'a NewDecision<'a>,
    /// Seals denial contents and edited arguments before they are stored.
    pub sealer: &'a Sealer,
    /// `(position, result)` of the calls this decision denies.
    pub denied: &'a [(i32, &'a ToolResult)],
    /// `(position, arguments)` of the approved calls a decider edited.
    pub edits: &'a [(i32, &'a str)],
    /// The instance that runs the calls, and for how long its lease lasts from now.
    pub lease_owner: Uuid,
    pub lease: Duration,
    /// The position of the call this instance sends first, marked started here (the lease is fresh, so no
    /// renewal is needed before it is sent); `None` when no call is sent.
    pub first_sent: Option<i32>,
}

/// Records an approval and takes its turn, in one statement: the run to `resuming` under this instance's lease, the
/// approval event, the denied calls' results and the edited calls' arguments, and the first call to be sent marked
/// started. It writes only while the run still waits on `taking.decision`'s turn and that turn has not expired
/// (under the run's lock, once it was seen waiting, only the expiry can stop it; from a snapshot, also a concurrent
/// change that came first), and nothing otherwise: `None`.
/// Returns the decision and whether that call was marked.
///
/// An approval that denies and edits nothing (every whole-turn approval) takes a statement without the two updates
/// of denied and edited calls: each costs Postgres its setup even when it changes no row, a quarter of the take's
/// instructions (BENCHMARKS.md, "The take of a plain approval").
pub async fn take_turn(
    db: impl PgExecutor<'_>,
    taking: &TakingTurn<'_>,
) -> Result<Option<(DecisionRow, bool)>, StorageError> {
    static APPROVING: LazyLock<String> = LazyLock::new(|| taking_statement(&PLAIN));
    static DENYING_OR_EDITING: LazyLock<String> =
        LazyLock::new(|| taking_statement(&DENYING_OR_EDITING_PARAMS));
    let decision = taking.decision;
    let plain = taking.denied.is_empty() && taking.edits.is_empty();
    let (statement, params) = if plain {
        (&APPROVING, &PLAIN)
    } else {
        (&DENYING_OR_EDITING, &DENYING_OR_EDITING_PARAMS)
    };
    let mut query = Positional::new(sql::query(sqlx::AssertSqlSafe(statement.as_str())))
        .bind(RUN, decision.run_id)
        .bind(TURN, decision.turn_index)
        .bind_many(DECISION, DecisionColumns::COUNT, |query| {
            decision_record::bind_decision(query, decision)
        });
    if let Some(calls) = &params.denied_and_edited {
        query = bind_denied_and_edited(query, calls, taking);
    }
    let row = query
        .bind(params.lease_owner, taking.lease_owner)
        .bind(params.lease_secs, taking.lease.as_secs_f64())
        .bind(params.first_sent, taking.first_sent)
        .into_query()
        .fetch_optional(db)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let first_started: bool = row.try_get("first_started")?;
    Ok(Some((
        DecisionRow::from_row(&row)?,
        first_started && taking.first_sent.is_some(),
    )))
}

// The taking statement's first parameters, the same in both forms.
const RUN: Param = Param(1);
const TURN: Param = Param(2);
/// The decision's columns ([`decision_record::bind_decision`]), `DecisionColumns::COUNT` of them.
const DECISION: Param = Param(3);

/// Where the rest of the taking statement's parameters sit: after the decision, the denied and edited calls' eight if
/// the statement has them, then the lease's owner, the lease's seconds and the position of the first call sent.
/// [`taking_statement`] writes its placeholders from these and [`take_turn`] binds its values under the same names.
struct TakingParams {
    denied_and_edited: Option<DeniedAndEditedParams>,
    lease_owner: Param,
    lease_secs: Param,
    first_sent: Param,
}

/// The parameters of the updates of the calls a decision denies (positions and results) and of those it edits
/// (positions and arguments), in the order [`bind_denied_and_edited`] binds them.
struct DeniedAndEditedParams {
    denied_positions: Param,
    denied_outcomes: Param,
    denied_errors: Param,
    denied_contents: Param,
    denied_contents_sealed: Param,
    edited_positions: Param,
    edited_arguments: Param,
    edited_arguments_sealed: Param,
}

/// The position after the decision's columns.
const AFTER_DECISION: u8 = DECISION.0 + DecisionColumns::COUNT;

const PLAIN: TakingParams = TakingParams {
    denied_and_edited: None,
    lease_owner: Param(AFTER_DECISION),
    lease_secs: Param(AFTER_DECISION + 1),
    first_sent: Param(AFTER_DECISION + 2),
};

const DENYING_OR_EDITING_PARAMS: TakingParams = TakingParams {
    denied_and_edited: Some(DeniedAndEditedParams {
        denied_positions: Param(AFTER_DECISION),
        denied_outcomes: Param(AFTER_DECISION + 1),
        denied_errors: Param(AFTER_DECISION + 2),
        denied_contents: Param(AFTER_DECISION + 3),
        denied_contents_sealed: Param(AFTER_DECISION + 4),
        edited_positions: Param(AFTER_DECISION + 5),
        edited_arguments: Param(AFTER_DECISION + 6),
        edited_arguments_sealed: Param(AFTER_DECISION + 7),
    }),
    lease_owner: Param(AFTER_DECISION + 8),
    lease_secs: Param(AFTER_DECISION + 9),
    first_sent: Param(AFTER_DECISION + 10),
};

/// The updates of the calls a decision denies and of those it edits, run only once the run moved on. An edited call
/// that is the first to be sent is marked started here (one update per row).
fn denied_and_edited(calls: &DeniedAndEditedParams, first_sent: Param) -> String {
    let DeniedAndEditedParams {
        denied_positions,
        denied_outcomes,
        denied_errors,
        denied_contents,
        denied_contents_sealed,
        edited_positions,
        edited_arguments,
        edited_arguments_sealed,
    } = calls;
    format!(
        "denied as (
                 update turn_calls c set outcome = r.outcome, is_error = r.is_error, content = r.content,
                                         content_sealed = r.content_sealed, finished_at = now()
                 from unnest({denied_positions}::int[], {denied_outcomes}::text[], {denied_errors}::bool[], {denied_contents}::text[], {denied_contents_sealed}::bytea[])
                      as r(position, outcome, is_error, content, content_sealed)
                 where c.run_id = {RUN} and c.turn_index = {TURN} and c.position = r.position and c.outcome is null
                   and exists (select from resuming)
                 returning c.position
             ), edited as (
                 update turn_calls c set edited_arguments = e.arguments, edited_arguments_sealed = e.arguments_sealed,
                                         started_at = case when c.position = {first_sent} and c.started_at is null
                                                               and c.outcome is null
                                                          then now() else c.started_at end
                 from unnest({edited_positions}::int[], {edited_arguments}::text[], {edited_arguments_sealed}::bytea[]) as e(position, arguments, arguments_sealed)
                 where c.run_id = {RUN} and c.turn_index = {TURN} and c.position = e.position
                   and exists (select from resuming)
                 returning c.position
             ), "
    )
}

/// The taking statement, with the denied and edited calls' updates or without them, its placeholders where `params`
/// puts them.
fn taking_statement(params: &TakingParams) -> String {
    let TakingParams {
        lease_owner: owner,
        lease_secs: seconds,
        first_sent: first,
        ..
    } = params;
    let (denied_and_edited, not_edited) = match &params.denied_and_edited {
        Some(calls) => (
            denied_and_edited(calls, params.first_sent),
            format!(" and c.position <> all({}::int[])", calls.edited_positions),
        ),
        None => (String::new(), String::new()),
    };
    let decision = DECISION.list(DecisionColumns::COUNT);
    format!(
        "with resuming as (
             update runs set status = 'resuming', lease_owner = {owner},
                 lease_until = now() + make_interval(secs => {seconds}), updated_at = now()
             where id = {RUN}{still_waiting}
             returning id
         ), decision as (
             insert into approval_events (run_id, turn_index, approved, decider_uid, decided_by, reason,
                                          turn_digest, client_name, token_kid, calls)
             select {RUN}, {TURN}, {decision} from resuming
             returning {DECISION_COLUMNS}
         ), {denied_and_edited}started as (
             update turn_calls c set started_at = now()
             where c.run_id = {RUN} and c.turn_index = {TURN} and c.position = {first}
               and c.started_at is null and c.outcome is null{not_edited}
               and exists (select from resuming)
             returning c.position
         )
         select decision.*,
                exists (select 1 from turn_calls c
                        where c.run_id = {RUN} and c.turn_index = {TURN} and c.position = {first}
                          and c.started_at is null and c.outcome is null) as first_started
         from decision",
        still_waiting = still_waiting(TURN),
    )
}

/// Binds the denied and edited calls' parameters: the denied calls' positions, outcomes, errors and contents (clear or
/// sealed), then the edited calls' positions and arguments (clear or sealed).
fn bind_denied_and_edited<'q>(
    query: Positional<'q>,
    calls: &DeniedAndEditedParams,
    taking: &TakingTurn<'q>,
) -> Positional<'q> {
    let (run_id, turn_index) = (taking.decision.run_id, taking.decision.turn_index);
    let (contents, contents_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = taking
        .denied
        .iter()
        .map(|(position, result)| {
            let row = SealedRow::call(run_id, turn_index, *position);
            let stored = sealed::seal(taking.sealer, Column::CallContent, row, &result.content);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let (edited, edited_sealed): (Vec<Option<String>>, Vec<Option<Vec<u8>>>) = taking
        .edits
        .iter()
        .map(|(position, arguments)| {
            let row = SealedRow::call(run_id, turn_index, *position);
            let stored = sealed::seal(taking.sealer, Column::CallEditedArguments, row, arguments);
            (stored.clear, stored.sealed)
        })
        .unzip();
    let denied = taking.denied;
    query
        .bind(
            calls.denied_positions,
            denied.iter().map(|(p, _)| *p).collect::<Vec<i32>>(),
        )
        .bind(
            calls.denied_outcomes,
            denied
                .iter()
                .map(|(_, r)| r.outcome.as_str())
                .collect::<Vec<&str>>(),
        )
        .bind(
            calls.denied_errors,
            denied
                .iter()
                .map(|(_, r)| r.is_error)
                .collect::<Vec<bool>>(),
        )
        .bind(calls.denied_contents, contents)
        .bind(calls.denied_contents_sealed, contents_sealed)
        .bind(
            calls.edited_positions,
            taking.edits.iter().map(|(p, _)| *p).collect::<Vec<i32>>(),
        )
        .bind(calls.edited_arguments, edited)
        .bind(calls.edited_arguments_sealed, edited_sealed)
}

#[cfg(test)]
mod tests {
    use super::super::closing_params::placeholders;
    use super::*;

    #[test]
    fn a_plain_approval_binds_its_lease_right_after_the_decision() {
        let statement = taking_statement(&PLAIN);
        let read: Vec<u8> = placeholders(&statement).into_iter().collect();
        assert_eq!(read, (1..=13).collect::<Vec<u8>>());
        assert!(statement.contains("lease_owner = $11"));
        assert!(!statement.contains("denied as"));
    }

    #[test]
    fn an_approval_that_denies_or_edits_binds_its_lease_after_the_eight_of_the_calls() {
        let statement = taking_statement(&DENYING_OR_EDITING_PARAMS);
        let read: Vec<u8> = placeholders(&statement).into_iter().collect();
        assert_eq!(read, (1..=21).collect::<Vec<u8>>());
        assert!(statement.contains("lease_owner = $19"));
        assert!(statement.contains("c.position <> all($16::int[])"));
    }
}
