//! Ending a run by its loop: `POST /v1/runs/{id}/cancel` and `POST /v1/runs/{id}/complete`.

use axum::extract::State;
use axum::response::IntoResponse;
use uuid::Uuid;

use super::reading::run_view;
use crate::domain::token_view::Reader;
use crate::domain::vocabulary::RunStatus;
use crate::http::error::ApiError;
use crate::http::extract::{Authorized, Caller, RunId, scope};
use crate::http::views::RunView;
use crate::state::AppState;
use crate::storage::runs;
use crate::storage::{claims, outbox};

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
