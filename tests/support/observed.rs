//! The real binary on a private cluster that records every statement it runs (`pg_stat_statements`), with a backend
//! user and waiting runs: what tests/distribution.rs, tests/plans.rs and tests/round_trips.rs read their statements
//! from.

use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use super::cluster::Cluster;
use super::executor::LoopbackExecutor;
use super::{Service, TestDatabase, add_client, call};

/// A running service whose statements are recorded; the cluster and the executor live as long as it does.
pub struct Observed {
    // Dropped in this order: the service stops, then the database is dropped, then the cluster.
    service: Service,
    executor: LoopbackExecutor,
    database: TestDatabase,
    key: String,
    client: reqwest::Client,
    _cluster: Cluster,
}

/// A waiting run: its id and its turn's digest.
pub type WaitingRun = (Uuid, String);

impl Observed {
    /// Starts the cluster, a database named after `prefix`, a loopback executor and the service with `settings`
    /// (besides `TOOLS_CONFIG`, which points at the executor).
    pub async fn start(prefix: &str, settings: &[(&str, &str)]) -> Observed {
        let cluster = tokio::task::block_in_place(|| {
            Cluster::start_new_with("shared_preload_libraries = 'pg_stat_statements'")
        });
        let name = format!("{prefix}_{}", Uuid::new_v4().simple());
        let database = TestDatabase {
            url: cluster.url(&name),
            name,
        };
        let key = add_client(
            &database,
            &[
                "users:write",
                "runs:write",
                "runs:read",
                "decisions:write",
                "approvals:read",
            ],
        )
        .await;
        let executor = LoopbackExecutor::start().await;
        let tools = executor.tools_config();
        let mut all = vec![("TOOLS_CONFIG", tools.as_str())];
        all.extend_from_slice(settings);
        let service = Service::start_with(&database, &all).await;
        Observed {
            service,
            executor,
            database,
            key,
            client: reqwest::Client::new(),
            _cluster: cluster,
        }
    }

    /// An authenticated JSON request to the service; the status and the parsed body.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let (status, body) = call(
            &self.client,
            method,
            self.service.url(path),
            &self.key,
            Some(body),
        )
        .await;
        (status.as_u16(), body)
    }

    /// An authenticated `GET`; the status and the parsed body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let url = self.service.url(path);
        let (status, body) = call(&self.client, reqwest::Method::GET, url, &self.key, None).await;
        (status.as_u16(), body)
    }

    /// Backend user 1, and `count` runs of theirs, each waiting on one `write` call `call_1`.
    pub async fn waiting_runs(&self, count: usize) -> Vec<WaitingRun> {
        let user = json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false});
        let (status, _) = self.send(reqwest::Method::PUT, "/v1/users/1", user).await;
        assert_eq!(status, 200);
        let mut runs = Vec::new();
        for _ in 0..count {
            let id = Uuid::new_v4();
            let body = json!({
                "id": id, "owner_uid": 1,
                "messages": [
                    {"role": "user", "content": "Shorten page 12."},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "update_page", "arguments": "{\"page\": 12}"}}]},
                ],
                "tools": [{"name": "update_page", "effect": "write"}],
            });
            let (status, run) = self.send(reqwest::Method::POST, "/v1/runs", body).await;
            assert_eq!(status, 201, "{run}");
            runs.push((id, run["turn"]["digest"].as_str().unwrap().to_owned()));
        }
        runs
    }

    /// The run's owner decides its turn (`digest` may be another turn's, to be refused).
    pub async fn decide(&self, (id, digest): &WaitingRun, approved: bool) -> (u16, Value) {
        let body = json!({"approved": approved, "decider_uid": 1, "turn_digest": digest});
        self.send(
            reqwest::Method::POST,
            &format!("/v1/runs/{id}/decision"),
            body,
        )
        .await
    }

    /// How many times the executor was sent the run's call `call_1`.
    pub fn sends_of(&self, (id, _): &WaitingRun) -> usize {
        self.executor
            .calls()
            .get(&format!("{id}:call_1"))
            .copied()
            .unwrap_or(0)
    }

    /// A direct connection to the database with the recorded statements forgotten: what runs from now on is what
    /// [`Observed::recorded`] reads.
    pub async fn start_recording(&self) -> PgConnection {
        let mut admin = PgConnection::connect(&self.database.url)
            .await
            .expect("a direct connection");
        sqlx::raw_sql(
            "create extension if not exists pg_stat_statements; select pg_stat_statements_reset()",
        )
        .execute(&mut admin)
        .await
        .expect("pg_stat_statements is loaded");
        admin
    }

    /// The statements of this database recorded since [`Observed::start_recording`], with how many times each ran,
    /// leaving out the reads of `pg_stat_statements` itself and any whose text contains one of `unless` (compared
    /// without case). Closes the connection.
    pub async fn recorded(mut admin: PgConnection, unless: &[&str]) -> Vec<(String, i64)> {
        let executed: Vec<(String, i64)> = sqlx::query_as(
            "select query, calls from pg_stat_statements
             where dbid = (select oid from pg_database where datname = current_database())
               and query not ilike '%pg_stat_statements%'
             order by query",
        )
        .fetch_all(&mut admin)
        .await
        .expect("the statements can be read");
        admin.close().await.expect("the connection closes");
        executed
            .into_iter()
            .filter(|(query, _)| {
                let text = query.to_lowercase();
                !unless.iter().any(|left_out| text.contains(left_out))
            })
            .collect()
    }
}
