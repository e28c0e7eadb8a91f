//! `PUT /v1/users/{uid}`: the host application keeps its backend users in step.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Authorized, Json, scope};
use super::integer;
use crate::domain::transcript::is_valid_tool_name;
use crate::state::AppState;
use crate::storage::users::{self, UserFields};

/// The longest username accepted.
const MAX_USERNAME_CHARS: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutUser {
    username: String,
    is_admin: bool,
    can_approve_others: bool,
    disabled: bool,
    /// The tools whose write calls this user may approve (docs/design.md §4); absent or null: no limit.
    #[serde(default)]
    approvable_tools: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
pub struct UserView {
    uid: i64,
    username: String,
    is_admin: bool,
    can_approve_others: bool,
    disabled: bool,
    approvable_tools: Option<Vec<String>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub async fn put_user(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::UsersWrite>,
    Path(uid): Path<String>,
    Json(body): Json<PutUser>,
) -> Result<impl IntoResponse, ApiError> {
    let uid = integer::parse(&uid)
        .ok()
        .filter(|uid| *uid >= 1)
        .ok_or_else(|| {
            ApiError::unprocessable("invalid_uid", "uid must be an integer of at least 1")
        })?;
    let length = body.username.chars().count();
    if length == 0 || length > MAX_USERNAME_CHARS {
        return Err(ApiError::unprocessable(
            "invalid_username",
            format!("username must have 1 to {MAX_USERNAME_CHARS} characters"),
        ));
    }
    // Postgres stores no text holding U+0000.
    if body.username.contains('\0') {
        return Err(ApiError::unprocessable(
            "invalid_username",
            "username must not hold the character U+0000",
        ));
    }
    if let Some(tools) = &body.approvable_tools
        && let Some(bad) = tools.iter().find(|tool| !is_valid_tool_name(tool))
    {
        return Err(ApiError::unprocessable(
            "invalid_approvable_tools",
            format!(
                "approvable_tools must list tool names (1 to 64 of A-Z a-z 0-9 _ -); entry {} is not one",
                tools
                    .iter()
                    .position(|tool| tool == bad)
                    .unwrap_or_default()
            ),
        ));
    }
    let fields = UserFields {
        username: &body.username,
        is_admin: body.is_admin,
        can_approve_others: body.can_approve_others,
        disabled: body.disabled,
        approvable_tools: body.approvable_tools.as_deref(),
    };
    let user = users::upsert(&state.pool, &caller.tenant, uid, &fields).await?;
    Ok(axum::Json(UserView {
        uid: user.uid,
        username: user.username,
        is_admin: user.is_admin,
        can_approve_others: user.can_approve_others,
        disabled: user.disabled,
        approvable_tools: user.approvable_tools,
        created_at: user.created_at,
        updated_at: user.updated_at,
    }))
}
