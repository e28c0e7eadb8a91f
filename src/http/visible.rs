//! The run a request names, as its credential may see it. A client sees every run of its tenant; a decision token
//! sees only the runs its user may decide (docs/design.md §4: owner, admin, or allowed to approve others), and only
//! its one run when it names one. Any other run is answered 404, exactly like a missing one.

use uuid::Uuid;

use super::decision_tokens::TokenHolder;
use super::error::ApiError;
use super::extract::Credential;
use crate::domain::authorize::{self, DeciderFacts};
use crate::state::AppState;
use crate::storage::runs::{self, RunRow};
use crate::storage::users;

/// The run `id`, if the credential may see it.
pub async fn run(state: &AppState, credential: &Credential, id: Uuid) -> Result<RunRow, ApiError> {
    let not_found = || ApiError::not_found("run");
    match credential {
        Credential::Key(caller) => runs::find(&state.pool, &caller.tenant, id)
            .await?
            .ok_or_else(not_found),
        Credential::Token(holder) => run_of_token(state, holder, id).await,
    }
}

/// The run `id`, if the decision token's user may decide it.
pub async fn run_of_token(
    state: &AppState,
    holder: &TokenHolder,
    id: Uuid,
) -> Result<RunRow, ApiError> {
    let not_found = || ApiError::not_found("run");
    if holder.run.is_some_and(|bound| bound != id) {
        return Err(not_found());
    }
    let run = runs::find(&state.pool, &holder.tenant, id)
        .await?
        .ok_or_else(not_found)?;
    let user = users::find(&state.pool, &holder.tenant, holder.uid)
        .await?
        .map(|user| DeciderFacts {
            is_admin: user.is_admin,
            can_approve_others: user.can_approve_others,
            disabled: user.disabled,
        });
    if authorize::token_user_may_decide(holder.uid, run.owner_uid, user.as_ref()) {
        Ok(run)
    } else {
        Err(not_found())
    }
}

/// The tenant a credential acts in.
pub fn tenant(credential: &Credential) -> &str {
    match credential {
        Credential::Key(caller) => &caller.tenant,
        Credential::Token(holder) => &holder.tenant,
    }
}
