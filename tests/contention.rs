//! Exactly once across processes: three service instances share one database, and many decisions, the same and
//! conflicting ones, race for each turn. Each time one decision wins, one set of events exists, and every loser is
//! answered 200 with the winner's bytes (the same decision), 409 `already_decided` (another decision), or 409
//! `resume_in_progress` while a winning approval is still running its tools.

mod support;

use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::Connection;
use uuid::Uuid;

use support::{Service, TestDatabase, add_client, call};

const INSTANCES: usize = 3;
const TURNS: usize = 12;
const DECISIONS_PER_TURN: usize = 18;

#[tokio::test]
async fn across_three_processes_exactly_one_decision_wins_each_turn() {
    let database = TestDatabase::new();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let mut instances = Vec::new();
    for _ in 0..INSTANCES {
        instances.push(Service::start(&database).await);
    }
    let client = reqwest::Client::new();
    for (uid, admin, approver) in [(7, false, false), (8, false, true), (9, true, false)] {
        let body = json!({"username": format!("u{uid}"), "is_admin": admin, "can_approve_others": approver, "disabled": false});
        let (status, _) = call(
            &client,
            reqwest::Method::PUT,
            instances[0].url(&format!("/v1/users/{uid}")),
            &key,
            Some(body),
        )
        .await;
        assert_eq!(status, 200);
    }

    for turn in 0..TURNS {
        let run_id = Uuid::new_v4();
        let (status, run) = call(
            &client,
            reqwest::Method::POST,
            instances[turn % INSTANCES].url("/v1/runs"),
            &key,
            Some(json!({
                "id": run_id,
                "owner_uid": 7,
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
        let digest = run["turn"]["digest"].as_str().unwrap().to_owned();

        let races = (0..DECISIONS_PER_TURN).map(|i| {
            // Three different decisions, each sent several times, through all three instances.
            let (approved, decider) = [(false, 7), (false, 8), (true, 9)][i % 3];
            let url = instances[i % INSTANCES].url(&format!("/v1/runs/{run_id}/decision"));
            let body = json!({"approved": approved, "decider_uid": decider, "turn_digest": digest});
            let (client, key) = (client.clone(), key.clone());
            async move {
                let answer = client
                    .post(url)
                    .bearer_auth(key)
                    .json(&body)
                    .send()
                    .await
                    .expect("an answer");
                let status = answer.status().as_u16();
                (status, decider, answer.bytes().await.expect("a body"))
            }
        });
        let answers = join_all(races).await;

        let winners: Vec<&(u16, i64, _)> = answers
            .iter()
            .filter(|(status, ..)| *status == 200)
            .collect();
        assert!(!winners.is_empty(), "turn {turn}: no decision won");
        let (_, winning_decider, winning_bytes) = winners[0];
        for (status, decider, bytes) in &answers {
            match status {
                200 => {
                    assert_eq!(
                        decider, winning_decider,
                        "turn {turn}: two different decisions won"
                    );
                    assert_eq!(
                        bytes, winning_bytes,
                        "turn {turn}: a replay's bytes differ from the winner's"
                    );
                }
                409 => {
                    let problem: Value = serde_json::from_slice(bytes).unwrap();
                    // While a winning approval runs its tools, every other ask is told so; afterwards, the
                    // same decision is replayed (200) and any other one is `already_decided`.
                    match problem["code"].as_str() {
                        Some("resume_in_progress") => {}
                        Some("already_decided") => {
                            assert_ne!(
                                decider, winning_decider,
                                "turn {turn}: the winning decision was refused"
                            )
                        }
                        other => panic!("turn {turn}: 409 {other:?}"),
                    }
                }
                other => panic!(
                    "turn {turn}: answered {other}: {}",
                    String::from_utf8_lossy(bytes)
                ),
            }
        }
        let mut connection = sqlx::PgConnection::connect(&database.url).await.unwrap();
        let (events, tool_events, results): (i64, i64, i64) = sqlx::query_as(
            "select (select count(*) from approval_events where run_id = $1),
                    (select count(*) from tool_events where run_id = $1),
                    (select count(*) from turn_calls where run_id = $1 and outcome is not null)",
        )
        .bind(run_id)
        .fetch_one(&mut connection)
        .await
        .unwrap();
        assert_eq!(
            (events, tool_events, results),
            (1, 2, 2),
            "turn {turn}: not exactly one set of events"
        );
        connection.close().await.unwrap();
    }
    for instance in &mut instances {
        instance.terminate(std::time::Duration::from_secs(10)).await;
    }
}
