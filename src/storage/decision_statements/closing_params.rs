//! The parameters of the statements that close a turn: their positions, named once here, and the columns bound to
//! them. The statements' text writes each placeholder from its name ([`Param`]) and [`ClosingColumns::bind`] binds
//! each value under the same name through [`Positional`], so a placeholder and its bind cannot drift apart.

use std::fmt;

use sqlx::types::Json;
use sqlx::{Encode, Postgres, Type};
use uuid::Uuid;

use super::super::Query;
use super::super::runs::RunRow;
use super::super::sealed::{self, Column, Row as SealedRow};
use crate::domain::event_payloads::EventData;
use crate::domain::privacy::ToolEvent;
use crate::domain::results::ToolResult;
use crate::sealing::Sealer;

/// How a decided turn ends (what its closing statement's columns are bound from): the results still to store, the tool events to write, and the event to record.
pub struct ClosingTurn<'a> {
    pub run: &'a RunRow,
    /// Seals result contents and tool-event payloads before they are stored.
    pub sealer: &'a Sealer,
    /// `(position, result)` of calls whose result is not stored yet; a call that has one keeps it.
    pub results: &'a [(i32, &'a ToolResult)],
    /// `(position, event)`, already filtered by the privacy level.
    pub events: &'a [(i32, ToolEvent)],
    /// The data of the `run.resumed` event (`domain::event_payloads::data`): ids and metadata only.
    pub resumed_event: &'a EventData,
}

/// A statement's parameter by its position, written `$n` where the statement uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Param(pub(super) u8);

impl Param {
    /// This parameter and the `count - 1` after it, as a statement lists them: `$22, $23, …`.
    pub(super) fn list(self, count: u8) -> String {
        (0..count)
            .map(|offset| Param(self.0 + offset).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}", self.0)
    }
}

// The positions of the closing columns, in the order they are bound: `$1` to `$21` of every closing statement.
pub(super) const RUN_ID: Param = Param(1);
pub(super) const TURN_INDEX: Param = Param(2);
pub(super) const RESULT_POSITIONS: Param = Param(3);
pub(super) const RESULT_OUTCOMES: Param = Param(4);
pub(super) const RESULT_ERRORS: Param = Param(5);
pub(super) const RESULT_CONTENTS: Param = Param(6);
pub(super) const EVENT_POSITIONS: Param = Param(7);
pub(super) const EVENT_CALL_IDS: Param = Param(8);
pub(super) const EVENT_TOOLS: Param = Param(9);
pub(super) const EVENT_OUTCOMES: Param = Param(10);
pub(super) const EVENT_ERRORS: Param = Param(11);
pub(super) const EVENT_DECIDED_BY: Param = Param(12);
pub(super) const EVENT_PRIVACY_LEVELS: Param = Param(13);
pub(super) const EVENT_ARGUMENTS_BYTES: Param = Param(14);
pub(super) const EVENT_RESULT_BYTES: Param = Param(15);
pub(super) const EVENT_ARGUMENTS: Param = Param(16);
pub(super) const EVENT_RESULTS: Param = Param(17);
pub(super) const RESUMED_EVENT: Param = Param(18);
pub(super) const RESULT_CONTENTS_SEALED: Param = Param(19);
pub(super) const EVENT_ARGUMENTS_SEALED: Param = Param(20);
pub(super) const EVENT_RESULTS_SEALED: Param = Param(21);
/// The first position after the closing columns, where a statement's own parameters begin (the lease's owner of
/// `close_held_turn`, the decision of `record_denial`).
pub(super) const AFTER_COLUMNS: Param = Param(22);

/// A statement whose parameters are bound by name: each bind says which placeholder it fills, and one bound out of
/// its place is a defect caught by every test that runs the statement (checked in debug builds only: the hot path
/// pays nothing for it).
pub(super) struct Positional<'q> {
    query: Query<'q>,
    next: u8,
}

impl<'q> Positional<'q> {
    pub(super) fn new(query: Query<'q>) -> Self {
        Positional { query, next: 1 }
    }

    /// Binds `value` as `param`, which must be the next position.
    pub(super) fn bind<'t, T: Encode<'t, Postgres> + Type<Postgres>>(
        mut self,
        param: Param,
        value: T,
    ) -> Self {
        debug_assert_eq!(
            param,
            Param(self.next),
            "a parameter bound out of its place"
        );
        self.next += 1;
        self.query = self.query.bind(value);
        self
    }

    /// Binds `count` parameters from `first`, which must be the next position, by a function that binds them in
    /// order (one that another module owns, as `decisions::bind_decision`).
    pub(super) fn bind_many(
        mut self,
        first: Param,
        count: u8,
        bind: impl FnOnce(Query<'q>) -> Query<'q>,
    ) -> Self {
        debug_assert_eq!(
            first,
            Param(self.next),
            "parameters bound out of their place"
        );
        self.next += count;
        self.query = bind(self.query);
        self
    }

    pub(super) fn into_query(self) -> Query<'q> {
        self.query
    }
}

/// What a statement that closes a turn stores, column by column, sealed where it is stored encrypted: `$1` to `$21` of
/// every closing statement. Owned, so that a denial can wait for the writer that batches it (`resume::denial_writer`).
#[derive(Debug, Clone)]
pub struct ClosingColumns {
    pub(in crate::storage) run_id: Uuid,
    pub(in crate::storage) turn_index: i32,
    pub(in crate::storage) result_positions: Vec<i32>,
    pub(in crate::storage) result_outcomes: Vec<&'static str>,
    pub(in crate::storage) result_errors: Vec<bool>,
    pub(in crate::storage) result_contents: Vec<Option<String>>,
    pub(in crate::storage) result_contents_sealed: Vec<Option<Vec<u8>>>,
    pub(in crate::storage) event_positions: Vec<i32>,
    pub(in crate::storage) event_call_ids: Vec<String>,
    pub(in crate::storage) event_tools: Vec<String>,
    pub(in crate::storage) event_outcomes: Vec<&'static str>,
    pub(in crate::storage) event_errors: Vec<bool>,
    pub(in crate::storage) event_decided_by: Vec<&'static str>,
    pub(in crate::storage) event_privacy_levels: Vec<&'static str>,
    pub(in crate::storage) event_arguments_bytes: Vec<i32>,
    pub(in crate::storage) event_result_bytes: Vec<i32>,
    pub(in crate::storage) event_arguments: Vec<Option<String>>,
    pub(in crate::storage) event_results: Vec<Option<String>>,
    pub(in crate::storage) event_arguments_sealed: Vec<Option<Vec<u8>>>,
    pub(in crate::storage) event_results_sealed: Vec<Option<Vec<u8>>>,
    pub(in crate::storage) resumed_event: Json<EventData>,
}

impl ClosingColumns {
    /// The columns of `closing`, sealed with its sealer.
    pub fn of(closing: &ClosingTurn<'_>) -> Self {
        let (run_id, turn_index) = (closing.run.id, closing.run.turn_index);
        let results = closing.results;
        let events = closing.events;
        let (result_contents, result_contents_sealed) = results
            .iter()
            .map(|(position, result)| {
                let row = SealedRow::call(run_id, turn_index, *position);
                let stored =
                    sealed::seal(closing.sealer, Column::CallContent, row, &result.content);
                (stored.clear, stored.sealed)
            })
            .unzip();
        let mut columns = ClosingColumns {
            run_id,
            turn_index,
            result_positions: results.iter().map(|(position, _)| *position).collect(),
            result_outcomes: results.iter().map(|(_, r)| r.outcome.as_str()).collect(),
            result_errors: results.iter().map(|(_, r)| r.is_error).collect(),
            result_contents,
            result_contents_sealed,
            event_positions: Vec::with_capacity(events.len()),
            event_call_ids: Vec::with_capacity(events.len()),
            event_tools: Vec::with_capacity(events.len()),
            event_outcomes: Vec::with_capacity(events.len()),
            event_errors: Vec::with_capacity(events.len()),
            event_decided_by: Vec::with_capacity(events.len()),
            event_privacy_levels: Vec::with_capacity(events.len()),
            event_arguments_bytes: Vec::with_capacity(events.len()),
            event_result_bytes: Vec::with_capacity(events.len()),
            event_arguments: Vec::with_capacity(events.len()),
            event_results: Vec::with_capacity(events.len()),
            event_arguments_sealed: Vec::with_capacity(events.len()),
            event_results_sealed: Vec::with_capacity(events.len()),
            resumed_event: Json(closing.resumed_event.clone()),
        };
        for (position, event) in events {
            let row = SealedRow::call(run_id, turn_index, *position);
            let arguments = sealed::seal_optional(
                closing.sealer,
                Column::EventArguments,
                row,
                event.arguments.as_deref(),
            );
            let result = sealed::seal_optional(
                closing.sealer,
                Column::EventResult,
                row,
                event.result.as_deref(),
            );
            columns.event_positions.push(*position);
            columns.event_call_ids.push(event.call_id.clone());
            columns.event_tools.push(event.tool.clone());
            columns.event_outcomes.push(event.outcome.as_str());
            columns.event_errors.push(event.is_error);
            columns.event_decided_by.push(event.decided_by.as_str());
            columns
                .event_privacy_levels
                .push(event.privacy_level.as_str());
            columns.event_arguments_bytes.push(event.arguments_bytes);
            columns.event_result_bytes.push(event.result_bytes);
            columns.event_arguments.push(arguments.clear);
            columns.event_arguments_sealed.push(arguments.sealed);
            columns.event_results.push(result.clear);
            columns.event_results_sealed.push(result.sealed);
        }
        columns
    }

    /// Binds them as `$1` to `$21` of the closing statements, each under its name.
    pub(super) fn bind(self, query: Query<'_>) -> Positional<'_> {
        Positional::new(query)
            .bind(RUN_ID, self.run_id)
            .bind(TURN_INDEX, self.turn_index)
            .bind(RESULT_POSITIONS, self.result_positions)
            .bind(RESULT_OUTCOMES, self.result_outcomes)
            .bind(RESULT_ERRORS, self.result_errors)
            .bind(RESULT_CONTENTS, self.result_contents)
            .bind(EVENT_POSITIONS, self.event_positions)
            .bind(EVENT_CALL_IDS, self.event_call_ids)
            .bind(EVENT_TOOLS, self.event_tools)
            .bind(EVENT_OUTCOMES, self.event_outcomes)
            .bind(EVENT_ERRORS, self.event_errors)
            .bind(EVENT_DECIDED_BY, self.event_decided_by)
            .bind(EVENT_PRIVACY_LEVELS, self.event_privacy_levels)
            .bind(EVENT_ARGUMENTS_BYTES, self.event_arguments_bytes)
            .bind(EVENT_RESULT_BYTES, self.event_result_bytes)
            .bind(EVENT_ARGUMENTS, self.event_arguments)
            .bind(EVENT_RESULTS, self.event_results)
            .bind(RESUMED_EVENT, self.resumed_event)
            .bind(RESULT_CONTENTS_SEALED, self.result_contents_sealed)
            .bind(EVENT_ARGUMENTS_SEALED, self.event_arguments_sealed)
            .bind(EVENT_RESULTS_SEALED, self.event_results_sealed)
    }
}

/// The positions of the placeholders a statement's text uses, each once.
#[cfg(test)]
pub(super) fn placeholders(statement: &str) -> std::collections::BTreeSet<u8> {
    statement
        .split('$')
        .skip(1)
        .filter_map(|after| {
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_is_written_as_a_dollar_and_its_position() {
        assert_eq!(Param(7).to_string(), "$7");
        assert_eq!(Param(22).list(3), "$22, $23, $24");
    }

    #[test]
    fn the_closing_columns_are_numbered_one_to_twenty_one_in_the_order_they_are_bound() {
        let bound = [
            RUN_ID,
            TURN_INDEX,
            RESULT_POSITIONS,
            RESULT_OUTCOMES,
            RESULT_ERRORS,
            RESULT_CONTENTS,
            EVENT_POSITIONS,
            EVENT_CALL_IDS,
            EVENT_TOOLS,
            EVENT_OUTCOMES,
            EVENT_ERRORS,
            EVENT_DECIDED_BY,
            EVENT_PRIVACY_LEVELS,
            EVENT_ARGUMENTS_BYTES,
            EVENT_RESULT_BYTES,
            EVENT_ARGUMENTS,
            EVENT_RESULTS,
            RESUMED_EVENT,
            RESULT_CONTENTS_SEALED,
            EVENT_ARGUMENTS_SEALED,
            EVENT_RESULTS_SEALED,
        ];
        let positions: Vec<u8> = bound.iter().map(|param| param.0).collect();
        assert_eq!(positions, (1..=21).collect::<Vec<u8>>());
        assert_eq!(AFTER_COLUMNS, Param(22));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "a parameter bound out of its place")]
    fn a_parameter_bound_out_of_its_place_is_caught() {
        let query = super::super::super::sql::query("select $1, $2");
        let _ = Positional::new(query).bind(TURN_INDEX, 1_i32);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "parameters bound out of their place")]
    fn parameters_bound_by_another_module_out_of_their_place_are_caught() {
        let query = super::super::super::sql::query("select $1, $2, $3");
        let _ = Positional::new(query)
            .bind(RUN_ID, 1_i32)
            .bind_many(Param(3), 1, |query| query.bind(3_i32));
    }

    #[test]
    fn placeholders_are_read_with_every_digit_of_their_position() {
        let read = placeholders("select $1, $12::int[], $1 || '$'");
        assert_eq!(read.into_iter().collect::<Vec<_>>(), vec![1, 12]);
    }
}
