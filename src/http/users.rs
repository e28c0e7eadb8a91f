//! `PUT /v1/users/{uid}`: the host application keeps its backend users in step.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{Authorized, Json, scope};
use super::integer;
use crate::domain::transcript::{TOOL_NAME_RULE, is_valid_tool_name};
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
    /// Where the mail of docs/design.md §20 goes; absent or null: no mail.
    #[serde(default)]
    email: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct UserView {
    uid: i64,
    username: String,
    is_admin: bool,
    can_approve_others: bool,
    disabled: bool,
    approvable_tools: Option<Vec<String>>,
    email: Option<String>,
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
                "approvable_tools must list tool names ({TOOL_NAME_RULE}); entry {} is not one",
                tools
                    .iter()
                    .position(|tool| tool == bad)
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(email) = &body.email {
        check_email(email)?;
    }
    let fields = UserFields {
        username: &body.username,
        is_admin: body.is_admin,
        can_approve_others: body.can_approve_others,
        disabled: body.disabled,
        approvable_tools: body.approvable_tools.as_deref(),
        email: body.email.as_deref(),
    };
    let user = users::upsert(&state.pool, &caller.tenant, uid, &fields).await?;
    Ok(axum::Json(UserView {
        uid: user.uid,
        username: user.username,
        is_admin: user.is_admin,
        can_approve_others: user.can_approve_others,
        disabled: user.disabled,
        approvable_tools: user.approvable_tools,
        email: user.email,
        created_at: user.created_at,
        updated_at: user.updated_at,
    }))
}

/// A mail address as lettre, which sends the mail, reads one: a bare `local@domain` (no display name), at most 254
/// characters (RFC 5321's path limit). The answer never repeats the address: problems may be logged.
fn check_email(email: &str) -> Result<(), ApiError> {
    let refused = || {
        ApiError::unprocessable(
            "invalid_email",
            "email must be a bare mail address (local@domain), at most 254 characters",
        )
    };
    if email.len() > 254 || email.trim() != email {
        return Err(refused());
    }
    email
        .parse::<lettre::Address>()
        .map(drop)
        .map_err(|_| refused())
}

#[cfg(test)]
mod tests {
    use super::check_email;

    #[test]
    fn a_bare_mail_address_is_taken_and_anything_else_refused() {
        assert!(check_email("olivia@example.com").is_ok());
        for bad in [
            "",
            "olivia",
            "Olivia <olivia@example.com>",
            " olivia@example.com",
            "olivia@",
            &format!("{}@example.com", "a".repeat(250)),
        ] {
            assert!(check_email(bad).is_err(), "{bad:?} was taken");
        }
    }
}
