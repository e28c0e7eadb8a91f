//! What registering any turn takes, a run's first (`register`) or a later one (`http::turns`): the body's meaning
//! hash, its expiry, the work limits, each call's effect, and the answer once remembered decisions had their say.

use std::sync::Arc;

use crate::http::body_budget::LargeBodyPlace;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::reading::run_view;
use crate::domain::limits::TurnOverLimit;
use crate::domain::token_view::Reader;
use crate::domain::transcript::PendingCall;
use crate::domain::vocabulary::Effect;
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::views::RunView;
use crate::resume::Actor;
use crate::resume::remembered;
use crate::state::AppState;
use crate::storage::runs::{self, Expiry, RunRow};

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
