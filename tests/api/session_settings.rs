//! What every connection of the service runs with, directly and behind a transaction pooler: no JIT compilation
//! (docs/operations.md, "JIT"), set per session directly and per transaction behind a pooler, so that nothing leaks
//! into another client's session.

use std::time::Duration;

use approval_resume::storage::connect::{self, PoolSettings};
use approval_resume::storage::sql;

use crate::database::TestDatabase;

#[tokio::test]
async fn the_services_statements_run_without_jit_directly_and_behind_a_pooler() {
    let (database, _pool) = TestDatabase::create().await;
    for pgbouncer in [false, true] {
        let settings = PoolSettings {
            database_url: database.url.clone(),
            migration_url: None,
            pgbouncer,
            max_connections: 2,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(5),
            primary_check: Duration::from_secs(1),
        };
        let db = connect::connect(&settings).await.unwrap();
        let jit: String = sql::query_scalar("select current_setting('jit')")
            .fetch_one(&db)
            .await
            .unwrap();
        assert_eq!(jit, "off", "pgbouncer: {pgbouncer}");
        let mut tx = db.begin().await.unwrap();
        let jit: String = sql::query_scalar("select current_setting('jit')")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(jit, "off", "pgbouncer: {pgbouncer}, in a transaction");
    }
}
