//! Remembered decisions (docs/design.md §18) on their own: `POST /v1/runs/{id}/rules` and `POST /v1/rules` make them,
//! `GET /v1/runs/{id}/rules` and `GET /v1/rules?owner_uid=` list them, `DELETE /v1/rules/{id}` revokes one.
//!
//! A key makes and revokes on behalf of the backend user it names (`created_by`, `revoked_by`) and needs
//! `decisions:write`; a decision token makes `run` scope rules as its user on the runs that user may decide, and
//! revokes its user's own rules, nothing more (§13).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::decision_tokens::TokenHolder;
use super::error::ApiError;
use super::extract::{Authorized, Credential, Json, KeyOrToken, Query, RunId, scope};
use super::visible;
use crate::domain::authorize;
use crate::domain::remembered::{RuleScope, RuleVerdict};
use crate::domain::token_view::{Audience, Reader};
use crate::domain::transcript::{TOOL_NAME_RULE, is_valid_tool_name};
use crate::domain::vocabulary::{DenialReason, PrivacyLevel};
use crate::resume::rule_book::{self, Revoker, RuleAsk, RuleError, Through};
use crate::state::AppState;
use crate::storage::remembered_rules::{self, RuleRow};
use crate::storage::{runs, users};

/// `POST /v1/runs/{id}/rules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRuleBody {
    /// The backend user the rule is of: required with a key; with a token, absent or its user.
    #[serde(default, deserialize_with = "super::integer::json_or_null")]
    created_by: Option<i64>,
    tool: String,
    /// A JSON object: the rule matches only calls whose arguments equal it as JSON values.
    #[serde(default, deserialize_with = "super::not_null::present")]
    arguments: Option<Box<RawValue>>,
    verdict: RuleVerdict,
    #[serde(default, deserialize_with = "super::not_null::present")]
    reason: Option<DenialReason>,
}

/// `POST /v1/rules`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnerRuleBody {
    #[serde(deserialize_with = "super::integer::json")]
    owner_uid: i64,
    #[serde(deserialize_with = "super::integer::json")]
    created_by: i64,
    /// RFC 3339, at most MAX_RULE_TTL_DAYS ahead.
    expires_at: String,
    tool: String,
    #[serde(default, deserialize_with = "super::not_null::present")]
    arguments: Option<Box<RawValue>>,
    verdict: RuleVerdict,
    #[serde(default, deserialize_with = "super::not_null::present")]
    reason: Option<DenialReason>,
}

/// What every rule says, as a body gave it.
struct RuleFields<'a> {
    tool: &'a str,
    arguments: Option<&'a RawValue>,
    verdict: RuleVerdict,
    reason: Option<DenialReason>,
}

/// A rule as answered.
#[derive(Debug, Serialize)]
pub struct RuleView {
    id: Uuid,
    scope: RuleScope,
    run_id: Option<Uuid>,
    owner_uid: i64,
    tool: String,
    /// The arguments text matched; `null` for any call of the tool, or where the privacy level hides it from a
    /// decision token.
    arguments: Option<String>,
    verdict: RuleVerdict,
    reason: Option<DenialReason>,
    created_by: i64,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    revoked_by: Option<i64>,
    /// Neither revoked nor expired.
    live: bool,
}

impl RuleView {
    fn of(rule: RuleRow, token_level: Option<PrivacyLevel>) -> Self {
        let arguments = match token_level {
            None => rule.arguments,
            Some(level) => rule
                .arguments
                .and_then(|text| Audience::of(Reader::Token, level).payload(&text)),
        };
        RuleView {
            id: rule.id,
            scope: rule.scope,
            run_id: rule.run_id,
            owner_uid: rule.owner_uid,
            tool: rule.tool,
            arguments,
            verdict: rule.verdict,
            reason: rule.reason,
            created_by: rule.created_by,
            created_at: rule.created_at,
            expires_at: rule.expires_at,
            revoked_at: rule.revoked_at,
            revoked_by: rule.revoked_by,
            live: rule.live,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RuleList {
    rules: Vec<RuleView>,
}

impl From<RuleError> for ApiError {
    fn from(error: RuleError) -> Self {
        let detail = error.to_string();
        match error {
            RuleError::RunNotFound => ApiError::not_found("run"),
            RuleError::RuleNotFound => ApiError::not_found("rule"),
            RuleError::UnknownOwner => ApiError::unprocessable(
                "unknown_owner",
                "owner_uid names no backend user; PUT /v1/users/{uid} first",
            ),
            RuleError::Refused(refusal) => refusal.into(),
            RuleError::NotOwnerOrAdmin => {
                ApiError::new(StatusCode::FORBIDDEN, "rule_not_permitted", detail)
            }
            RuleError::NotRevocable => {
                ApiError::new(StatusCode::FORBIDDEN, "rule_not_revocable", detail)
            }
            RuleError::OwnerWithoutEnd => {
                ApiError::unprocessable("remember_until_required", detail)
            }
            RuleError::Anonymous => ApiError::new(StatusCode::FORBIDDEN, "anonymous_rule", detail),
            RuleError::TokenOwnerScope => {
                ApiError::new(StatusCode::FORBIDDEN, "token_not_allowed", detail)
            }
            RuleError::Edited(_) => ApiError::unprocessable("remember_edited", detail),
            RuleError::Storage(error) => error.into(),
        }
    }
}

/// The checks of a rule's fields that need nothing stored: the tool's name, the arguments' shape and size, a reason
/// only on a deny.
fn checked<'a>(
    state: &AppState,
    fields: RuleFields<'a>,
    created_by: i64,
) -> Result<RuleAsk<'a>, ApiError> {
    if !is_valid_tool_name(fields.tool) {
        return Err(ApiError::unprocessable(
            "invalid_tool",
            format!("tool must match {TOOL_NAME_RULE}"),
        ));
    }
    let arguments = fields.arguments.map(RawValue::get);
    if let Some(text) = arguments {
        if text.len() > state.limits.work.max_arguments_bytes {
            return Err(ApiError::unprocessable(
                "arguments_too_large",
                format!(
                    "arguments have {} bytes; at most {} are accepted (MAX_ARGUMENTS_BYTES)",
                    text.len(),
                    state.limits.work.max_arguments_bytes
                ),
            ));
        }
        if !text.trim_start().starts_with('{') {
            return Err(ApiError::unprocessable(
                "arguments_not_object",
                "arguments must be a JSON object",
            ));
        }
    }
    if fields.reason.is_some() && fields.verdict == RuleVerdict::Approve {
        return Err(ApiError::unprocessable(
            "reason_requires_denial",
            "a reason is given only with verdict deny",
        ));
    }
    Ok(RuleAsk {
        created_by,
        tool: fields.tool,
        arguments,
        verdict: fields.verdict,
        reason: fields.reason,
    })
}

pub async fn make_run_rule(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::DecisionsWrite>,
    RunId(id): RunId,
    Json(body): Json<RunRuleBody>,
) -> Result<impl IntoResponse, ApiError> {
    let (through, created_by, token) = match &credential {
        Credential::Key(caller) => {
            let created_by = body.created_by.ok_or_else(|| {
                ApiError::unprocessable(
                    "missing_created_by",
                    "created_by names the backend user the rule is of",
                )
            })?;
            let through = Through {
                tenant: &caller.tenant,
                client_name: &caller.name,
                token_kid: None,
            };
            (through, created_by, None)
        }
        Credential::Token(holder) => {
            if holder.run.is_some_and(|bound| bound != id) {
                return Err(ApiError::not_found("run"));
            }
            if body.created_by.is_some_and(|uid| uid != holder.uid) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "decider_mismatch",
                    "created_by must be absent or the token's user",
                ));
            }
            let through = Through {
                tenant: &holder.tenant,
                client_name: &holder.client_name,
                token_kid: Some(&holder.kid),
            };
            (through, holder.uid, Some(holder.uid))
        }
    };
    let fields = RuleFields {
        tool: &body.tool,
        arguments: body.arguments.as_deref(),
        verdict: body.verdict,
        reason: body.reason,
    };
    let ask = checked(&state, fields, created_by)?;
    if let Credential::Token(holder) = &credential
        && ask.arguments.is_some()
        && !token_sees_arguments(&state, holder, id).await?
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "token_not_allowed",
            "a decision token makes no rule with arguments on a run whose privacy level shows it no arguments",
        ));
    }
    // A token's user must still be allowed to decide the run as it stands under its lock; a key sees its tenant's runs.
    let may_see = |run: &runs::RunRow, author: Option<&authorize::DeciderFacts>| {
        token.is_none_or(|uid| authorize::token_user_may_decide(uid, run.owner_uid, author))
    };
    let rule = rule_book::make_run_rule(&state.resumer, through, id, &ask, may_see).await?;
    state.events.committed();
    let level = match token {
        Some(_) => Some(token_level(&state, &credential, rule.run_id).await?),
        None => None,
    };
    Ok((StatusCode::CREATED, axum::Json(RuleView::of(rule, level))))
}

pub async fn make_owner_rule(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::DecisionsWrite>,
    Json(body): Json<OwnerRuleBody>,
) -> Result<impl IntoResponse, ApiError> {
    if body.owner_uid < 1 {
        return Err(ApiError::unprocessable(
            "invalid_owner",
            "an owner-scope rule is of a backend user (uid of at least 1); a service run has none",
        ));
    }
    let fields = RuleFields {
        tool: &body.tool,
        arguments: body.arguments.as_deref(),
        verdict: body.verdict,
        reason: body.reason,
    };
    let ask = checked(&state, fields, body.created_by)?;
    let expires_at = rule_expiry(&body.expires_at, state.limits.work.max_rule_ttl_days)?;
    let through = Through {
        tenant: &caller.tenant,
        client_name: &caller.name,
        token_kid: None,
    };
    let rule =
        rule_book::make_owner_rule(&state.resumer, through, body.owner_uid, &ask, expires_at)
            .await?;
    state.events.committed();
    Ok((StatusCode::CREATED, axum::Json(RuleView::of(rule, None))))
}

/// An owner-scope rule's end: an RFC 3339 time ahead, at most `max_days` from now (MAX_RULE_TTL_DAYS).
pub fn rule_expiry(text: &str, max_days: u32) -> Result<DateTime<Utc>, ApiError> {
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|_| {
            ApiError::unprocessable(
                "invalid_expires_at",
                "expires_at must be an RFC 3339 date-time with an offset",
            )
        })?
        .with_timezone(&Utc);
    let now = Utc::now();
    if at <= now {
        return Err(ApiError::unprocessable(
            "expires_at_in_past",
            "expires_at has already passed",
        ));
    }
    if at > now + Duration::days(i64::from(max_days)) {
        return Err(ApiError::unprocessable(
            "rule_ttl_too_long",
            format!("an owner-scope rule ends at most {max_days} days ahead (MAX_RULE_TTL_DAYS)"),
        ));
    }
    Ok(at)
}

pub async fn list_run_rules(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::RulesRead>,
    RunId(id): RunId,
) -> Result<impl IntoResponse, ApiError> {
    let run = visible::run(&state, &credential, id).await?;
    let level = match credential {
        Credential::Key(_) => None,
        Credential::Token(_) => Some(state.resumer.privacy_floor.stricter(run.privacy_level())),
    };
    let rules = remembered_rules::of_run(
        &state.pool,
        state.pool.sealer(),
        visible::tenant(&credential),
        id,
    )
    .await?;
    Ok(axum::Json(RuleList {
        rules: rules
            .into_iter()
            .map(|rule| RuleView::of(rule, level))
            .collect(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnerQuery {
    owner_uid: i64,
}

pub async fn list_owner_rules(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::RulesRead>,
    Query(query): Query<OwnerQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let rules = remembered_rules::of_owner(
        &state.pool,
        state.pool.sealer(),
        &caller.tenant,
        query.owner_uid,
    )
    .await?;
    Ok(axum::Json(RuleList {
        rules: rules
            .into_iter()
            .map(|rule| RuleView::of(rule, None))
            .collect(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeQuery {
    /// The backend user a key revokes on behalf of; with a token, absent or its user.
    #[serde(default)]
    revoked_by: Option<i64>,
}

pub async fn revoke(
    State(state): State<AppState>,
    KeyOrToken(credential, _): KeyOrToken<scope::DecisionsWrite>,
    Path(id): Path<String>,
    Query(query): Query<RevokeQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let id = Uuid::parse_str(&id).map_err(|_| ApiError::not_found("rule"))?;
    let revoker = match &credential {
        Credential::Key(_) => Revoker::Key {
            uid: query.revoked_by.ok_or_else(|| {
                ApiError::unprocessable(
                    "missing_revoked_by",
                    "revoked_by names the backend user the rule is revoked by",
                )
            })?,
        },
        Credential::Token(holder) => {
            if query.revoked_by.is_some_and(|uid| uid != holder.uid) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "decider_mismatch",
                    "revoked_by must be absent or the token's user",
                ));
            }
            Revoker::Token {
                uid: holder.uid,
                run: holder.run,
            }
        }
    };
    let rule = rule_book::revoke(&state.resumer, visible::tenant(&credential), id, revoker).await?;
    state.events.committed();
    let level = match credential {
        Credential::Key(_) => None,
        Credential::Token(_) => Some(token_level(&state, &credential, rule.run_id).await?),
    };
    Ok(axum::Json(RuleView::of(rule, level)))
}

/// The privacy level a token's answer shows a rule's arguments at: its run's (the stricter of the service's and the
/// run's), or the service's for an owner-scope rule.
/// Whether a decision token reads the arguments of run `id` (its privacy level `redacted` or above). Below it, the
/// token may not make a rule with arguments: a deny rule of a guess would answer the token's approval 409
/// `denied_by_rule` exactly when the guess is right (docs/design.md §18). `true` where the run is not found or the
/// token's user may not decide it, so that the rule's making answers 404 as for any such run.
async fn token_sees_arguments(
    state: &AppState,
    holder: &TokenHolder,
    id: Uuid,
) -> Result<bool, ApiError> {
    let Some(run) = runs::find(&state.pool, &holder.tenant, id).await? else {
        return Ok(true);
    };
    let user = users::find(&state.pool, &holder.tenant, holder.uid).await?;
    let facts = user.as_ref().map(|user| authorize::DeciderFacts {
        is_admin: user.is_admin,
        can_approve_others: user.can_approve_others,
        disabled: user.disabled,
    });
    if !authorize::token_user_may_decide(holder.uid, run.owner_uid, facts.as_ref()) {
        return Ok(true);
    }
    let level = state.resumer.privacy_floor.stricter(run.privacy_level());
    Ok(Audience::of(Reader::Token, level).sees_arguments())
}

async fn token_level(
    state: &AppState,
    credential: &Credential,
    run_id: Option<Uuid>,
) -> Result<PrivacyLevel, ApiError> {
    let floor = state.resumer.privacy_floor;
    let Some(run_id) = run_id else {
        return Ok(floor);
    };
    let run = runs::find(&state.pool, visible::tenant(credential), run_id).await?;
    Ok(run.map_or(floor, |run| floor.stricter(run.privacy_level())))
}
