//! A `kill -9` of the service binary in the middle of an approved turn, then recovery by a restarted instance:
//! the call that was running is reported `interrupted` and never sent again, the calls not yet started run once,
//! and the model input says exactly that.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;
use uuid::Uuid;

use support::{Service, TestDatabase, add_client, call};

/// What the executor saw: the tool and the idempotency key of every request, in arrival order.
#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<(String, String)>>,
    /// Signalled when the call that never answers has arrived.
    hanging_arrived: Notify,
}

/// An executor for three tools: `first` and `third` answer at once, `second` never answers.
async fn executor(
    State(seen): State<Arc<Seen>>,
    headers: HeaderMap,
    body: String,
) -> axum::Json<Value> {
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    let tool = body["tool"].as_str().unwrap_or_default().to_owned();
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    seen.calls.lock().unwrap().push((tool.clone(), key));
    if tool == "second" {
        seen.hanging_arrived.notify_one();
        std::future::pending::<()>().await;
    }
    axum::Json(json!({"content": format!("{tool} done"), "is_error": false}))
}

async fn start_executor(seen: Arc<Seen>) -> String {
    let app = Router::new().route("/", post(executor)).with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test]
async fn a_turn_cut_short_by_kill_9_is_finished_after_restart_without_any_call_sent_twice() {
    let seen = Arc::new(Seen::default());
    let executor_url = start_executor(Arc::clone(&seen)).await;
    let config_dir = tempfile::tempdir().unwrap();
    let tools = config_dir.path().join("tools.toml");
    let mut config = String::new();
    for tool in ["first", "second", "third"] {
        config.push_str(&format!(
            "[tools.{tool}]\nurl = \"{executor_url}\"\neffect = \"write\"\ntimeout_ms = 2000\n"
        ));
    }
    std::fs::write(&tools, config).unwrap();
    let tools = tools.to_str().unwrap().to_owned();
    // A short lease, so the restarted instance may take the turn over a few seconds after the crash.
    let settings = [
        ("TOOLS_CONFIG", tools.as_str()),
        ("RESUME_LEASE_MARGIN_MS", "500"),
        ("RECOVERY_INTERVAL_SECS", "1"),
    ];

    let database = TestDatabase::new();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let mut first_instance = Service::start_with(&database, &settings).await;
    let client = reqwest::Client::new();
    let (status, _) = call(
        &client,
        reqwest::Method::PUT,
        first_instance.url("/v1/users/7"),
        &key,
        Some(json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false})),
    )
    .await;
    assert_eq!(status, 200);
    let run_id = Uuid::new_v4();
    let calls: Vec<Value> = ["first", "second", "third"]
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            json!({"id": format!("call_{i}"), "type": "function", "function": {"name": tool, "arguments": "{}"}})
        })
        .collect();
    let (status, run) = call(
        &client,
        reqwest::Method::POST,
        first_instance.url("/v1/runs"),
        &key,
        Some(json!({
            "id": run_id,
            "owner_uid": 7,
            "messages": [
                {"role": "user", "content": "Do three things."},
                {"role": "assistant", "content": null, "tool_calls": calls},
            ],
        })),
    )
    .await;
    assert_eq!(status, 201, "{run}");
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();

    // Approve; the answer never comes, because the service dies while `second` runs.
    let decision_url = first_instance.url(&format!("/v1/runs/{run_id}/decision"));
    let decision = json!({"approved": true, "decider_uid": 7, "turn_digest": digest});
    let pending = tokio::spawn({
        let (client, key, decision) = (client.clone(), key.clone(), decision.clone());
        async move {
            client
                .post(decision_url)
                .bearer_auth(key)
                .json(&decision)
                .send()
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(20), seen.hanging_arrived.notified())
        .await
        .expect("the executor was called for `second`");
    first_instance.kill();
    assert!(
        pending.await.unwrap().is_err(),
        "the killed service cannot have answered"
    );

    let mut second_instance = Service::start_with(&database, &settings).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        let (_, run) = call(
            &client,
            reqwest::Method::GET,
            second_instance.url(&format!("/v1/runs/{run_id}")),
            &key,
            None,
        )
        .await;
        if run["status"] == "resumed" {
            break run;
        }
        assert!(
            Instant::now() < deadline,
            "the turn was not recovered: {run}\n{}",
            second_instance.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(run["decision"]["approved"], true);

    let sent: Vec<(String, String)> = seen.calls.lock().unwrap().clone();
    let expected: Vec<(String, String)> = [("first", 0), ("second", 1), ("third", 2)]
        .iter()
        .map(|(tool, i)| (tool.to_string(), format!("{run_id}:call_{i}")))
        .collect();
    assert_eq!(
        sent, expected,
        "each call was sent once, in order, with its idempotency key"
    );

    let (status, replay) = call(
        &client,
        reqwest::Method::POST,
        second_instance.url(&format!("/v1/runs/{run_id}/decision")),
        &key,
        Some(decision),
    )
    .await;
    assert_eq!(status, 200, "{replay}");
    let results: Vec<(String, String)> = replay["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap().to_owned(),
                r["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        results,
        vec![
            ("ok".to_owned(), "first done".to_owned()),
            (
                "interrupted".to_owned(),
                "Error: tool \"second\" was interrupted; whether it took effect is unknown."
                    .to_owned()
            ),
            ("ok".to_owned(), "third done".to_owned()),
        ]
    );
    let tool_messages: Vec<&Value> = replay["model_input"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 3);
    assert_eq!(tool_messages[1]["content"], results[1].1);
    second_instance.terminate(Duration::from_secs(10)).await;
}
