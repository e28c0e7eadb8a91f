//! Runs: registration of a suspended run, reading it, cancelling and completing it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::body_budget::LargeBodyPlace;
use super::error::ApiError;
use super::extract::{Authorized, Caller, Credential, KeyOrToken, Query, RunId, scope};
use super::format_members::{Members, RawMember, well_formed};
use super::views::RunView;
use super::visible;
use super::worker_state::{self, JsonWithState, RunQuery};
use crate::domain::limits::TurnOverLimit;
use crate::domain::model_input::ModelInputFormat;
use crate::domain::remembered::CandidateRule;
use crate::domain::token_view::Reader;
use crate::domain::transcript::{self, PendingCall, is_valid_tool_name};
use crate::domain::transcript_text::TranscriptText;
use crate::domain::vocabulary::{Effect, ExecutorKind, PrivacyLevel, RunStatus};
use crate::resume::Actor;
use crate::resume::remembered::{self, RegisteredTurn};
use crate::state::AppState;
use crate::storage::runs::{self, CallRow, DeclaredTool, Expiry, NewRun, RunRow};
use crate::storage::{claims, decision_record, outbox, pending_rules, remembered_rules};
use chrono::{DateTime, Utc};

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRun {
    id: Uuid,
    #[serde(deserialize_with = "super::integer::json")]
    owner_uid: i64,
    /// The format the loop speaks (docs/design.md §14); left out of the hash for OpenAI chat, so that bodies from
    /// before formats existed hash as they did.
    #[serde(default, skip_serializing_if = "is_openai_chat")]
    format: ModelInputFormat,
    // The formats' transcript members, as the loop sent them (`format_members`): only those of `format` are taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    messages: Option<RawMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<RawMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    instructions: Option<RawMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<RawMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system_instruction: Option<RawMember>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contents: Option<RawMember>,
    #[serde(default)]
    tools: Vec<DeclaredToolBody>,
    /// Absent: the service's level (docs/design.md §6), filled in before the body is hashed.
    #[serde(default)]
    privacy_level: Option<PrivacyLevel>,
    #[serde(default)]
    require_second_approver: bool,
    /// When the turn expires: RFC 3339, or `approval_ttl_secs` from now; at most one ([`ExpiryBody`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    /// An integer as JSON Schema reads one: `60.0` is 60, as for uids (`http::integer`).
    #[serde(
        default,
        deserialize_with = "super::integer::json_or_null",
        skip_serializing_if = "Option::is_none"
    )]
    approval_ttl_secs: Option<i64>,
    /// The worker's state (docs/design.md §15), kept as sent and given back only on request (`worker_state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worker_state: Option<RawMember>,
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

/// How much of a body's serialized text is handed to its hash at a time: enough to make the hash's calls few, small
/// enough to cost a small registration nothing worth measuring.
const HASH_BUFFER_BYTES: usize = 8 * 1024;

/// SHA-256 of a body's meaning: the body serialized, its transcript members as their parsed values ([`RawMember`]),
/// so that the same registration (or new turn) with its keys in another order or other spacing is the same one,
/// and a body from before formats existed hashes as it did. What is stored is the text the loop sent.
pub fn meaning_hash(body: &impl Serialize) -> Result<[u8; 32], ApiError> {
    // Written into the hash as it is serialized: a body of megabytes is not held a second time as its text. The
    // serializer writes a piece per key, quote and escape; a buffer hands the hash whole blocks instead.
    let mut hasher = std::io::BufWriter::with_capacity(HASH_BUFFER_BYTES, Sha256::new());
    serde_json::to_writer(&mut hasher, body).map_err(ApiError::internal)?;
    let hasher = hasher
        .into_inner()
        .map_err(|error| ApiError::internal(error.into_error()))?;
    Ok(hasher.finalize().into())
}

/// When a new turn expires (docs/design.md §5, §8): `expires_at` (RFC 3339) or `approval_ttl_secs`, at most one.
/// The bodies carry the two members themselves (left out of their hashes when absent, so bodies from before expiry
/// existed hash as they did): `serde(flatten)` would not work with `deny_unknown_fields`.
#[derive(Debug, Default)]
pub struct ExpiryBody {
    pub expires_at: Option<String>,
    pub approval_ttl_secs: Option<i64>,
}

impl ExpiryBody {
    /// The expiry of the new turn; without one in the body, the service's default TTL, if any.
    pub fn resolve(&self, default_ttl_secs: Option<u64>) -> Result<Expiry, ApiError> {
        match (&self.expires_at, self.approval_ttl_secs) {
            (Some(_), Some(_)) => Err(ApiError::unprocessable(
                "expiry_ambiguous",
                "give expires_at or approval_ttl_secs, not both",
            )),
            (Some(text), None) => {
                let at = DateTime::parse_from_rfc3339(text)
                    .map_err(|_| {
                        ApiError::unprocessable(
                            "invalid_expires_at",
                            "expires_at must be an RFC 3339 date-time with an offset",
                        )
                    })?
                    .with_timezone(&Utc);
                if at <= Utc::now() {
                    return Err(ApiError::unprocessable(
                        "expires_at_in_past",
                        "expires_at has already passed",
                    ));
                }
                Ok(Expiry::At(at))
            }
            (None, Some(secs)) => u64::try_from(secs).map(Expiry::AfterSecs).map_err(|_| {
                ApiError::unprocessable("invalid_ttl", "approval_ttl_secs must not be negative")
            }),
            (None, None) => Ok(default_ttl_secs.map_or(Expiry::Never, Expiry::AfterSecs)),
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    executor: Option<ExecutorKind>,
    /// Whether a decider may edit its arguments; absent: the configuration's, else `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    if by_rules.is_none() {
        outbox::record_status(&mut tx, &run).await?;
    }
    tx.commit().await?;
    state.events.committed();
    tracing::info!(run_id = %run.id, calls = with_effects.len(), "run registered");
    let view = answer_after_rules(&state, &caller, run, by_rules, place).await?;
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

/// The client registering a turn, as the decision its rules may make there names it (docs/design.md §18).
pub fn actor_of(caller: &Caller) -> Actor {
    Actor {
        tenant: caller.tenant.clone(),
        client_name: caller.name.clone(),
        may_decide_anonymously: false,
        token_kid: None,
    }
}

/// The run as a turn's registration answers it: as registered, or, when remembered decisions decided the turn, once
/// the decision's calls ran (or were released), with its decision, results and released calls, as `GET` shows it.
///
/// Called once the turn is committed: a large body's place is given back first (its parsing is over; the calls may
/// run for minutes), and the calls run on the runtime, not on the large body's low-priority thread
/// (`large_body_threads`), so that executors are not slowed by whatever else holds the cores.
pub async fn answer_after_rules(
    state: &AppState,
    caller: &Caller,
    run: RunRow,
    by_rules: Option<remembered::RuleDecision>,
    place: LargeBodyPlace,
) -> Result<RunView, ApiError> {
    place.give_back();
    let Some(decided) = by_rules else {
        return run_view(state, &run, Reader::Key).await;
    };
    let resumer = Arc::clone(&state.resumer);
    tokio::spawn(async move { decided.finish(&resumer).await })
        .await
        .map_err(|failed| {
            ApiError::internal(format!("the approved calls' task failed: {failed}"))
        })??;
    state.events.committed();
    let run = runs::find(&state.pool, &caller.tenant, run.id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    run_view(state, &run, Reader::Key).await
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

/// Refuses a turn over the work limits (calls per turn, bytes per call's arguments) with 422 and the limit's code.
pub fn within_limits(state: &AppState, pending: &[PendingCall]) -> Result<(), ApiError> {
    state
        .limits
        .work
        .check_turn(pending)
        .map_err(|over| match over {
            TurnOverLimit::TooManyCalls { .. } => {
                ApiError::unprocessable("too_many_calls", over.to_string())
            }
            TurnOverLimit::ArgumentsTooLarge { .. } => {
                ApiError::unprocessable("arguments_too_large", over.to_string())
            }
        })
}

fn declared_tools(tools: &[DeclaredToolBody]) -> Result<HashMap<&str, Effect>, ApiError> {
    let mut declared = HashMap::new();
    for tool in tools {
        if !is_valid_tool_name(&tool.name) {
            return Err(ApiError::unprocessable(
                "invalid_tool",
                format!(
                    "tool name {:?} must match ^[A-Za-z0-9_-]{{1,64}}$",
                    tool.name
                ),
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

/// Each call's effect: `write` if the run declares it or the executor configuration does, else `read`.
pub fn with_effects(
    state: &AppState,
    declared: &HashMap<&str, Effect>,
    calls: Vec<PendingCall>,
) -> Vec<(PendingCall, Effect)> {
    calls
        .into_iter()
        .map(|call| {
            let effect = state
                .resumer
                .executors
                .effect(&call.name, declared.get(call.name.as_str()).copied());
            (call, effect)
        })
        .collect()
}

/// The run as answered everywhere, to `reader`: its current turn's calls and decision.
/// While the turn waits, each call is read with the rules that may decide it, in the same statement (docs/design.md
/// §18): the view shows the one that would.
pub async fn run_view(state: &AppState, run: &RunRow, reader: Reader) -> Result<RunView, ApiError> {
    let sealer = state.pool.sealer();
    let (calls, rules): (Vec<CallRow>, Vec<Vec<CandidateRule>>) =
        if run.status() == RunStatus::WaitingForApproval {
            pending_rules::calls_with_rules(
                &state.pool,
                sealer,
                &run.tenant,
                run.id,
                run.turn_index,
                run.owner_uid,
            )
            .await?
            .into_iter()
            .unzip()
        } else {
            let calls = runs::calls(&state.pool, sealer, run.id, run.turn_index).await?;
            (calls, Vec::new())
        };
    let decision = decision_record::find(&state.pool, run.id, run.turn_index).await?;
    Ok(RunView::of(
        run,
        &calls,
        &rules,
        decision.as_ref(),
        state.resumer.privacy_floor,
        &state.resumer.executors,
        reader,
    )?)
}

pub async fn get_run(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::RunsRead>,
    RunId(id): RunId,
    Query(query): Query<RunQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let run = visible::run(&state, &credential, id).await?;
    let view = run_view(&state, &run, credential.reader()).await?;
    match credential {
        Credential::Key(_) => worker_state::run_answer(&state, view, &query).await,
        // A decision token never sees the worker's state: `include` is ignored (docs/design.md §15).
        Credential::Token(_) => Ok(axum::Json(view).into_response()),
    }
}

pub async fn cancel_run(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
) -> Result<impl IntoResponse, ApiError> {
    change_status(&state, &caller, id, RunStatus::Cancelled).await
}

pub async fn complete_run(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RunsWrite>,
    RunId(id): RunId,
) -> Result<impl IntoResponse, ApiError> {
    change_status(&state, &caller, id, RunStatus::Completed).await
}

/// Cancels or completes a run under its row lock; asking for the state the run is already in answers the run.
async fn change_status(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    target: RunStatus,
) -> Result<axum::Json<RunView>, ApiError> {
    let mut tx = state.pool.begin().await?;
    let run = runs::lock(&mut tx, &caller.tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found("run"))?;
    let run = match (run.status(), target) {
        (current, target) if current == target => run,
        // The approved turn's tools are running: stopping now would leave their results unrecorded.
        (RunStatus::Resuming, _) => {
            return Err(ApiError::conflict(
                "resume_in_progress",
                "the approved turn's tools are still running",
            ));
        }
        (current, _) if current.is_final() => {
            return Err(ApiError::conflict(
                "run_finished",
                format!("the run is already {}", current.as_str()),
            ));
        }
        (RunStatus::WaitingForApproval, RunStatus::Completed) => {
            return Err(ApiError::conflict(
                "not_resumed",
                "a run waiting for approval cannot be completed",
            ));
        }
        // Released calls wait for the worker's results (docs/design.md §15); a released run may be cancelled.
        (RunStatus::Released, RunStatus::Completed) => {
            return Err(ApiError::conflict(
                "not_resumed",
                "a released run waits for its results and cannot be completed",
            ));
        }
        (current, target) => {
            let run = runs::set_status(&mut tx, id, target).await?;
            // A cancel ends a worker's live claim on released calls (docs/design.md §15): it lapses into nothing.
            if current == RunStatus::Released {
                claims::end(&mut tx, id, run.turn_index).await?;
            }
            outbox::record_status(&mut tx, &run).await?;
            run
        }
    };
    tx.commit().await?;
    state.events.committed();
    Ok(axum::Json(run_view(state, &run, Reader::Key).await?))
}
