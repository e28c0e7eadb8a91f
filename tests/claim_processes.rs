//! Claims on released calls (docs/design.md §15, "Claims" and "A lapsed claim") held by three processes of the real
//! binary racing over one fresh database: claims through all three at once, a claim against a cancel, a result
//! posted as the claim lapses, and a renewal against the sweeper. Each race is repeated over `ROUNDS` runs, the
//! processes taking the roles in turn, and every outcome is counted in SQL in the tables the service writes
//! (`worker_claims`, `turn_calls`, `tool_events`, the `events` outbox).
//!
//! The lapse is made to happen within a round by moving the claim's `until` in SQL to a few milliseconds from the
//! database's clock (`until_in`), rather than by `WORKER_CLAIM_TTL_SECS` at its minimum of 5 s (twenty rounds would
//! take minutes): the service judges it by the same clock either way. The sweepers of all three processes run every
//! 10 ms (`EXPIRY_SWEEP_INTERVAL_MS`, its minimum), so the request sent as the lease runs out races them as well as
//! the clock. Nothing asserts on timing: each allowed outcome is checked for coherence, whichever it is. Checked by
//! hand against the service with the run's row lock taken out of the claim (`resume::claims`): two claims at once
//! are then both granted, or the second fails on the primary key (a 500), within a few rounds.

mod support;

use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use support::{Service, TestDatabase, add_client};

const INSTANCES: usize = 3;
const ROUNDS: usize = 20;
/// Milliseconds from the database's clock at which a race's claim is made to lapse.
const LAPSE_MS: u64 = 25;

/// How long after moving the claim's `until` a round sends its request: 0 to 40 ms, around `LAPSE_MS` (a request
/// takes a few milliseconds to arrive), so some rounds arrive before the lapse and some after.
fn send_after(round: usize) -> Duration {
    Duration::from_millis(10 * (round % 5) as u64)
}

/// Three service processes over one database of the test's own, an API key, a user 7 who owns every run, and a
/// pool for the checks in SQL.
struct Processes {
    instances: Vec<Service>,
    client: reqwest::Client,
    key: String,
    pool: PgPool,
    // Last: the database is dropped after the processes and the pool.
    database: TestDatabase,
}

/// An answer of a process: its status and its body as JSON (`Null` if it is not).
#[derive(Debug)]
struct Answer {
    status: u16,
    json: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.json["code"].as_str().unwrap_or("")
    }
}

/// A run's records, counted in SQL.
#[derive(Debug, PartialEq, Eq)]
struct Recorded {
    status: String,
    claims: i64,
    /// Claims no longer live: ended by the last result, a lapse or a cancel.
    ended_claims: i64,
    lapsed_claims: i64,
    results: i64,
    interrupted: i64,
    tool_events: i64,
    resumed: i64,
    cancelled: i64,
}

impl Processes {
    async fn start() -> Self {
        let database = TestDatabase::new();
        let key = add_client(
            &database,
            &["users:write", "runs:write", "runs:read", "decisions:write"],
        )
        .await;
        let settings = [
            ("PRIVACY_LEVEL", "full"),
            ("EXPIRY_SWEEP_INTERVAL_MS", "10"),
        ];
        let mut instances = Vec::new();
        for _ in 0..INSTANCES {
            instances.push(Service::start_with(&database, &settings).await);
        }
        let processes = Processes {
            instances,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .expect("an HTTP client"),
            key,
            pool: database.pool(4).await,
            database,
        };
        let user = json!({"username": "u7", "is_admin": false, "can_approve_others": false, "disabled": false});
        let answer = processes
            .send(0, "PUT", "/v1/users/7".into(), Some(user))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        processes
    }

    async fn send(
        &self,
        instance: usize,
        method: &str,
        path: String,
        body: Option<Value>,
    ) -> Answer {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self
            .client
            .request(method, self.instances[instance].url(&path))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("the service answers");
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await.expect("an answer body");
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status, json }
    }

    async fn claim(&self, instance: usize, id: Uuid, claim_id: Option<&str>) -> Answer {
        let body = match claim_id {
            Some(claim_id) => json!({"claim_id": claim_id}),
            None => json!({}),
        };
        self.send(instance, "POST", format!("/v1/runs/{id}/claim"), Some(body))
            .await
    }

    /// Posts both calls' results under `claim_id`.
    async fn post_results(&self, instance: usize, id: Uuid, claim_id: &str) -> Answer {
        let body = json!({"claim_id": claim_id, "results": [
            {"call_id": "call_1", "content": "saved", "is_error": false},
            {"call_id": "call_2", "content": "page 12 read", "is_error": false},
        ]});
        self.send(
            instance,
            "POST",
            format!("/v1/runs/{id}/results"),
            Some(body),
        )
        .await
    }

    async fn cancel(&self, instance: usize, id: Uuid) -> Answer {
        self.send(instance, "POST", format!("/v1/runs/{id}/cancel"), None)
            .await
    }

    /// A run of owner 7 with two calls of the worker's, registered through one process and approved through the
    /// next: released.
    async fn released_run(&self, round: usize) -> Uuid {
        let id = Uuid::new_v4();
        let body = json!({
            "id": id,
            "owner_uid": 7,
            "messages": [
                {"role": "user", "content": "Save page 12, then read it back."},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "save_page", "arguments": "{\"page\": 12}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "read_page", "arguments": "{\"page\": 12}"}},
                ]},
            ],
            "tools": [
                {"name": "save_page", "effect": "write", "executor": "worker"},
                {"name": "read_page", "effect": "read", "executor": "worker"},
            ],
        });
        let registered = self
            .send(round % INSTANCES, "POST", "/v1/runs".into(), Some(body))
            .await;
        assert_eq!(registered.status, 201, "{registered:?}");
        let digest = registered.json["turn"]["digest"].clone();
        let decision = json!({"approved": true, "decider_uid": 7, "turn_digest": digest});
        let approved = self
            .send(
                (round + 1) % INSTANCES,
                "POST",
                format!("/v1/runs/{id}/decision"),
                Some(decision),
            )
            .await;
        assert_eq!(approved.json["status"], "released", "{approved:?}");
        id
    }

    /// A released run claimed through one process: its id and the claim's id.
    async fn claimed_run(&self, round: usize) -> (Uuid, String) {
        let id = self.released_run(round).await;
        let claimed = self.claim((round + 2) % INSTANCES, id, None).await;
        assert_eq!(claimed.status, 200, "{claimed:?}");
        let claim_id = claimed.json["claim_id"]
            .as_str()
            .expect("a claim id")
            .to_owned();
        (id, claim_id)
    }

    /// Moves run `id`'s claim to lapse `ms` milliseconds from now on the database's clock.
    async fn until_in(&self, id: Uuid, ms: u64) {
        sqlx::query(
            "update worker_claims set until = clock_timestamp() + make_interval(secs => $2) where run_id = $1",
        )
        .bind(id)
        .bind(ms as f64 / 1000.0)
        .execute(&self.pool)
        .await
        .expect("the claim's until moves");
    }

    async fn recorded(&self, id: Uuid) -> Recorded {
        let row: (String, i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
            "select r.status::text,
                    (select count(*) from worker_claims where run_id = r.id),
                    (select count(*) from worker_claims where run_id = r.id and ended_at is not null),
                    (select count(*) from worker_claims where run_id = r.id and lapsed_at is not null),
                    (select count(*) from turn_calls where run_id = r.id and outcome is not null),
                    (select count(*) from turn_calls where run_id = r.id and outcome = 'interrupted'),
                    (select count(*) from tool_events where run_id = r.id),
                    (select count(*) from events where run_id = r.id and type = 'run.resumed'),
                    (select count(*) from events where run_id = r.id and type = 'run.cancelled')
             from runs r where r.id = $1",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .expect("the run's records can be counted");
        Recorded {
            status: row.0,
            claims: row.1,
            ended_claims: row.2,
            lapsed_claims: row.3,
            results: row.4,
            interrupted: row.5,
            tool_events: row.6,
            resumed: row.7,
            cancelled: row.8,
        }
    }

    /// Across the whole database: no run has any event twice, nor more than one claim.
    async fn assert_nothing_twice(&self) {
        let twice: Vec<(Uuid, String, i64)> = sqlx::query_as(
            "select run_id, type::text, count(*) from events group by run_id, type having count(*) > 1",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        assert!(twice.is_empty(), "events recorded twice: {twice:?}");
        let claims: Vec<(Uuid, i64)> = sqlx::query_as(
            "select run_id, count(*) from worker_claims group by run_id having count(*) > 1",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        assert!(claims.is_empty(), "runs claimed twice: {claims:?}");
    }

    async fn stop(mut self) {
        self.pool.close().await;
        for instance in &mut self.instances {
            instance
                .terminate(Duration::from_secs(support::GRACE_SECS))
                .await;
        }
        drop(self.database);
    }
}

/// The records of a run resumed under its claim with both results posted, or lapsed with both calls interrupted.
fn resumed(lapsed: bool) -> Recorded {
    Recorded {
        status: "resumed".into(),
        claims: 1,
        ended_claims: 1,
        lapsed_claims: i64::from(lapsed),
        results: 2,
        interrupted: if lapsed { 2 } else { 0 },
        tool_events: 2,
        resumed: 1,
        cancelled: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_claiming_one_run_at_once_grant_exactly_one_claim() {
    let processes = Processes::start().await;
    let mut wins = [0; INSTANCES];
    for round in 0..ROUNDS {
        let id = processes.released_run(round).await;
        let order: Vec<usize> = (0..INSTANCES).map(|k| (round + k) % INSTANCES).collect();
        let processes_ref = &processes;
        let mut sent = join_all(
            order
                .iter()
                .map(|&i| async move { (i, processes_ref.claim(i, id, None).await) }),
        )
        .await;
        sent.sort_by_key(|(i, _)| *i);
        let context = format!("round {round}: {sent:#?}");
        let winners: Vec<&(usize, Answer)> = sent.iter().filter(|(_, a)| a.status == 200).collect();
        assert_eq!(winners.len(), 1, "exactly one claim is granted: {context}");
        let (winner, granted) = winners[0];
        wins[*winner] += 1;
        for (i, answer) in &sent {
            if i != winner {
                assert_eq!(
                    (answer.status, answer.code()),
                    (409, "claimed"),
                    "{context}"
                );
                assert_eq!(answer.json["until"], granted.json["until"], "{context}");
            }
        }
        let recorded = processes.recorded(id).await;
        assert_eq!(
            (
                recorded.status.as_str(),
                recorded.claims,
                recorded.ended_claims,
                recorded.results
            ),
            ("released", 1, 0, 0),
            "{context}"
        );
        let stored: Uuid =
            sqlx::query_scalar("select claim_id from worker_claims where run_id = $1")
                .bind(id)
                .fetch_one(&processes.pool)
                .await
                .unwrap();
        assert_eq!(granted.json["claim_id"], stored.to_string(), "{context}");
    }
    processes.assert_nothing_twice().await;
    eprintln!("claims won, by process: {wins:?}");
    processes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_racing_a_cancel_through_another_process_leaves_one_coherent_outcome() {
    let processes = Processes::start().await;
    let (mut claims_first, mut cancels_first) = (0, 0);
    for round in 0..ROUNDS {
        let id = processes.released_run(round).await;
        let (claimer, canceller) = (round % INSTANCES, (round + 1) % INSTANCES);
        let (claimed, cancelled) = if round % 2 == 0 {
            tokio::join!(
                processes.claim(claimer, id, None),
                processes.cancel(canceller, id)
            )
        } else {
            let (cancelled, claimed) = tokio::join!(
                processes.cancel(canceller, id),
                processes.claim(claimer, id, None)
            );
            (claimed, cancelled)
        };
        let context = format!("round {round}: {claimed:#?}\n{cancelled:#?}");
        assert_eq!(
            (cancelled.status, cancelled.json["status"].as_str()),
            (200, Some("cancelled")),
            "a released run may be cancelled: {context}"
        );
        let recorded = processes.recorded(id).await;
        let granted = claimed.status == 200;
        if granted {
            claims_first += 1;
            // The claim came first; the cancel ended it.
            let claim_id = claimed.json["claim_id"].as_str().unwrap_or("");
            let posted = processes
                .post_results((round + 2) % INSTANCES, id, claim_id)
                .await;
            assert_eq!(
                (posted.status, posted.code()),
                (409, "run_cancelled"),
                "{context}"
            );
        } else {
            cancels_first += 1;
            assert_eq!(
                (claimed.status, claimed.code()),
                (409, "run_cancelled"),
                "{context}"
            );
        }
        assert_eq!(
            recorded,
            Recorded {
                status: "cancelled".into(),
                claims: i64::from(granted),
                ended_claims: i64::from(granted),
                lapsed_claims: 0,
                results: 0,
                interrupted: 0,
                tool_events: 0,
                resumed: 0,
                cancelled: 1,
            },
            "{context}"
        );
    }
    processes.assert_nothing_twice().await;
    eprintln!("claims before the cancel: {claims_first}, cancels first: {cancels_first}");
    processes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_posted_as_the_claim_lapses_is_recorded_or_refused_never_both() {
    let processes = Processes::start().await;
    let (mut recorded_first, mut lapsed_first) = (0, 0);
    for round in 0..ROUNDS {
        let (id, claim_id) = processes.claimed_run(round).await;
        // The lease runs out 25 ms from now; the post is sent 0 to 40 ms from now, before it or after it.
        processes.until_in(id, LAPSE_MS).await;
        tokio::time::sleep(send_after(round)).await;
        let posted = processes
            .post_results(round % INSTANCES, id, &claim_id)
            .await;
        let context = format!("round {round}: {posted:#?}");
        let recorded = processes.recorded(id).await;
        if posted.status == 200 {
            recorded_first += 1;
            assert_eq!(posted.json["status"], "resumed", "{context}");
            assert_eq!(
                recorded,
                resumed(false),
                "the results, no interrupted: {context}"
            );
        } else {
            lapsed_first += 1;
            assert_eq!(
                (posted.status, posted.code()),
                (409, "claim_lapsed"),
                "{context}"
            );
            assert_eq!(
                recorded,
                resumed(true),
                "interrupted, the post refused: {context}"
            );
        }
        // Whatever the sweepers do after, nothing more is written.
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(processes.recorded(id).await, recorded, "{context}");
    }
    processes.assert_nothing_twice().await;
    eprintln!("results recorded before the lapse: {recorded_first}, lapses first: {lapsed_first}");
    processes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_racing_the_sweepers_is_renewed_or_refused_lapsed_never_both() {
    let processes = Processes::start().await;
    let (mut renewed_first, mut lapsed_first) = (0, 0);
    for round in 0..ROUNDS {
        let (id, claim_id) = processes.claimed_run(round).await;
        processes.until_in(id, LAPSE_MS).await;
        tokio::time::sleep(send_after(round)).await;
        let renewal = processes
            .claim(round % INSTANCES, id, Some(&claim_id))
            .await;
        let context = format!("round {round}: {renewal:#?}");
        // Past the sweepers' next rounds: a renewed claim must not lapse, a lapsed one is written once.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let recorded = processes.recorded(id).await;
        if renewal.status == 200 {
            renewed_first += 1;
            assert_eq!(renewal.json["claim_id"], claim_id, "{context}");
            assert_eq!(
                recorded,
                Recorded {
                    status: "released".into(),
                    claims: 1,
                    ended_claims: 0,
                    lapsed_claims: 0,
                    results: 0,
                    interrupted: 0,
                    tool_events: 0,
                    resumed: 0,
                    cancelled: 0,
                },
                "renewed, nothing interrupted: {context}"
            );
            let posted = processes
                .post_results((round + 1) % INSTANCES, id, &claim_id)
                .await;
            assert_eq!(posted.status, 200, "the renewed claim holds: {posted:#?}");
            assert_eq!(processes.recorded(id).await, resumed(false), "{context}");
        } else {
            lapsed_first += 1;
            assert_eq!(
                (renewal.status, renewal.code()),
                (409, "claim_lapsed"),
                "{context}"
            );
            assert_eq!(recorded, resumed(true), "lapsed once: {context}");
        }
    }
    processes.assert_nothing_twice().await;
    eprintln!("renewed before the lapse: {renewed_first}, lapsed first: {lapsed_first}");
    processes.stop().await;
}
