//! The rules of the calls a worker runs (docs/design.md §15) held by three processes of the real binary racing over
//! one fresh database: the same call's result posted through all three at once, a cancel against the last result,
//! and a result against the decision's replay. Each run is claimed once (docs/design.md §15) before any result is
//! posted, and every post names that claim; the claims' own races are `tests/claim_processes.rs`. Each race is repeated over `ROUNDS` runs, each run's requests spread
//! over the three processes differently, and what was recorded is counted in SQL in the tables the service writes
//! (`turn_calls`, `tool_events`, `approval_events`, the `events` outbox): nothing twice, nothing lost.
//!
//! Why processes and not tasks: `tests/api/worker_races.rs` races three instances inside one test process, which
//! share one runtime and one address space. Here each instance is an OS process with its own pool, runtime and
//! memory, configured only through its environment (`TOOLS_CONFIG` declares `save_page` the worker's), so the only
//! thing the three share is Postgres, as in a deployment. Whatever serializes the writers must then be the run's row
//! lock (§5), not anything an in-process test could share by accident, and the answers are the binary's own bytes
//! over HTTP.
//!
//! Nothing asserts on timing: which request wins is the scheduler's business, and every outcome allowed by §15 is
//! checked for coherence whichever it is. The first request polled is the first sent, so the order in which each
//! round sends its requests changes from round to round. Checked by hand against the service with the run's row
//! lock taken out: without it in the results' post, the first two tests fail within two rounds (a 500, a post
//! answered 200 where only one could win, a run resumed after its cancel); without it in the cancel, two racing
//! cancels record `run.cancelled` twice; with a released run's replay refused, the third fails.
//!
//! Over 400 lines: one harness of three processes (`Processes`) shared by the three races, each race's checks
//! written out per outcome.

mod support;

use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use support::{Service, TestDatabase, add_client};

const INSTANCES: usize = 3;
const ROUNDS: usize = 20;

/// Three service processes over one database of the test's own, an API key, a user 7 who owns every run, and a
/// pool for the checks in SQL. `save_page` is the worker's tool by the tool configuration file, `read_page` by each
/// run's own declaration; the service stores tool events at `full`, so each event's result can be compared.
struct Processes {
    instances: Vec<Service>,
    client: reqwest::Client,
    key: String,
    pool: PgPool,
    _config: tempfile::TempDir,
    // Last: the database is dropped after the processes and the pool.
    database: TestDatabase,
}

/// An answer of a process: its status, its bytes as sent, and those bytes as JSON (`Null` if they are not).
struct Answer {
    status: u16,
    bytes: Vec<u8>,
    json: Value,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}",
            self.status,
            String::from_utf8_lossy(&self.bytes)
        )
    }
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
    /// Rows of `approval_events`: one per decided turn.
    decisions: i64,
    /// Calls marked released (`turn_calls.released_at`).
    released_calls: i64,
    /// Calls with a stored result (`turn_calls.outcome`).
    results: i64,
    tool_events: i64,
    /// Events in the outbox, by type.
    waiting: i64,
    released: i64,
    resumed: i64,
    cancelled: i64,
}

impl Recorded {
    /// A run whose one decided turn released both calls and resumed once both results were in: every row once.
    fn resumed_once() -> Self {
        Recorded {
            status: "resumed".into(),
            decisions: 1,
            released_calls: 2,
            results: 2,
            tool_events: 2,
            waiting: 1,
            released: 1,
            resumed: 1,
            cancelled: 0,
        }
    }
}

/// A released run: its id, its turn digest, the decision's answer as first sent, and the claim a worker took on its
/// released calls (docs/design.md §15) before posting any result.
struct ReleasedRun {
    id: Uuid,
    digest: String,
    first_answer: Answer,
    claim_id: String,
}

impl Processes {
    async fn start() -> Self {
        let database = TestDatabase::new();
        let key = add_client(
            &database,
            &["users:write", "runs:write", "runs:read", "decisions:write"],
        )
        .await;
        let config = tempfile::tempdir().expect("a temporary directory");
        let tools = config.path().join("tools.toml");
        std::fs::write(
            &tools,
            "[tools.save_page]\neffect = \"write\"\nexecutor = \"worker\"\n",
        )
        .expect("the tool configuration is written");
        let tools = tools.to_str().expect("a UTF-8 path").to_owned();
        let settings = [("TOOLS_CONFIG", tools.as_str()), ("PRIVACY_LEVEL", "full")];
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
            _config: config,
            database,
        };
        let user = json!({"username": "u7", "is_admin": false, "can_approve_others": false, "disabled": false});
        let answer = processes
            .send(0, reqwest::Method::PUT, "/v1/users/7".into(), Some(user))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        processes
    }

    async fn send(
        &self,
        instance: usize,
        method: reqwest::Method,
        path: String,
        body: Option<Value>,
    ) -> Answer {
        let mut request = self
            .client
            .request(method, self.instances[instance].url(&path))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("the service answers");
        let status = answer.status().as_u16();
        let bytes = answer.bytes().await.expect("an answer body").to_vec();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            bytes,
            json,
        }
    }

    /// Posts `results` on `run` under its claim.
    async fn post_results(&self, instance: usize, run: &ReleasedRun, results: Value) -> Answer {
        let body = json!({"claim_id": run.claim_id, "results": results});
        self.send(
            instance,
            reqwest::Method::POST,
            format!("/v1/runs/{}/results", run.id),
            Some(body),
        )
        .await
    }

    /// The owner's approval of the whole turn, the same body each time it is sent.
    async fn approve(&self, instance: usize, id: Uuid, digest: &str) -> Answer {
        let body = json!({"approved": true, "decider_uid": 7, "turn_digest": digest});
        self.send(
            instance,
            reqwest::Method::POST,
            format!("/v1/runs/{id}/decision"),
            Some(body),
        )
        .await
    }

    async fn cancel(&self, instance: usize, id: Uuid) -> Answer {
        self.send(
            instance,
            reqwest::Method::POST,
            format!("/v1/runs/{id}/cancel"),
            None,
        )
        .await
    }

    /// A run of owner 7 with two calls of the worker's, registered through one process and approved through the
    /// next: released, both calls in `released_calls`.
    async fn released_run(&self, round: usize) -> ReleasedRun {
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
            // `save_page` is declared here without `executor`: the file's `worker` applies.
            "tools": [
                {"name": "save_page", "effect": "write"},
                {"name": "read_page", "effect": "read", "executor": "worker"},
            ],
        });
        let registered = self
            .send(
                round % INSTANCES,
                reqwest::Method::POST,
                "/v1/runs".into(),
                Some(body),
            )
            .await;
        assert_eq!(registered.status, 201, "{registered:?}");
        let digest = registered.json["turn"]["digest"]
            .as_str()
            .expect("a turn digest")
            .to_owned();
        let first_answer = self.approve((round + 1) % INSTANCES, id, &digest).await;
        assert_eq!(first_answer.status, 200, "{first_answer:?}");
        assert_eq!(first_answer.json["status"], "released", "{first_answer:?}");
        let released: Vec<&str> = first_answer.json["released_calls"]
            .as_array()
            .expect("released calls")
            .iter()
            .map(|call| call["call_id"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(released, ["call_1", "call_2"], "{first_answer:?}");
        let claimed = self
            .send(
                (round + 2) % INSTANCES,
                reqwest::Method::POST,
                format!("/v1/runs/{id}/claim"),
                Some(json!({})),
            )
            .await;
        assert_eq!(claimed.status, 200, "{claimed:?}");
        let claim_id = claimed.json["claim_id"]
            .as_str()
            .expect("a claim id")
            .to_owned();
        ReleasedRun {
            id,
            digest,
            first_answer,
            claim_id,
        }
    }

    async fn recorded(&self, id: Uuid) -> Recorded {
        let row: (String, i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
            "select r.status::text,
                    (select count(*) from approval_events where run_id = r.id),
                    (select count(*) from turn_calls where run_id = r.id and released_at is not null),
                    (select count(*) from turn_calls where run_id = r.id and outcome is not null),
                    (select count(*) from tool_events where run_id = r.id),
                    (select count(*) from events where run_id = r.id and type = 'run.waiting'),
                    (select count(*) from events where run_id = r.id and type = 'run.released'),
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
            decisions: row.1,
            released_calls: row.2,
            results: row.3,
            tool_events: row.4,
            waiting: row.5,
            released: row.6,
            resumed: row.7,
            cancelled: row.8,
        }
    }

    /// The stored result of a call and its tool event's result, as `(outcome, content, event result)`.
    async fn stored(
        &self,
        id: Uuid,
        call_id: &str,
    ) -> (Option<String>, Option<String>, Option<String>) {
        sqlx::query_as(
            "select c.outcome, c.content, e.result
             from turn_calls c left join tool_events e
               on e.run_id = c.run_id and e.turn_index = c.turn_index and e.position = c.position
             where c.run_id = $1 and c.call_id = $2",
        )
        .bind(id)
        .bind(call_id)
        .fetch_one(&self.pool)
        .await
        .expect("the call's result can be read")
    }

    /// Across the whole database: every run the test made is there, and no run has any event twice (each run has one
    /// turn, so each type of event may be recorded once at most).
    async fn assert_no_event_twice(&self, runs: usize) {
        let count: i64 = sqlx::query_scalar("select count(*) from runs")
            .fetch_one(&self.pool)
            .await
            .unwrap();
        assert_eq!(count, runs as i64, "every run registered is stored");
        let twice: Vec<(Uuid, String, i64)> = sqlx::query_as(
            "select run_id, type::text, count(*) from events group by run_id, type having count(*) > 1",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        assert!(twice.is_empty(), "events recorded twice: {twice:?}");
    }

    /// Stops the three processes with SIGTERM, each within its grace period.
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

fn result(call_id: &str, content: &str) -> Value {
    json!({"call_id": call_id, "content": content, "is_error": false})
}

fn released_result<'a>(view: &'a Value, call_id: &str) -> &'a Value {
    view["released_calls"]
        .as_array()
        .and_then(|calls| calls.iter().find(|call| call["call_id"] == call_id))
        .map_or(&Value::Null, |call| &call["result"]["content"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_posting_one_calls_result_record_it_once_and_replay_or_conflict_the_rest() {
    let processes = Processes::start().await;
    let mut wins = [0; INSTANCES];
    for round in 0..ROUNDS {
        let run = processes.released_run(round).await;
        // `call_2` first, alone: `call_1` is then the last released call, whose result closes the turn.
        let first = processes
            .post_results(
                (round + 2) % INSTANCES,
                &run,
                json!([result("call_2", "page 12 read")]),
            )
            .await;
        assert_eq!(
            (first.status, first.json["status"].as_str()),
            (200, Some("released")),
            "{first:?}"
        );

        // Even rounds: the same content through all three. Odd rounds: each process its own content.
        let same = round % 2 == 0;
        let contents: Vec<String> = (0..INSTANCES)
            .map(|i| {
                if same {
                    "saved".to_owned()
                } else {
                    format!("saved by process {i}")
                }
            })
            .collect();
        // Sent in turn from a process that changes each round (the first polled is the first sent), then put back
        // in the processes' order.
        let order: Vec<usize> = (0..INSTANCES).map(|k| (round + k) % INSTANCES).collect();
        let (processes, contents, released) = (&processes, &contents, &run);
        let mut sent = join_all(order.iter().map(|&i| async move {
            let answer = processes
                .post_results(i, released, json!([result("call_1", &contents[i])]))
                .await;
            (i, answer)
        }))
        .await;
        sent.sort_by_key(|(i, _)| *i);
        let answers: Vec<Answer> = sent.into_iter().map(|(_, answer)| answer).collect();

        let winners: Vec<usize> = (0..INSTANCES)
            .filter(|&i| answers[i].status == 200)
            .collect();
        let context = format!("round {round}: {answers:#?}");
        if same {
            assert_eq!(
                winners.len(),
                INSTANCES,
                "the same content is a replay: {context}"
            );
            for answer in &answers {
                assert_eq!(
                    answer.bytes, answers[0].bytes,
                    "replays answer the same bytes: {context}"
                );
            }
        } else {
            assert_eq!(winners.len(), 1, "exactly one content wins: {context}");
            for (i, answer) in answers.iter().enumerate() {
                if i != winners[0] {
                    assert_eq!(
                        (answer.status, answer.code()),
                        (409, "result_conflict"),
                        "{context}"
                    );
                }
            }
        }
        let winner = winners[0];
        if !same {
            wins[winner] += 1;
        }
        let won = &answers[winner].json;
        assert_eq!(won["status"], "resumed", "{context}");
        assert_eq!(
            released_result(won, "call_1"),
            contents[winner].as_str(),
            "{context}"
        );
        assert_eq!(released_result(won, "call_2"), "page 12 read", "{context}");

        assert_eq!(
            processes.recorded(run.id).await,
            Recorded::resumed_once(),
            "{context}"
        );
        let stored = Some(contents[winner].clone());
        assert_eq!(
            processes.stored(run.id, "call_1").await,
            (Some("ok".into()), stored.clone(), stored),
            "the winner's content, in the call and its tool event: {context}"
        );
    }
    processes.assert_no_event_twice(ROUNDS).await;
    eprintln!("rounds of different contents won, by process: {wins:?}");
    processes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_one_process_racing_the_last_result_through_another_leaves_one_coherent_outcome()
 {
    let processes = Processes::start().await;
    let (mut results_won, mut cancels_won) = (0, 0);
    for round in 0..ROUNDS {
        let run = processes.released_run(round).await;
        let (poster, canceller, third) = (
            round % INSTANCES,
            (round + 1) % INSTANCES,
            (round + 2) % INSTANCES,
        );
        // Even rounds race the last of the two results (`call_2` posted before); odd rounds both in one body.
        let last_only = round % 2 == 0;
        let body = if last_only {
            let first = processes
                .post_results(third, &run, json!([result("call_2", "page 12 read")]))
                .await;
            assert_eq!(first.status, 200, "{first:?}");
            json!([result("call_1", "saved")])
        } else {
            json!([result("call_1", "saved"), result("call_2", "page 12 read")])
        };
        // The third process sends a second cancel in rounds 0, 1, 4, 5, …, the same results again in the others.
        let third_cancels = (round / 2) % 2 == 0;
        let (posted, cancelled, other) = tokio::join!(
            processes.post_results(poster, &run, body.clone()),
            processes.cancel(canceller, run.id),
            async {
                if third_cancels {
                    processes.cancel(third, run.id).await
                } else {
                    processes.post_results(third, &run, body.clone()).await
                }
            },
        );
        let context = format!("round {round}: {posted:#?}\n{cancelled:#?}\n{other:#?}");
        let (posts, cancels) = if third_cancels {
            (vec![&posted], vec![&cancelled, &other])
        } else {
            (vec![&posted, &other], vec![&cancelled])
        };
        // A released run may be cancelled, and so may a resumed one: every cancel is answered the cancelled run.
        for cancel in &cancels {
            assert_eq!(
                (cancel.status, cancel.json["status"].as_str()),
                (200, Some("cancelled")),
                "{context}"
            );
        }
        // A post is recorded before the cancel, or refused after it.
        for post in &posts {
            assert!(
                post.status == 200 || (post.status, post.code()) == (409, "run_cancelled"),
                "{context}"
            );
        }
        let result_won = posts.iter().any(|post| post.status == 200);
        let earlier = i64::from(last_only);
        let expected = Recorded {
            status: "cancelled".into(),
            decisions: 1,
            released_calls: 2,
            results: if result_won { 2 } else { earlier },
            tool_events: if result_won { 2 } else { 0 },
            waiting: 1,
            released: 1,
            resumed: i64::from(result_won),
            cancelled: 1,
        };
        assert_eq!(processes.recorded(run.id).await, expected, "{context}");
        let call_1 = processes.stored(run.id, "call_1").await;
        let model_input = processes
            .send(
                third,
                reqwest::Method::GET,
                format!("/v1/runs/{}/model-input", run.id),
                None,
            )
            .await;
        if result_won {
            results_won += 1;
            assert_eq!(
                call_1,
                (
                    Some("ok".into()),
                    Some("saved".into()),
                    Some("saved".into())
                ),
                "{context}"
            );
            // The turn resumed before the cancel: its model input is whole, the worker's results in it.
            assert_eq!(model_input.status, 200, "{model_input:?}");
            let text = String::from_utf8_lossy(&model_input.bytes);
            assert!(
                text.contains("saved") && text.contains("page 12 read"),
                "{text}"
            );
        } else {
            cancels_won += 1;
            assert_eq!(
                call_1,
                (None, None, None),
                "nothing of a result refused after the cancel: {context}"
            );
            // Cancelled while released: a released call without a result, so no model input.
            assert_eq!(
                (model_input.status, model_input.code()),
                (409, "results_pending"),
                "{model_input:?}"
            );
        }
    }
    processes.assert_no_event_twice(ROUNDS).await;
    eprintln!("results won {results_won} rounds, cancels {cancels_won}");
    processes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decisions_replay_through_two_processes_racing_the_results_through_a_third_records_nothing_twice()
 {
    let processes = Processes::start().await;
    let mut replays_released = 0;
    for round in 0..ROUNDS {
        let run = processes.released_run(round).await;
        let poster = round % INSTANCES;
        let replayers = [(round + 1) % INSTANCES, (round + 2) % INSTANCES];
        let body = json!([result("call_1", "saved"), result("call_2", "page 12 read")]);
        let post = processes.post_results(poster, &run, body);
        let replay = join_all(replayers.map(|i| processes.approve(i, run.id, &run.digest)));
        // The first polled is the first sent: the results first in even rounds, the replays in odd ones.
        let (posted, replays) = if round % 2 == 0 {
            tokio::join!(post, replay)
        } else {
            let (replays, posted) = tokio::join!(replay, post);
            (posted, replays)
        };
        let context = format!("round {round}: {posted:#?}\n{replays:#?}");
        assert_eq!(
            (posted.status, posted.json["status"].as_str()),
            (200, Some("resumed")),
            "{context}"
        );

        // Whenever it came, a replay is answered 200 with the turn as it stood: as first answered while the results
        // were missing, or resumed with both results and the model input once they were there.
        let mut resumed_bytes = Vec::new();
        for replay in &replays {
            assert_eq!(replay.status, 200, "{context}");
            match replay.json["status"].as_str() {
                Some("released") => {
                    replays_released += 1;
                    assert_eq!(
                        replay.bytes, run.first_answer.bytes,
                        "as first answered: {context}"
                    );
                }
                Some("resumed") => {
                    assert_eq!(
                        replay.json["decision"], run.first_answer.json["decision"],
                        "{context}"
                    );
                    assert_eq!(
                        released_result(&replay.json, "call_1"),
                        "saved",
                        "{context}"
                    );
                    assert_eq!(
                        released_result(&replay.json, "call_2"),
                        "page 12 read",
                        "{context}"
                    );
                    assert!(replay.json.get("model_input").is_some(), "{context}");
                    resumed_bytes.push(replay.bytes.clone());
                }
                other => panic!("a replay answered status {other:?}: {context}"),
            }
        }
        // Once resumed, a replay's bytes stay the same, through any process.
        let after = processes.approve(poster, run.id, &run.digest).await;
        assert_eq!(
            (after.status, after.json["status"].as_str()),
            (200, Some("resumed")),
            "{after:?}"
        );
        for bytes in &resumed_bytes {
            assert_eq!(bytes, &after.bytes, "{context}");
        }

        assert_eq!(
            processes.recorded(run.id).await,
            Recorded::resumed_once(),
            "{context}"
        );
        for (call_id, content) in [("call_1", "saved"), ("call_2", "page 12 read")] {
            let content = Some(content.to_owned());
            assert_eq!(
                processes.stored(run.id, call_id).await,
                (Some("ok".into()), content.clone(), content),
                "{context}"
            );
        }
    }
    processes.assert_no_event_twice(ROUNDS).await;
    eprintln!(
        "replays answered released: {replays_released} of {}",
        2 * ROUNDS
    );
    processes.stop().await;
}
