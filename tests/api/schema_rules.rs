//! The database's own rules on what a row may hold, after migration 0010 moved the single-column ones into domains
//! and merged the multi-column ones: every value the service never writes is still refused by Postgres itself
//! (SQLSTATE 23514, `check_violation`), and the values it writes are accepted.

use crate::database::TestDatabase;
use crate::support;

/// The SQLSTATE of `statement`'s failure, or `None` if it succeeded (inside a transaction rolled back after).
async fn refusal(pool: &sqlx::PgPool, statement: &str) -> Option<String> {
    let mut tx = pool.begin().await.unwrap();
    let outcome = sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&mut *tx)
        .await;
    tx.rollback().await.unwrap();
    outcome.err().and_then(|error| {
        error
            .as_database_error()
            .and_then(|e| e.code().map(|c| c.into_owned()))
    })
}

#[tokio::test]
async fn values_outside_a_column_s_rules_are_refused_by_the_database_and_the_written_ones_accepted()
{
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (run, digest) = support::owned_run(&app).await;
    app.decide(run, false, Some(7), &digest).await;
    let run = format!("'{run}'");

    let refused = [
        format!("update runs set status = 'paused' where id = {run}"),
        format!("update runs set privacy_level = 'everything' where id = {run}"),
        format!("update runs set owner_uid = -1 where id = {run}"),
        format!("update runs set turn_index = -1 where id = {run}"),
        format!("update runs set turn_digest = 'ABC' where id = {run}"),
        format!("update runs set messages = null where id = {run}"),
        format!("update turn_calls set position = -1 where run_id = {run}"),
        format!("update turn_calls set effect = 'delete' where run_id = {run}"),
        format!("update turn_calls set outcome = 'maybe' where run_id = {run}"),
        format!("update turn_calls set tool = 'no spaces allowed' where run_id = {run}"),
        format!("update turn_calls set arguments_sealed = '\\x00' where run_id = {run}"),
        format!("update turn_calls set content_sealed = '\\x00' where run_id = {run}"),
        format!("update turn_calls set is_error = null where run_id = {run}"),
        format!("update approval_events set decided_by = 'someone' where run_id = {run}"),
        format!("update approval_events set reason = 'because' where run_id = {run}"),
        format!("update tool_events set privacy_level = 'none' where run_id = {run}"),
        format!(
            "update tool_events set arguments = 'a', arguments_sealed = '\\x00' where run_id = {run}"
        ),
        format!("update events set type = 'run.deleted' where run_id = {run}"),
    ];
    for statement in &refused {
        assert_eq!(
            refusal(&pool, statement).await.as_deref(),
            Some("23514"),
            "{statement}"
        );
    }

    let accepted = [
        format!("update runs set status = 'completed', privacy_level = 'full' where id = {run}"),
        format!("update turn_calls set outcome = 'expired', effect = 'read' where run_id = {run}"),
        format!(
            "update approval_events set decided_by = 'other_user', reason = 'skip' where run_id = {run}"
        ),
        format!("update events set type = 'run.cancelled' where run_id = {run}"),
    ];
    for statement in &accepted {
        assert_eq!(refusal(&pool, statement).await, None, "{statement}");
    }
}
