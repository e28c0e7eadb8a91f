//! The only way statements are built: `sqlx::query`, `query_as` and `query_scalar`, prepared as a named
//! statement that each connection caches, or unnamed when a transaction pooler sits in front.
//!
//! Behind PgBouncer in transaction mode one client connection is served by different server connections from one
//! transaction to the next, so a named statement prepared on one (`sqlx_s_1`) collides with another client's of the
//! same name, or is missing where it is used. An unnamed statement lives only until the next one on its server
//! connection, and `Database` keeps each statement inside a transaction there, so its Parse and its Bind reach the
//! same server connection. Which of the two applies is decided once, at start-up, for the whole process.

use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{QueryAs, QueryScalar};
use sqlx::{FromRow, Postgres, SqlSafeStr};

/// A statement with its parameters bound so far, for functions that bind a group of parameters shared by statements.
pub(crate) type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// Whether statements are named and cached per connection (the default, one round trip each once cached).
static NAMED: AtomicBool = AtomicBool::new(true);

/// Chooses unnamed statements for the rest of the process (a transaction pooler is in front), or named ones.
pub fn use_named_statements(named: bool) {
    NAMED.store(named, Ordering::Relaxed);
}

fn named() -> bool {
    NAMED.load(Ordering::Relaxed)
}

/// `sqlx::query`, named or not as configured.
pub fn query<'q>(sql: impl SqlSafeStr) -> Query<'q> {
    sqlx::query(sql).persistent(named())
}

/// `sqlx::query_as`, named or not as configured.
pub fn query_as<'q, O>(sql: impl SqlSafeStr) -> QueryAs<'q, Postgres, O, PgArguments>
where
    O: for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_as(sql).persistent(named())
}

/// `sqlx::query_scalar`, named or not as configured.
pub fn query_scalar<'q, O>(sql: impl SqlSafeStr) -> QueryScalar<'q, Postgres, O, PgArguments>
where
    (O,): for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_scalar(sql).persistent(named())
}

/// A run's status as the condition of a statement that moves that one run on, found by `id = $1`: `coalesce(status =
/// '…', false)`, which is the same test (the status is never null), but one the planner cannot read as the predicate
/// of a partial index. Given `status = 'resuming'` or `status = 'waiting_for_approval'` as such, it may find the run
/// through the partial index of every run in that status (`runs_resuming_lease`, `runs_tenant_waiting`), filtering
/// all of them by id, whenever its statistics were taken while none was in that status: then every close reads every
/// resuming run, and every deny every waiting one (tests/plans.rs; BENCHMARKS.md, "A run found by its key").
macro_rules! status_is {
    ($status:literal) => {
        concat!("coalesce(status = '", $status, "', false)")
    };
}
pub(super) use status_is;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every statement of the service goes through this module, so the PgBouncer setting reaches all of them.
    #[test]
    fn no_statement_of_the_service_is_built_around_this_module() {
        let mut bypassing = Vec::new();
        visit(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut bypassing,
        );
        assert!(
            bypassing.is_empty(),
            "build statements with storage::sql, not sqlx directly: {bypassing:?}"
        );
    }

    fn visit(dir: &Path, bypassing: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                visit(&path, bypassing);
            } else if path.extension().is_some_and(|ext| ext == "rs") && !path.ends_with("sql.rs") {
                let text = std::fs::read_to_string(&path).expect("a source file is readable");
                for (number, line) in text.lines().enumerate() {
                    if ["sqlx::query(", "sqlx::query_as", "sqlx::query_scalar"]
                        .iter()
                        .any(|call| line.contains(call))
                    {
                        bypassing.push(format!("{}:{}", path.display(), number + 1));
                    }
                }
            }
        }
    }
}
