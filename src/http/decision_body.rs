//! The body of `POST /v1/runs/{id}/decision` (docs/design.md §8) as it is posted, and the form it is in, checked by the
//! rules that need no run: what the decision route hands `resume` once they pass.

use serde::Deserialize;

use super::error::ApiError;
use super::integer;
use super::remembered_rules::rule_expiry;
use crate::domain::remembered::{Remember, RuleScope};
use crate::domain::verdicts::{CallVerdict, DecisionForm};
use crate::domain::vocabulary::DenialReason;

/// The whole-turn form `{approved, reason?, …}` or the per-call form `{calls, …}` (docs/design.md §8); exactly one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// `null` is refused (422 `invalid_body`), as the spec types it: only an absent member means the other form.
    #[serde(default, deserialize_with = "super::not_null::present")]
    approved: Option<bool>,
    /// Required with an API key, and `null` on purpose: a decision by nobody must be said, not forgotten. With a
    /// decision token it may be left out: the token's `sub` is the decider (`Some(None)` is an explicit `null`).
    #[serde(default, deserialize_with = "present_json_or_null")]
    pub(super) decider_uid: Option<Option<i64>>,
    pub(super) turn_digest: String,
    #[serde(default)]
    reason: Option<DenialReason>,
    /// Like `approved`: `calls: null` is no list, and refused rather than read as absent (schemathesis ST201).
    #[serde(default, deserialize_with = "super::not_null::present")]
    calls: Option<Vec<CallVerdictBody>>,
    /// Remember every call's verdict (whole-turn form; docs/design.md §18). Absent, not `null`, as the spec types
    /// it (`http::not_null`), like `remember_until`.
    #[serde(default, deserialize_with = "super::not_null::present")]
    remember: Option<RuleScope>,
    /// The end of `owner` scope rules (RFC 3339, at most MAX_RULE_TTL_DAYS ahead).
    #[serde(default, deserialize_with = "super::not_null::present")]
    remember_until: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallVerdictBody {
    call_id: String,
    approved: bool,
    #[serde(default)]
    reason: Option<DenialReason>,
    /// Edited arguments: the text of a JSON object, like the model's own arguments.
    #[serde(default)]
    arguments: Option<String>,
    /// Remember this verdict (docs/design.md §18).
    #[serde(default, deserialize_with = "super::not_null::present")]
    remember: Option<RuleScope>,
}

impl DecisionBody {
    /// The form the body is in, checked by the rules that need no turn; 422 with a stable code otherwise.
    pub(super) fn form(
        &mut self,
        max_arguments_bytes: usize,
        max_rule_ttl_days: u32,
    ) -> Result<(DecisionForm, Option<Remember>), ApiError> {
        let mut remembered = Vec::new();
        let form = match (self.approved, self.calls.take()) {
            (Some(_), Some(_)) => {
                return Err(ApiError::unprocessable(
                    "approved_and_calls",
                    "give either approved (the whole turn) or calls (a verdict per call), not both",
                ));
            }
            (None, None) => {
                return Err(ApiError::unprocessable(
                    "verdict_required",
                    "give approved (the whole turn) or calls (a verdict per call)",
                ));
            }
            (Some(approved), None) => {
                if approved && self.reason.is_some() {
                    return Err(ApiError::unprocessable(
                        "reason_requires_denial",
                        "a reason is given only with a denial",
                    ));
                }
                DecisionForm::WholeTurn {
                    approved,
                    reason: self.reason,
                }
            }
            (None, Some(calls)) => {
                if self.reason.is_some() {
                    return Err(ApiError::unprocessable(
                        "reason_with_calls",
                        "with calls, each denial carries its own reason",
                    ));
                }
                if self.remember.is_some() {
                    return Err(ApiError::unprocessable(
                        "remember_with_calls",
                        "with calls, each verdict carries its own remember",
                    ));
                }
                remembered = calls
                    .iter()
                    .filter_map(|call| call.remember.map(|scope| (call.call_id.clone(), scope)))
                    .collect();
                DecisionForm::PerCall(
                    calls
                        .into_iter()
                        .map(|call| CallVerdict {
                            call_id: call.call_id,
                            approved: call.approved,
                            reason: call.reason,
                            arguments: call.arguments,
                        })
                        .collect(),
                )
            }
        };
        form.check(max_arguments_bytes)
            .map_err(|error| ApiError::unprocessable(error.code(), error.to_string()))?;
        let remember = Remember {
            calls: remembered,
            every_call: self.remember,
            until: None,
        };
        let asked = remember.every_call.is_some() || !remember.calls.is_empty();
        let until = match (&self.remember_until, asked && remember.any_owner()) {
            (Some(text), true) => Some(rule_expiry(text, max_rule_ttl_days)?),
            (None, false) => None,
            (None, true) => {
                return Err(ApiError::unprocessable(
                    "remember_until_required",
                    "remember: \"owner\" makes rules that end: give remember_until",
                ));
            }
            (Some(_), false) => {
                // A code of its own, not `invalid_body`: the body fits the schema, which cannot tie the two members.
                return Err(ApiError::unprocessable(
                    "remember_until_without_owner",
                    "remember_until is the end of owner-scope rules: give it with remember: \"owner\" only",
                ));
            }
        };
        Ok((form, asked.then_some(Remember { until, ..remember })))
    }
}

/// A member that may be absent (`None`), `null` (`Some(None)`) or a uid (`Some(Some(uid))`).
fn present_json_or_null<'de, D>(deserializer: D) -> Result<Option<Option<i64>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    integer::json_or_null(deserializer).map(Some)
}
