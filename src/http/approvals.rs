//! `GET /v1/approvals`: the inbox of the AI Tasks module. The runs waiting for approval that an acting user may
//! decide (their own; everyone's for admins and approvers), newest first, cursor-paged.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Query, scope};
use super::integer;
use super::views::DecidingRuleView;
use crate::domain::authorize::Refusal;
use crate::domain::gate;
use crate::domain::model_input::ModelInputFormat;
use crate::domain::redact::redact;
use crate::domain::remembered::{RuleCall, RunAtHand};
use crate::domain::transcript::is_valid_tool_name;
use crate::domain::vocabulary::{Effect, ExecutorKind, PrivacyLevel};
use crate::executor::Executors;
use crate::state::AppState;
use crate::storage::approvals::{self, InboxCallRow, InboxQuery, WaitingRun};
use crate::storage::users;

const DEFAULT_LIMIT: i64 = 50;
const MAX_LIMIT: i64 = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxParams {
    /// The backend user who will decide.
    #[serde(deserialize_with = "integer::query")]
    acting_uid: i64,
    #[serde(default, deserialize_with = "integer::query_optional")]
    owner_uid: Option<i64>,
    tool: Option<String>,
    #[serde(default, deserialize_with = "integer::query_optional")]
    limit: Option<i64>,
    cursor: Option<String>,
}

#[derive(Debug, Serialize)]
struct InboxPage {
    items: Vec<InboxItem>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    next_cursor: Option<String>,
}

#[derive(Debug, Serialize)]
struct InboxItem {
    run_id: Uuid,
    owner_uid: i64,
    privacy_level: PrivacyLevel,
    /// The format the run was registered in and answers in (docs/design.md §14).
    format: ModelInputFormat,
    /// Where the run came from (docs/design.md §2); absent when its registration named none.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    require_second_approver: bool,
    /// When the turn expires if nobody decides it; `null`: never. Expired turns are not listed.
    expires_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    turn: InboxTurn,
}

#[derive(Debug, Serialize)]
struct InboxTurn {
    index: i32,
    digest: String,
    pending_calls: Vec<InboxCall>,
}

#[derive(Debug, Serialize)]
struct InboxCall {
    id: String,
    name: String,
    effect: Effect,
    /// Who runs the call once approved, and whether a decider may edit it (docs/design.md §15).
    executor: ExecutorKind,
    editable: bool,
    /// Present only where the run's privacy level allows: verbatim at `full`, redacted at `redacted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<String>,
    /// Present, and true, when the level allows arguments but the page had loaded INBOX_ARGUMENTS_BYTES of them
    /// already; `GET /v1/runs/{id}` shows them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    arguments_omitted: bool,
    /// Whether the acting user may approve this call (docs/design.md §4): false for a write call of a tool outside
    /// their `approvable_tools`. An approval of the turn is refused while any call is false; a denial never is.
    approvable: bool,
    /// The remembered decision that would decide this call now (docs/design.md §18), as the run view shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<DecidingRuleView>,
}

pub async fn inbox(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::ApprovalsRead>,
    Query(params): Query<InboxParams>,
) -> Result<impl IntoResponse, ApiError> {
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::unprocessable(
            "invalid_query",
            format!("limit must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let after = params.cursor.as_deref().map(parse_cursor).transpose()?;
    // The decision rules' refusals, in the words of this route's parameter: the inbox has no decider.
    let refused = |refusal: Refusal, detail: &str| {
        ApiError::new(StatusCode::FORBIDDEN, refusal.code(), detail)
    };
    let acting = users::find(&state.pool, &caller.tenant, params.acting_uid)
        .await?
        .ok_or_else(|| {
            refused(
                Refusal::UnknownDecider,
                "acting_uid names no backend user of this client's tenant; PUT /v1/users/{uid} first",
            )
        })?;
    if acting.disabled {
        return Err(refused(
            Refusal::DisabledDecider,
            "acting_uid names a disabled backend user",
        ));
    }
    // Registration refuses any other tool name, so a filter that is none matches no run (and cannot reach the
    // database, which refuses some texts, such as one holding U+0000, with an error).
    if params
        .tool
        .as_deref()
        .is_some_and(|tool| !is_valid_tool_name(tool))
    {
        return Ok(axum::Json(InboxPage {
            items: Vec::new(),
            next_cursor: None,
        }));
    }
    let sees_everyone = acting.is_admin || acting.can_approve_others;
    let query = InboxQuery {
        tenant: &caller.tenant,
        only_owner: (!sees_everyone).then_some(acting.uid),
        owner_filter: params.owner_uid,
        tool_filter: params.tool.as_deref(),
        after,
        // One more than asked tells whether another page follows.
        limit: limit + 1,
    };
    let mut runs = approvals::waiting_runs(&state.pool, &query).await?;
    let next_cursor = if runs.len() as i64 > limit {
        runs.truncate(limit as usize);
        runs.last().map(cursor_of)
    } else {
        None
    };
    let floor = state.resumer.privacy_floor;
    let levels: Vec<PrivacyLevel> = runs
        .iter()
        .map(|run| floor.stricter(run.privacy_level.0))
        .collect();
    let shows_arguments: Vec<bool> = levels.iter().map(|level| shows_arguments(*level)).collect();
    let calls = approvals::pending_calls(
        &state.pool,
        state.pool.sealer(),
        &caller.tenant,
        &runs,
        &shows_arguments,
        state.limits.work.inbox_arguments_bytes,
    )
    .await?;
    let mut calls_by_run: HashMap<Uuid, Vec<InboxCallRow>> = HashMap::new();
    for call in calls {
        calls_by_run.entry(call.run_id).or_default().push(call);
    }
    let resumer = std::sync::Arc::clone(&state.resumer);
    let approvable_tools = acting.approvable_tools;
    // Redacting a page's arguments (up to INBOX_ARGUMENTS_BYTES of them) is CPU work: off the async workers.
    let items = tokio::task::spawn_blocking(move || {
        runs.into_iter()
            .zip(levels)
            .map(|(run, level)| {
                let calls = calls_by_run.remove(&run.id).unwrap_or_default();
                let approver = gate::Approver::User {
                    approvable_tools: approvable_tools.as_deref(),
                };
                item(run, level, calls, &resumer.executors, approver)
            })
            .collect::<Vec<InboxItem>>()
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(axum::Json(InboxPage { items, next_cursor }))
}

fn shows_arguments(level: PrivacyLevel) -> bool {
    matches!(level, PrivacyLevel::Full | PrivacyLevel::Redacted)
}

fn item(
    run: WaitingRun,
    level: PrivacyLevel,
    calls: Vec<InboxCallRow>,
    executors: &Executors,
    approver: gate::Approver<'_>,
) -> InboxItem {
    let at_hand = RunAtHand {
        owner_uid: run.owner_uid,
        require_second_approver: run.require_second_approver,
    };
    let pending_calls = calls
        .into_iter()
        .map(|call| {
            let effect = executors.effect(&call.tool, Some(call.effect()));
            // The arguments matter to a rule only when one of them matches on arguments; then they were read.
            let rule_call = RuleCall {
                tool: &call.tool,
                arguments: call.rule_arguments.as_deref().unwrap_or_default(),
                effect,
            };
            let rule = (!call.rules_unknown)
                // A key reads the call's arguments in the run view whatever the inbox shows of them.
                .then(|| DecidingRuleView::deciding(&call.rules, &at_hand, &rule_call, true))
                .flatten();
            let declared = run.declared(&call.tool);
            let executor = executors.executor_kind(&call.tool, declared.and_then(|d| d.executor));
            let editable = executors.editable(&call.tool, declared.and_then(|d| d.editable));
            let approvable = gate::may_approve(
                approver,
                gate::ApprovedCall {
                    tool: &call.tool,
                    effect,
                    edited: false,
                },
            );
            InboxCall {
                effect,
                executor,
                editable,
                approvable,
                rule,
                arguments: match level {
                    PrivacyLevel::Full => call.arguments,
                    PrivacyLevel::Redacted => call.arguments.as_deref().map(redact),
                    PrivacyLevel::Metadata | PrivacyLevel::None => None,
                },
                arguments_omitted: call.arguments_omitted,
                id: call.call_id,
                name: call.tool,
            }
        })
        .collect();
    InboxItem {
        run_id: run.id,
        owner_uid: run.owner_uid,
        privacy_level: level,
        format: run.format.0,
        source: run.source,
        require_second_approver: run.require_second_approver,
        expires_at: run.expires_at,
        created_at: run.created_at,
        turn: InboxTurn {
            index: run.turn_index,
            digest: run.turn_digest,
            pending_calls,
        },
    }
}

/// A cursor is the last item's creation time in microseconds and its id: opaque to clients, stable for paging.
fn cursor_of(run: &WaitingRun) -> String {
    format!("{}_{}", run.created_at.timestamp_micros(), run.id.simple())
}

/// Reads a cursor of exactly the form `cursor_of` writes (and the spec's pattern gives): `-?[0-9]{1,16}_` and 32
/// lowercase hex digits. Any other text, even one a lenient parser would take, names no place in the list.
fn parse_cursor(text: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let invalid =
        || ApiError::unprocessable("invalid_cursor", "cursor is not one this service gave out");
    let (micros, id) = text.split_once('_').ok_or_else(invalid)?;
    let digits = micros.strip_prefix('-').unwrap_or(micros);
    let is_micros = (1..=16).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
    let is_id = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_micros || !is_id {
        return Err(invalid());
    }
    let at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(invalid)?;
    let id = Uuid::parse_str(id).map_err(|_| invalid())?;
    Ok((at, id))
}
