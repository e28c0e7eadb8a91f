//! Claims on released calls (docs/design.md §15, "Claims: at most once across workers"): `POST /v1/runs/{id}/claim`
//! takes the lease on a run's released turn, or renews it, and a results post must hold the live one. Everything is
//! decided under the run's row lock, the lock every writer of a run takes first, from one read of the turn's claim
//! ([`lapses::find_and_lapse`], which also writes a lapse it finds due). So two claims at once get one lease between
//! them, a claim and a cancel one outcome, and a result and the lapse one of the two.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::error::ResumeError;
use super::lapses::{self, Found};
use super::resumer::Resumer;
use super::turn::released_calls;
use crate::domain::released::ReleasedCall;
use crate::domain::vocabulary::RunStatus;
use crate::storage::claims::{self, ClaimRow};
use crate::storage::runs::{self, RunRow};
use crate::storage::{StorageError, decision_record};

/// A claim granted or renewed: its id, when it lapses, and the calls it covers as `GET /v1/runs/{id}` shows them.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub claim_id: Uuid,
    pub until: DateTime<Utc>,
    pub released_calls: Vec<ReleasedCall>,
}

/// Claims `run_id`'s released turn (`renewing: None`) or renews the claim `renewing`, by the rules of §15 in their
/// order: a cancelled run refuses; a lapsed claim is written and a renewal of it refused; a run not `released` is
/// refused with its status; a live claim refuses every other claimant.
pub async fn claim(
    resumer: &Resumer,
    tenant: &str,
    run_id: Uuid,
    renewing: Option<Uuid>,
) -> Result<Claimed, ResumeError> {
    let mut tx = resumer.pool.begin().await?;
    let mut run = runs::lock(&mut tx, tenant, run_id)
        .await?
        .ok_or(ResumeError::RunNotFound)?;
    if run.status() == RunStatus::Cancelled {
        return Err(ResumeError::RunCancelled);
    }
    let Found { claim, lapsed_now } = lapses::find_and_lapse(&mut tx, resumer, &mut run).await?;
    let granted = grant(&mut tx, resumer, &run, claim, renewing).await;
    // A lapse this transaction wrote is kept whatever the answer: it is the run's state now.
    if granted.is_ok() || lapsed_now {
        tx.commit().await?;
    }
    granted
}

/// The claim's answer from the turn's claim as found under the lock.
async fn grant(
    conn: &mut sqlx::PgConnection,
    resumer: &Resumer,
    run: &RunRow,
    claim: Option<ClaimRow>,
    renewing: Option<Uuid>,
) -> Result<Claimed, ResumeError> {
    if let Some(renewing) = renewing {
        let mine = match claim.as_ref().filter(|c| c.claim_id == renewing) {
            Some(found) => Some(found.clone()),
            // A claim of an earlier turn of this run: only its lapse has an answer of its own.
            None => claims::by_id(&mut *conn, run.id, renewing).await?,
        };
        if mine.as_ref().is_some_and(|c| c.lapsed_at.is_some()) {
            return Err(ResumeError::ClaimLapsed);
        }
        if let Some(mine) = mine.filter(|c| c.turn_index == run.turn_index && c.is_live())
            && run.status() == RunStatus::Released
        {
            let renewed = claims::renew(&mut *conn, run.id, mine.claim_id, resumer.claim_ttl)
                .await?
                .ok_or_else(|| corrupt(run, "a live claim found under the lock was not open"))?;
            return claimed(conn, resumer, run, renewed).await;
        }
    }
    if run.status() != RunStatus::Released {
        return Err(ResumeError::NotClaimable(run.status()));
    }
    match claim {
        Some(live) if live.is_live() => Err(ResumeError::Claimed { until: live.until }),
        // A released turn's claim ends only with the turn (its last result, its lapse) or a cancel.
        Some(_) => Err(corrupt(run, "a released turn's claim ended").into()),
        None if renewing.is_some() => Err(ResumeError::UnknownClaim),
        None => {
            let granted = claims::insert(&mut *conn, run, resumer.claim_ttl).await?;
            tracing::info!(run_id = %run.id, turn = run.turn_index, "released calls claimed");
            claimed(conn, resumer, run, granted).await
        }
    }
}

/// The answer to a granted claim: the claim, and the released calls as `GET /v1/runs/{id}` shows them to a key.
async fn claimed(
    conn: &mut sqlx::PgConnection,
    resumer: &Resumer,
    run: &RunRow,
    claim: ClaimRow,
) -> Result<Claimed, ResumeError> {
    let calls = runs::calls(&mut *conn, resumer.pool.sealer(), run.id, run.turn_index).await?;
    let decision = decision_record::find(&mut *conn, run.id, run.turn_index).await?;
    let decided_by = decision.map(|d| d.decided_by()).transpose()?;
    Ok(Claimed {
        claim_id: claim.claim_id,
        until: claim.until,
        released_calls: released_calls(&calls, decided_by),
    })
}

/// Refuses a results post that does not hold the turn's live claim (§15): none named, another's live claim, a lapsed
/// one, or one this run's turn never had. `claim` is the turn's claim as found under the lock.
pub async fn check_poster(
    conn: &mut sqlx::PgConnection,
    run: &RunRow,
    claim: Option<&ClaimRow>,
    poster: Option<Uuid>,
) -> Result<(), ResumeError> {
    let poster = poster.ok_or(ResumeError::ClaimRequired)?;
    let mine = match claim.filter(|c| c.claim_id == poster) {
        Some(found) => Some(found.clone()),
        None => claims::by_id(&mut *conn, run.id, poster).await?,
    };
    match (mine, claim) {
        (Some(mine), _) if mine.lapsed_at.is_some() => Err(ResumeError::ClaimLapsed),
        // The turn's own claim, not lapsed: live, or its turn resumed under it (a different result then conflicts).
        (Some(mine), _) if mine.turn_index == run.turn_index => Ok(()),
        (_, Some(other)) if other.is_live() => Err(ResumeError::Claimed { until: other.until }),
        _ => Err(ResumeError::UnknownClaim),
    }
}

fn corrupt(run: &RunRow, what: &str) -> StorageError {
    StorageError::Corrupt(format!("run {} turn {}: {what}", run.id, run.turn_index))
}
