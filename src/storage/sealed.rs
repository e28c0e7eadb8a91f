//! Where the storage layer applies encryption at rest (docs/design.md §11): the associated data of every encrypted
//! column, and the choice between a value's clear and sealed column on the way in and out.
//!
//! The associated data names the table, the column and the row (run id, and turn and call position where the row
//! is a call's), so a sealed value copied anywhere else does not open. Every function that writes or reads an
//! encrypted column goes through [`seal`] and [`open`] here; `keys rotate` too.

use uuid::Uuid;

use super::StorageError;
use crate::sealing::Sealer;

/// An encrypted column, as it is named in the associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `runs.messages`, the transcript.
    Transcript,
    /// `runs.system`, the system member of a run in a provider's own format (docs/design.md §14).
    System,
    /// `runs.worker_state`, the state the worker registered with the run or its latest turn (docs/design.md §15).
    WorkerState,
    /// `turn_calls.arguments`, a call's proposed arguments.
    CallArguments,
    /// `turn_calls.content`, a call's result content.
    CallContent,
    /// `turn_calls.edited_arguments`, the arguments a decider approved a call with instead of the proposed ones.
    CallEditedArguments,
    /// `tool_events.arguments`.
    EventArguments,
    /// `tool_events.result`.
    EventResult,
    /// `webhook_subscriptions.secret`, a subscription's signing secret (docs/design.md §17).
    WebhookSecret,
    /// `webhook_subscriptions.previous_secret`, the secret before the last rotation, while it still signs.
    WebhookPreviousSecret,
    /// `remembered_rules.arguments`, the exact arguments a remembered decision matches (docs/design.md §18).
    RuleArguments,
}

impl Column {
    pub fn as_str(self) -> &'static str {
        match self {
            Column::Transcript => "runs.messages",
            Column::System => "runs.system",
            Column::WorkerState => "runs.worker_state",
            Column::CallArguments => "turn_calls.arguments",
            Column::CallContent => "turn_calls.content",
            Column::CallEditedArguments => "turn_calls.edited_arguments",
            Column::EventArguments => "tool_events.arguments",
            Column::EventResult => "tool_events.result",
            Column::WebhookSecret => "webhook_subscriptions.secret",
            Column::WebhookPreviousSecret => "webhook_subscriptions.previous_secret",
            Column::RuleArguments => "remembered_rules.arguments",
        }
    }
}

/// The row a value belongs to: a run (the transcript), or one call of one of its turns (calls and tool events). A
/// webhook subscription's row is named by its id in `run_id` ([`Row::subscription`]): the column in the associated
/// data tells the two apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub run_id: Uuid,
    /// `(turn index, position)` for a call's row; `None` for the run's own.
    pub call: Option<(i32, i32)>,
}

impl Row {
    pub fn run(run_id: Uuid) -> Self {
        Row { run_id, call: None }
    }

    pub fn subscription(id: Uuid) -> Self {
        Row {
            run_id: id,
            call: None,
        }
    }

    /// A remembered decision's row, named by the rule's id like a subscription's.
    pub fn rule(id: Uuid) -> Self {
        Row {
            run_id: id,
            call: None,
        }
    }

    pub fn call(run_id: Uuid, turn_index: i32, position: i32) -> Self {
        Row {
            run_id,
            call: Some((turn_index, position)),
        }
    }
}

/// The associated data of one value: column and row identity.
pub fn aad(column: Column, row: Row) -> Vec<u8> {
    match row.call {
        None => format!("{}|{}", column.as_str(), row.run_id),
        Some((turn, position)) => format!("{}|{}|{turn}|{position}", column.as_str(), row.run_id),
    }
    .into_bytes()
}

/// A value as it is stored: in its clear column, or sealed in its `*_sealed` column. Exactly one is `Some`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    pub clear: Option<String>,
    pub sealed: Option<Vec<u8>>,
}

/// The columns to store `text` in: sealed when keys are configured, clear otherwise.
pub fn seal(sealer: &Sealer, column: Column, row: Row, text: &str) -> Stored {
    match sealer.seal(&aad(column, row), text.as_bytes()) {
        Some(sealed) => Stored {
            clear: None,
            sealed: Some(sealed),
        },
        None => Stored {
            clear: Some(text.to_owned()),
            sealed: None,
        },
    }
}

/// Like [`seal`] for an optional value (a tool event's payload, absent below level `full`/`redacted`).
pub fn seal_optional(sealer: &Sealer, column: Column, row: Row, text: Option<&str>) -> Stored {
    text.map(|text| seal(sealer, column, row, text))
        .unwrap_or_default()
}

/// The text of a stored value: its clear column, or its sealed column opened. `None` when both are null.
/// A value that does not open is `Undecryptable`, logged here once with the run and key id, never its bytes.
pub fn open(
    sealer: &Sealer,
    column: Column,
    row: Row,
    clear: Option<String>,
    sealed: Option<&[u8]>,
) -> Result<Option<String>, StorageError> {
    let Some(sealed) = sealed else {
        return Ok(clear);
    };
    let undecryptable = |key_id: Option<&str>| {
        let key_id = key_id.unwrap_or("unknown").to_owned();
        tracing::error!(run_id = %row.run_id, key_id = %key_id, column = column.as_str(),
                        "a stored value does not decrypt");
        StorageError::Undecryptable {
            run_id: row.run_id,
            key_id,
        }
    };
    let plain = sealer
        .open(&aad(column, row), sealed)
        .map_err(|error| undecryptable(error.key_id()))?;
    String::from_utf8(plain)
        .map(Some)
        .map_err(|_| undecryptable(crate::sealing::key_id_of(sealed)))
}

/// Like [`open`] for a value that is never absent.
pub fn open_required(
    sealer: &Sealer,
    column: Column,
    row: Row,
    clear: Option<String>,
    sealed: Option<&[u8]>,
) -> Result<String, StorageError> {
    open(sealer, column, row, clear, sealed)?.ok_or_else(|| neither_clear_nor_sealed(column, row))
}

/// The error of a value that is never absent found with both its columns null.
pub fn neither_clear_nor_sealed(column: Column, row: Row) -> StorageError {
    StorageError::Corrupt(format!(
        "{} of run {} is neither clear nor sealed",
        column.as_str(),
        row.run_id
    ))
}
