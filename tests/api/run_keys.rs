//! The schema stays ready for a distribution by run id (docs/design.md §12, docs/operations.md "Past one primary"):
//! Citus refuses a primary key or unique constraint of a distributed table that does not hold its distribution
//! column, so every unique index of a table with a `run_id` column begins with `run_id`. Read from the catalog of a
//! freshly migrated database, so a migration that adds a table or a key is held to it as soon as it exists.

use crate::database::TestDatabase;

/// Tables with a `run_id` column that a distribution by run id leaves on one node, and why (docs/operations.md).
const NOT_BY_RUN: [(&str, &str); 2] = [
    (
        "events",
        "the feed orders a tenant's events by (xid, id) across runs; not distributed yet",
    ),
    (
        "remembered_rules",
        "an owner-scope rule has no run; a distributed layout keeps the table by tenant (§18)",
    ),
];

#[tokio::test]
async fn every_key_of_a_table_with_a_run_id_begins_with_it() {
    let (_database, pool) = TestDatabase::create().await;
    // Every unique index (primary keys and unique constraints are backed by one), with its table and first column.
    let keys: Vec<(String, String, String)> = sqlx::query_as(
        "select t.relname::text, i.relname::text, first.attname::text
         from pg_index x
         join pg_class t on t.oid = x.indrelid
         join pg_class i on i.oid = x.indexrelid
         join pg_namespace n on n.oid = t.relnamespace
         join pg_attribute first on first.attrelid = t.oid and first.attnum = x.indkey[0]
         where n.nspname = 'public' and x.indisunique
           and exists (select 1 from pg_attribute a
                       where a.attrelid = t.oid and a.attname = 'run_id' and not a.attisdropped)
         order by 1, 2",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let tables: Vec<&str> = keys.iter().map(|(table, ..)| table.as_str()).collect();
    // The check reads what it should: the run-scoped tables are there.
    for table in [
        "turn_calls",
        "approval_events",
        "tool_events",
        "worker_claims",
    ] {
        assert!(tables.contains(&table), "{table} not found among {keys:?}");
    }
    let misplaced: Vec<&(String, String, String)> = keys
        .iter()
        .filter(|(table, _, first)| {
            first != "run_id" && !NOT_BY_RUN.iter().any(|(name, _)| name == table)
        })
        .collect();
    assert!(
        misplaced.is_empty(),
        "unique keys of run-scoped tables that do not begin with run_id: {misplaced:?}"
    );
}
