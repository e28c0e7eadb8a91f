//! Expiry racing decisions across processes (docs/design.md §5): three service instances share one database, each with
//! its sweeper running often, and many decisions are fired at turns as they expire. Whoever wins, each turn ends
//! exactly once: by the decision (one approval event, its results, `run.resumed`) or by the expiry (the expired
//! result on every call, `run.expired`, no approval event), never both, and an expiry is never recorded as a denial.
//!
//! The decisions on each turn are sent from a little before its expiry to a little after it, so some turns are
//! decided and some expire; which ones is up to the scheduler, and nothing here asserts on timing.

mod support;

use std::time::Duration;

use chrono::Utc;
use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::Connection;
use uuid::Uuid;

use support::{Service, TestDatabase, add_client, call};

const INSTANCES: usize = 3;
const TURNS: usize = 24;
const DECISIONS_PER_TURN: usize = 9;

#[tokio::test]
async fn across_three_processes_each_turn_is_decided_or_expires_never_both() {
    let database = TestDatabase::new();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(Service::start_with(&database, &[("EXPIRY_SWEEP_INTERVAL_MS", "10")]).await);
    }
    let client = reqwest::Client::new();
    let body = json!({"username": "u7", "is_admin": false, "can_approve_others": false, "disabled": false});
    let (status, _) = call(
        &client,
        reqwest::Method::PUT,
        instances[0].url("/v1/users/7"),
        &key,
        Some(body),
    )
    .await;
    assert_eq!(status, 200);

    // Every turn expires in the half second after `start`, 20 ms after the one before.
    let start = Utc::now() + chrono::Duration::milliseconds(2000);
    let mut runs = Vec::new();
    for turn in 0..TURNS {
        let run_id = Uuid::new_v4();
        let expires_at = start + chrono::Duration::milliseconds(20 * turn as i64);
        let (status, run) = call(
            &client,
            reqwest::Method::POST,
            instances[turn % INSTANCES].url("/v1/runs"),
            &key,
            Some(json!({
                "id": run_id,
                "owner_uid": 7,
                "expires_at": expires_at.to_rfc3339(),
                "tools": [{"name": "update_page", "effect": "write"}],
                "messages": [
                    {"role": "user", "content": "Change two things."},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "update_page", "arguments": "{}"}},
                        {"id": "call_2", "type": "function", "function": {"name": "read_page", "arguments": "{}"}},
                    ]},
                ],
            })),
        )
        .await;
        assert_eq!(status, 201, "{run}");
        runs.push((run_id, run["turn"]["digest"].as_str().unwrap().to_owned()));
    }

    let races = runs
        .iter()
        .enumerate()
        .flat_map(|(turn, (run_id, digest))| {
            let (client, key) = (client.clone(), key.clone());
            let instances = &instances;
            // Each turn's decisions start somewhere from 120 ms before its expiry to 90 ms after it, 10 ms apart.
            let expires_at = start + chrono::Duration::milliseconds(20 * turn as i64);
            let first = expires_at + chrono::Duration::milliseconds(30 * (turn as i64 % 8 - 4));
            (0..DECISIONS_PER_TURN).map(move |i| {
                // One decision per turn, per call: deny the write with a reason, approve the read.
                let body = json!({"decider_uid": 7, "turn_digest": digest, "calls": [
                    {"call_id": "call_2", "approved": true},
                    {"call_id": "call_1", "approved": false, "reason": "variant"},
                ]});
                let url =
                    instances[(turn + i) % INSTANCES].url(&format!("/v1/runs/{run_id}/decision"));
                let (client, key) = (client.clone(), key.clone());
                let at = first + chrono::Duration::milliseconds(10 * i as i64);
                async move {
                    tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await;
                    let answer = client
                        .post(url)
                        .bearer_auth(key)
                        .json(&body)
                        .send()
                        .await
                        .expect("an answer");
                    let status = answer.status().as_u16();
                    (turn, status, answer.bytes().await.expect("a body"))
                }
            })
        });
    let answers = join_all(races).await;

    // Every turn has ended once the sweepers have had time to come by; wait for it, boundedly.
    let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
    for _ in 0..500 {
        let waiting: i64 =
            sqlx::query_scalar("select count(*) from runs where status <> 'resumed'")
                .fetch_one(&mut connection)
                .await
                .unwrap();
        if waiting == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (mut decided, mut expired) = (0, 0);
    for (turn, (run_id, _)) in runs.iter().enumerate() {
        let (status, approvals, expiries, expired_results, resumed_events, expired_events, denied): (
            String,
            i64,
            i64,
            i64,
            i64,
            i64,
            i64,
        ) = sqlx::query_as(
            "select r.status,
                    (select count(*) from approval_events where run_id = r.id),
                    (select count(*) from turn_expiries where run_id = r.id),
                    (select count(*) from turn_calls where run_id = r.id and outcome = 'expired'),
                    (select count(*) from events where run_id = r.id and type = 'run.resumed'),
                    (select count(*) from events where run_id = r.id and type = 'run.expired'),
                    (select count(*) from turn_calls where run_id = r.id and outcome = 'denied')
             from runs r where r.id = $1",
        )
        .bind(run_id)
        .fetch_one(&mut connection)
        .await
        .unwrap();
        assert_eq!(status, "resumed", "turn {turn} never ended");
        let mine: Vec<&(usize, u16, _)> = answers.iter().filter(|(t, ..)| *t == turn).collect();
        let codes: Vec<(u16, String)> = mine
            .iter()
            .map(|(_, status, bytes)| {
                let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                (*status, body["code"].as_str().unwrap_or("").to_owned())
            })
            .collect();
        if approvals == 1 {
            decided += 1;
            assert_eq!(
                (
                    expiries,
                    expired_results,
                    resumed_events,
                    expired_events,
                    denied
                ),
                (0, 0, 1, 0, 1),
                "turn {turn}: decided, yet not exactly the decision's records"
            );
            let winners: Vec<_> = mine
                .iter()
                .filter(|(_, status, _)| *status == 200)
                .collect();
            assert!(
                !winners.is_empty(),
                "turn {turn}: decided, no decision answered 200"
            );
            for (_, _, bytes) in &winners {
                assert_eq!(bytes, &winners[0].2, "turn {turn}: a replay's bytes differ");
            }
            for (status, code) in &codes {
                assert!(
                    *status == 200 || (*status == 409 && code == "resume_in_progress"),
                    "turn {turn}: decided, yet a decision was answered {status} {code}"
                );
            }
        } else {
            expired += 1;
            assert_eq!(
                (
                    approvals,
                    expiries,
                    expired_results,
                    resumed_events,
                    expired_events,
                    denied
                ),
                (0, 1, 2, 0, 1, 0),
                "turn {turn}: expired, yet not exactly the expiry's records"
            );
            for (status, code) in &codes {
                assert_eq!(
                    (*status, code.as_str()),
                    (409, "expired"),
                    "turn {turn}: expired, yet a decision was answered otherwise"
                );
            }
        }
    }
    println!("{decided} turns decided, {expired} expired, of {TURNS}");
    for mut instance in instances {
        instance
            .terminate(Duration::from_secs(support::GRACE_SECS))
            .await;
    }
}
