//! A Postgres database of the test's own on the server `DATABASE_URL` names, dropped when the test ends.
//!
//! The tests need only a reachable server: the database in `DATABASE_URL` need not exist, because every test
//! creates (or lets the binary create) a database with a unique name and drops it afterwards.

#![allow(dead_code)] // Each test binary uses the part it needs.

use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};
use uuid::Uuid;

/// The server tests run against: the environment's `DATABASE_URL`, else the one `.cargo/config.toml` gave the
/// compiler, else the README's local default.
pub fn server_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .or_else(|| option_env!("DATABASE_URL").map(str::to_owned))
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/approval_resume".to_owned())
}

/// `url` with its database name replaced, query string kept.
pub fn with_database(url: &str, name: &str) -> String {
    let mut url = reqwest::Url::parse(url).expect("DATABASE_URL is a URL");
    url.set_path(&format!("/{name}"));
    url.to_string()
}

/// A database of the test's own; dropping this drops it (best effort, also when the test panics).
pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

impl TestDatabase {
    /// A name and URL only: the binary under test creates the database on first use.
    pub fn new() -> Self {
        let name = format!("approval_resume_t_{}", Uuid::new_v4().simple());
        let url = with_database(&server_url(), &name);
        TestDatabase { name, url }
    }

    /// Creates the database, applies the migrations, and answers it with a pool over it.
    pub async fn create() -> (Self, PgPool) {
        let database = Self::new();
        let mut admin = sqlx::PgConnection::connect(&with_database(&database.url, "postgres"))
            .await
            .expect("the Postgres server of DATABASE_URL is reachable");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "create database \"{}\"",
            database.name
        )))
        .execute(&mut admin)
        .await
        .expect("a test database can be created");
        admin.close().await.expect("the admin connection closes");
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect(&database.url)
            .await
            .expect("the test database accepts connections");
        approval_resume::storage::MIGRATOR
            .run(&pool)
            .await
            .expect("the migrations apply");
        (database, pool)
    }
}

impl TestDatabase {
    /// Another pool over the database, as another service instance would hold.
    pub async fn pool(&self, max_connections: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(&self.url)
            .await
            .expect("the test database accepts connections")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin_url = with_database(&self.url, "postgres");
        let drop = format!("drop database if exists \"{}\" with (force)", self.name);
        // Drop runs inside the test's runtime, which cannot be blocked on; a thread with a runtime of its own can.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&mut admin)
                    .await?;
                admin.close().await
            })?;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        })
        .join();
        if let Ok(Err(error)) = dropped {
            eprintln!("could not drop the test database {}: {error}", self.name);
        }
    }
}

/// Waits (at most ten seconds) until `backends` backends of the pool's database wait for a lock.
pub async fn wait_until_waiting_for_locks(pool: &PgPool, backends: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity
             where datname = current_database() and wait_event_type = 'Lock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting >= backends {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{backends} backends never waited for a lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
