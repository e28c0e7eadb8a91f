//! The transcript members of a registration or a new turn, by format (docs/design.md §14): each format's own list and
//! system member, kept as the text the loop sent, checked, and refused with 422 naming what is wrong and where.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::ApiError;
use crate::domain::model_input::ModelInputFormat;
use crate::domain::native_turn::{self, members};
use crate::domain::transcript::{self, PendingCall};
use crate::domain::value_text;

/// A transcript member as the loop sent it: read as its text, which is what is stored. It serializes as its parsed
/// value would, keys sorted, so that a body's hash (`serde_json::to_vec` of the body, as before formats existed) is
/// one per meaning, whatever the member's spacing or key order; written from the text (`value_text::canonical`),
/// without the tree.
#[derive(Debug)]
pub struct RawMember(pub Box<RawValue>);

impl<'de> Deserialize<'de> for RawMember {
    /// A member's text; `null` is refused (422 `invalid_body`, whatever the run), as the spec types every transcript
    /// member (`http::not_null`). An `Option<RawMember>` without `not_null::present` still reads `null` as absent.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if raw.get() == "null" {
            return Err(serde::de::Error::invalid_type(
                serde::de::Unexpected::Unit,
                &"a JSON value other than null",
            ));
        }
        Ok(RawMember(raw))
    }
}

impl Serialize for RawMember {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let canonical = value_text::canonical(self.0.get()).map_err(serde::ser::Error::custom)?;
        RawValue::from_string(canonical)
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

/// Every format's transcript members, as a body may carry them (only those of its format are allowed). The bodies
/// name them as their own fields: `serde(flatten)` would not work with `deny_unknown_fields` or `RawValue`.
#[derive(Debug, Default)]
pub struct Members {
    pub messages: Option<RawMember>,
    pub system: Option<RawMember>,
    pub instructions: Option<RawMember>,
    pub input: Option<RawMember>,
    pub system_instruction: Option<RawMember>,
    pub contents: Option<RawMember>,
}

/// A format's members, checked: the list's text and entries, the system member's text, and the pending calls.
pub struct Checked<'a> {
    pub list: &'a RawValue,
    pub system: Option<&'a RawValue>,
    pub calls: Vec<PendingCall>,
}

fn invalid_body(detail: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid_body", detail)
}

fn invalid_transcript(detail: impl Into<String>) -> ApiError {
    ApiError::unprocessable("invalid_transcript", detail)
}

/// The names of the formats' members, with the format each belongs to (OpenAI chat's `messages` is Anthropic's too).
fn named(members: &Members) -> [(&'static str, bool); 6] {
    [
        ("messages", members.messages.is_some()),
        ("system", members.system.is_some()),
        ("instructions", members.instructions.is_some()),
        ("input", members.input.is_some()),
        ("system_instruction", members.system_instruction.is_some()),
        ("contents", members.contents.is_some()),
    ]
}

/// The format that has `member`, for the refusal of a member of another format.
fn owner_of(member: &str) -> &'static str {
    match member {
        "messages" => "openai-chat and anthropic",
        "system" => "anthropic",
        "instructions" | "input" => "openai-responses",
        _ => "gemini",
    }
}

impl Members {
    /// The list and system member of `format`; 422 for a member of another format, or a missing list. `with_system`
    /// is false for a new turn, which continues the list only.
    pub fn of_format<'a>(
        &'a self,
        format: ModelInputFormat,
        with_system: bool,
    ) -> Result<(&'a RawValue, Option<&'a RawValue>), ApiError> {
        let (list_name, system_name) = members(format);
        let system_allowed = with_system && format != ModelInputFormat::OpenAiChat;
        let takes = if system_allowed {
            format!("{system_name} and {list_name}")
        } else {
            list_name.to_owned()
        };
        for (name, present) in named(self) {
            if present && name != list_name && !(system_allowed && name == system_name) {
                let why = if name == system_name && format != ModelInputFormat::OpenAiChat {
                    "the system member is registered once, with the run".to_owned()
                } else {
                    format!("{name} is a member of {}", owner_of(name))
                };
                return Err(invalid_body(format!(
                    "{name}: {why}; {} in format {} takes {takes}",
                    if with_system {
                        "a run"
                    } else {
                        "a new turn of a run"
                    },
                    format.as_str()
                )));
            }
        }
        let raw = |member: &'a Option<RawMember>| member.as_ref().map(|member| &*member.0);
        let list = match list_name {
            "messages" => raw(&self.messages),
            "input" => raw(&self.input),
            _ => raw(&self.contents),
        };
        let system = match system_name {
            "system" => raw(&self.system),
            "instructions" => raw(&self.instructions),
            _ => raw(&self.system_instruction),
        };
        let list = list.ok_or_else(|| {
            invalid_body(format!(
                "missing field `{list_name}`: a run in format {} needs it",
                format.as_str()
            ))
        })?;
        Ok((list, system.filter(|_| system_allowed)))
    }

    /// Checks the members of `format` and finds the pending calls. `earlier_ids` and `earlier_calls` are the run's
    /// call ids and number of calls so far (none at registration); `earlier_chat` gives the ids an OpenAI chat
    /// transcript holds, as it always has, from its parsed messages.
    pub fn check(
        &self,
        format: ModelInputFormat,
        with_system: bool,
        earlier_ids: &HashSet<String>,
        earlier_calls: usize,
    ) -> Result<Checked<'_>, ApiError> {
        let (list, system) = self.of_format(format, with_system)?;
        let (list_name, system_name) = members(format);
        let entries: Vec<Value> = serde_json::from_str(list.get())
            .map_err(|error| invalid_body(format!("{list_name}: {error}")))?;
        let calls = if format == ModelInputFormat::OpenAiChat {
            transcript::validate(&entries, earlier_ids)
                .map_err(|error| invalid_transcript(error.to_string()))?
        } else {
            if let Some(system) = system {
                let system: Value = serde_json::from_str(system.get())
                    .map_err(|error| invalid_body(format!("{system_name}: {error}")))?;
                native_turn::check_system(format, &system)
                    .map_err(|error| invalid_transcript(error.0))?;
            }
            native_turn::validate(format, &entries, list.get(), earlier_ids, earlier_calls)
                .map_err(|error| invalid_transcript(error.0))?
        };
        Ok(Checked {
            list,
            system,
            calls,
        })
    }
}

/// Refuses (400 `malformed_json`, as a body parsed whole would be) a member whose text serde_json reads as JSON but
/// not into a value: a number beyond a double, an escaped lone surrogate. Checked before anything else reads it.
pub fn well_formed(members: &[&Option<RawMember>]) -> Result<(), ApiError> {
    for member in members.iter().filter_map(|member| member.as_ref()) {
        if let Err(error) = value_text::check(member.0.get()) {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "malformed_json",
                error.to_string(),
            ));
        }
    }
    Ok(())
}

/// The entries of a list's text, without its brackets (the text between `[` and `]`, spaces kept).
pub fn entries_text(list: &RawValue) -> &str {
    let text = list.get();
    &text[1..text.len() - 1]
}
