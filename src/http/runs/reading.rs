//! Reading a run: `GET /v1/runs/{id}`, and the run's view every answer about it carries.

use axum::extract::State;
use axum::response::IntoResponse;

use crate::domain::remembered::CandidateRule;
use crate::domain::token_view::Reader;
use crate::domain::vocabulary::RunStatus;
use crate::http::error::ApiError;
use crate::http::extract::{Credential, KeyOrToken, Query, RunId, scope};
use crate::http::views::RunView;
use crate::http::visible;
use crate::http::worker_state::{self, RunQuery};
use crate::state::AppState;
use crate::storage::runs::{self, CallRow, RunRow};
use crate::storage::{decision_record, pending_rules};

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
