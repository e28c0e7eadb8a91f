//! `POST /v1/runs`: a suspended run registered, its first turn checked and stored, decided at once when remembered
//! decisions cover it; the same body again is answered with the run, another under its id is a conflict.

use std::collections::{HashMap, HashSet};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::reading::run_view;
use super::registered_turn::{
    ExpiryBody, actor_of, answer_after_rules, meaning_hash, with_effects, within_limits,
};
use crate::domain::model_input::ModelInputFormat;
use crate::domain::run_source::is_valid_source;
use crate::domain::token_view::Reader;
use crate::domain::transcript::{self, TOOL_NAME_RULE, is_valid_tool_name};
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::{Effect, ExecutorKind, PrivacyLevel};
use crate::http::body_budget::LargeBodyPlace;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, Caller, scope};
use crate::http::format_members::{Members, RawMember, well_formed};
use crate::http::notify;
use crate::http::worker_state::{self, JsonWithState};
use crate::resume::remembered::{self, RegisteredTurn};
use crate::state::AppState;
use crate::storage::runs::{self, DeclaredTool, NewRun};
use crate::storage::{outbox, remembered_rules};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRun {
    id: Uuid,
    #[serde(deserialize_with = "crate::http::integer::json")]
    owner_uid: i64,
    /// The format the loop speaks (docs/design.md §14); left out of the hash for OpenAI chat, so that bodies from
    /// before formats existed hash as they did.
    #[serde(default, skip_serializing_if = "is_openai_chat")]
    format: ModelInputFormat,
    // The formats' transcript members, as the loop sent them (`format_members`): only those of `format` are taken.
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    messages: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    system: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    instructions: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    input: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    system_instruction: Option<RawMember>,
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    contents: Option<RawMember>,
    #[serde(default)]
    tools: Vec<DeclaredToolBody>,
    /// Absent: the service's level (docs/design.md §6), filled in before the body is hashed.
    #[serde(default, deserialize_with = "crate::http::not_null::present")]
    privacy_level: Option<PrivacyLevel>,
    #[serde(default)]
    require_second_approver: bool,
    /// When the turn expires: RFC 3339, or `approval_ttl_secs` from now; at most one ([`ExpiryBody`]).
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    expires_at: Option<String>,
    /// An integer as JSON Schema reads one: `60.0` is 60, as for uids (`http::integer`).
    #[serde(
        default,
        deserialize_with = "crate::http::integer::json_optional",
        skip_serializing_if = "Option::is_none"
    )]
    approval_ttl_secs: Option<i64>,
    /// The worker's state (docs/design.md §15), kept as sent and given back only on request (`worker_state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worker_state: Option<RawMember>,
    /// The people to mail when the turn waits (docs/design.md §20); left out of the hash when absent.
    #[serde(
        default,
        deserialize_with = "crate::http::integer::json_list_optional",
        skip_serializing_if = "Option::is_none"
    )]
    notify: Option<Vec<i64>>,
    /// Where the run came from (docs/design.md §2), e.g. `mcp:github`; left out of the hash when absent, so bodies
    /// from before it existed hash as they did.
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    source: Option<String>,
}

fn is_openai_chat(format: &ModelInputFormat) -> bool {
    *format == ModelInputFormat::OpenAiChat
}

impl RegisterRun {
    /// The transcript members, taken out of the body.
    fn members(&mut self) -> Members {
        Members {
            messages: self.messages.take(),
            system: self.system.take(),
            instructions: self.instructions.take(),
            input: self.input.take(),
            system_instruction: self.system_instruction.take(),
            contents: self.contents.take(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredToolBody {
    name: String,
    effect: Effect,
    /// Who runs the tool's approved calls (docs/design.md §15); absent: the configuration's, else `service`. Left out
    /// of the registration's hash when absent, so bodies from before it existed hash as they did.
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    executor: Option<ExecutorKind>,
    /// Whether a decider may edit its arguments; absent: the configuration's, else `true`.
    #[serde(
        default,
        deserialize_with = "crate::http::not_null::present",
        skip_serializing_if = "Option::is_none"
    )]
    editable: Option<bool>,
}

pub async fn register_run(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    place: LargeBodyPlace,
    JsonWithState(mut body): JsonWithState<RegisterRun>,
) -> Result<impl IntoResponse, ApiError> {
    well_formed(&[
        &body.messages,
        &body.system,
        &body.instructions,
        &body.input,
        &body.system_instruction,
        &body.contents,
    ])?;
    // A run that names no level gets the service's (docs/design.md §6). Filled in before hashing, so that a body
    // without a level and one naming the service's level are the same registration.
    let privacy_level = *body
        .privacy_level
        .get_or_insert(state.resumer.privacy_floor);
    if body.owner_uid < 0 {
        return Err(ApiError::unprocessable(
            "invalid_owner",
            "owner_uid must be 0 (a service run) or a uid of at least 1",
        ));
    }
    if body
        .source
        .as_deref()
        .is_some_and(|source| !is_valid_source(source))
    {
        return Err(ApiError::unprocessable(
            "invalid_source",
            "source must match ^[A-Za-z0-9_.:-]{1,64}$",
        ));
    }
    let expiry = ExpiryBody {
        expires_at: body.expires_at.clone(),
        approval_ttl_secs: body.approval_ttl_secs,
    }
    .resolve(state.limits.work.default_approval_ttl_secs)?;
    worker_state::within_limit(&state.limits, body.worker_state.as_ref())?;
    // Held to its limit first: the check parses it. A state serde_json reads as JSON but not into a value (a number
    // beyond a double, a lone surrogate) is refused as any other member is, not left to fail the body's hash.
    well_formed(&[&body.worker_state])?;
    // Serializing the parsed body gives one text per meaning: keys sorted, defaults filled in.
    let registration_hash = meaning_hash(&body)?;
    let notify_uids = notify::checked(body.notify.as_deref())?.to_vec();
    let members = body.members();
    let declared = declared_tools(&body.tools)?;
    let checked = members.check(body.format, true, &HashSet::new(), 0)?;
    within_limits(&state, &checked.calls)?;
    let transcript = TranscriptText::registered(body.format, checked.list, checked.system)
        .map_err(|error| ApiError::unprocessable("invalid_body", error.to_string()))?;
    let with_effects = with_effects(&state, &declared, checked.calls);

    let tools: Vec<&str> = with_effects
        .iter()
        .map(|(call, _)| call.name.as_str())
        .collect();
    let mut tx = state.pool.begin().await?;
    // The owner checked, and their rules looked for, in one statement; a service run (owner 0) has neither.
    let mut owner_ruled = false;
    if body.owner_uid >= 1 {
        let owner =
            remembered_rules::owner_of_new_run(&mut tx, &caller.tenant, body.owner_uid, &tools)
                .await?;
        if !owner.known {
            return Err(ApiError::unprocessable(
                "unknown_owner",
                "owner_uid names no backend user; PUT /v1/users/{uid} first",
            ));
        }
        owner_ruled = owner.ruled;
    }
    let digest = transcript::turn_digest(
        &with_effects
            .iter()
            .map(|(call, _)| call.clone())
            .collect::<Vec<_>>(),
    );
    let new_run = NewRun {
        id: body.id,
        tenant: &caller.tenant,
        owner_uid: body.owner_uid,
        privacy_level,
        require_second_approver: body.require_second_approver,
        registration_hash: &registration_hash,
        tools: &declared_list(&body.tools),
        messages: &transcript,
        turn_digest: &digest,
        expiry,
        source: body.source.as_deref(),
    };
    let Some(run) = runs::insert(&mut tx, state.pool.sealer(), &new_run).await? else {
        tx.rollback().await?;
        return existing_registration(&state, &caller, body.id, &registration_hash).await;
    };
    runs::insert_calls(&mut tx, state.pool.sealer(), run.id, 0, &with_effects).await?;
    worker_state::store_registered(&mut tx, &state, run.id, body.worker_state.as_ref()).await?;
    let by_rules = remembered::decide_by_rules(
        &mut tx,
        &state.resumer,
        &actor_of(&caller),
        &run,
        &tools,
        RegisteredTurn::NewRun { owner_ruled },
    )
    .await?;
    let mut notified = None;
    if by_rules.is_none() {
        outbox::record_status(&mut tx, &run).await?;
        notified = notify::queue(&mut tx, &run, &notify_uids).await?;
    }
    tx.commit().await?;
    state.events.committed();
    tracing::info!(run_id = %run.id, calls = with_effects.len(), "run registered");
    let mut view = answer_after_rules(&state, &caller, run, by_rules, place).await?;
    view.notify = notified;
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

/// A registration under a taken id: the same body is answered with the run, anything else is a conflict.
async fn existing_registration(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    registration_hash: &[u8],
) -> Result<axum::response::Response, ApiError> {
    let conflict = || {
        ApiError::conflict(
            "run_exists",
            "a different run was already registered under this id",
        )
    };
    let run = runs::find(&state.pool, &caller.tenant, id)
        .await?
        .ok_or_else(conflict)?;
    if run.registration_hash != registration_hash {
        return Err(conflict());
    }
    let view = run_view(state, &run, Reader::Key).await?;
    Ok((StatusCode::OK, axum::Json(view)).into_response())
}

fn declared_tools(tools: &[DeclaredToolBody]) -> Result<HashMap<&str, Effect>, ApiError> {
    let mut declared = HashMap::new();
    for tool in tools {
        if !is_valid_tool_name(&tool.name) {
            return Err(ApiError::unprocessable(
                "invalid_tool",
                format!("tool name {:?} must match {TOOL_NAME_RULE}", tool.name),
            ));
        }
        if declared.insert(tool.name.as_str(), tool.effect).is_some() {
            return Err(ApiError::unprocessable(
                "invalid_tool",
                format!("tool {:?} is declared twice", tool.name),
            ));
        }
    }
    Ok(declared)
}

fn declared_list(tools: &[DeclaredToolBody]) -> Vec<DeclaredTool> {
    tools
        .iter()
        .map(|tool| DeclaredTool {
            name: tool.name.clone(),
            effect: tool.effect,
            executor: tool.executor,
            editable: tool.editable,
        })
        .collect()
}
