//! Retention: what is old enough to delete, deleted in small batches so no statement holds locks for long.

use super::Database;

use super::{StorageError, sql};

/// Rows touched by one batch; small enough that a batch never nears the statement timeout.
const BATCH: i64 = 1_000;

/// What a purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PurgeReport {
    /// Tool events whose arguments and result were cleared (their metadata stays for the audit).
    pub tool_event_payloads_cleared: u64,
    /// Cancelled or completed runs deleted, with their transcript, calls and events.
    pub finished_runs_deleted: u64,
}

/// Clears tool-event payloads recorded more than `days` ago and deletes runs finished more than `days` ago.
pub async fn purge(pool: &Database, days: u32) -> Result<PurgeReport, StorageError> {
    let days = i32::try_from(days).unwrap_or(i32::MAX);
    let mut report = PurgeReport::default();
    loop {
        let cleared = sql::query(
            "update tool_events set arguments = null, result = null, arguments_sealed = null, result_sealed = null
             where ctid in (select ctid from tool_events
                            where recorded_at < now() - make_interval(days => $1)
                              and (arguments is not null or result is not null
                                   or arguments_sealed is not null or result_sealed is not null)
                            limit $2)",
        )
        .bind(days)
        .bind(BATCH)
        .execute(pool)
        .await?
        .rows_affected();
        report.tool_event_payloads_cleared += cleared;
        if cleared < BATCH as u64 {
            break;
        }
    }
    loop {
        // A run's events go with it in the same statement: the outbox has no foreign key to cascade from
        // (migration 0010 says why).
        let deleted: i64 = sql::query_scalar(
            "with gone as (
                 delete from runs where id in (select id from runs
                     where status in ('cancelled', 'completed') and updated_at < now() - make_interval(days => $1)
                     limit $2)
                 returning id
             ), events_gone as (
                 delete from events where run_id in (select id from gone)
             )
             select count(*) from gone",
        )
        .bind(days)
        .bind(BATCH)
        .fetch_one(pool)
        .await?;
        report.finished_runs_deleted += deleted as u64;
        if deleted < BATCH {
            break;
        }
    }
    Ok(report)
}
