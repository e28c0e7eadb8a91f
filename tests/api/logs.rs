//! Logs never carry arguments, results or transcripts: canaries planted in all three, with logging at debug for
//! every crate, must not appear in what was logged, written as the service writes it (`telemetry::json_subscriber`).

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::json;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::executors::{FakeExecutor, app_with_tools};
use crate::support::{call, transcript};

/// Everything logged during the test, in one buffer.
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn no_argument_result_or_transcript_reaches_the_logs_even_at_debug() {
    let (_database, pool) = TestDatabase::create().await;
    let captured = Captured::default();
    let subscriber =
        approval_resume::telemetry::json_subscriber(EnvFilter::new("debug"), captured.clone());
    // Decisions run on spawned tasks, possibly on other threads: only a global subscriber sees them all.
    tracing::subscriber::set_global_default(subscriber)
        .expect("no other subscriber in this test process");

    let canary = |what: &str| format!("canary-{what}-{}", Uuid::new_v4().simple());
    let (in_prompt, in_arguments, in_next_turn) =
        (canary("prompt"), canary("arguments"), canary("next-turn"));
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("echo_tool", "ok")]).await;
    app.user(7, false, false, false).await;

    let mut messages = transcript(vec![call(
        "call_1",
        "echo_tool",
        &json!({"secret": in_arguments}).to_string(),
    )]);
    messages[1]["content"] = json!(in_prompt);
    let approved_run = Uuid::new_v4();
    let run = app.register(json!({"id": approved_run, "owner_uid": 7, "messages": messages, "privacy_level": "full"})).await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let answer = app.decide(approved_run, true, Some(7), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    // A canary in what the loop appends for the next turn, too.
    let appended = json!({"messages": [
        {"role": "user", "content": in_next_turn},
        {"role": "assistant", "content": null, "tool_calls": [call("call_2", "echo_tool", &json!({"again": in_arguments}).to_string())]},
    ]});
    let turn = app
        .post(&format!("/v1/runs/{approved_run}/turns"), appended)
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    let digest = turn.body["turn"]["digest"].as_str().unwrap().to_owned();
    assert_eq!(
        app.decide(approved_run, false, Some(7), &digest)
            .await
            .status,
        StatusCode::OK
    );
    for format in ["openai-chat", "anthropic", "openai-responses"] {
        let input = app
            .get(&format!(
                "/v1/runs/{approved_run}/model-input?format={format}"
            ))
            .await;
        assert!(
            String::from_utf8_lossy(&input.bytes).contains(&in_prompt),
            "the canary is really in the payload"
        );
    }
    app.get(&format!("/v1/runs/{approved_run}/events")).await;
    // A refusal quotes nothing of the body either.
    let bad = app
        .post(
            "/v1/runs",
            json!({"id": Uuid::new_v4(), "owner_uid": 7, "messages": [{"role": in_prompt}]}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("request served"),
        "the capture works: {logged:.2000}"
    );
    assert!(
        logged.contains("executor answered"),
        "the approve path logged: {logged:.2000}"
    );
    assert!(
        logged
            .lines()
            .all(|line| serde_json::from_str::<serde_json::Value>(line).is_ok()),
        "JSON lines only: {logged:.2000}"
    );
    for planted in [&in_prompt, &in_arguments, &in_next_turn] {
        assert!(
            !logged.contains(planted.as_str()),
            "{planted} reached the logs"
        );
    }
}

#[tokio::test]
async fn a_clients_request_id_is_kept_only_in_a_short_safe_form_and_any_other_is_replaced() {
    let (_database, pool) = TestDatabase::create().await;
    let captured = Captured::default();
    let subscriber =
        approval_resume::telemetry::json_subscriber(EnvFilter::new("info"), captured.clone());
    // The test's runtime has one thread, so every task of the request logs through this thread's default.
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = crate::support::app(pool).await;
    // A 404 problem: its body carries the request id as well as its header.
    let missing = format!("/v1/runs/{}", Uuid::new_v4());
    let ask = |ids: &[&str]| {
        let mut request = axum::http::Request::get(missing.as_str())
            .header("authorization", format!("Bearer {}", app.admin_key));
        for id in ids {
            request = request.header("x-request-id", *id);
        }
        app.send(request.body(axum::body::Body::empty()).unwrap())
    };
    let echoed = |answer: &crate::support::Answer| {
        let header = answer.headers["x-request-id"].to_str().unwrap().to_owned();
        assert_eq!(answer.body["request_id"], header.as_str());
        header
    };

    let kept = "client-7_trace:00f0.1";
    let answer = ask(&[kept]).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(echoed(&answer), kept);
    let longest = "x".repeat(64);
    assert_eq!(echoed(&ask(&[&longest]).await), longest);

    let too_long = format!("L{}", "x".repeat(64));
    let forged = r#"x","level":"ERROR","message":"forged"#;
    let spaced = "an id with spaces";
    for refused in [
        vec![too_long.as_str()],
        vec![forged],
        vec![spaced],
        vec!["twice", "twice"],
    ] {
        let replaced = echoed(&ask(&refused).await);
        assert!(
            Uuid::parse_str(&replaced).is_ok(),
            "{refused:?} was answered with {replaced:?}, not a new id"
        );
    }

    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains(kept), "the capture works: {logged:.2000}");
    for refused in [too_long.as_str(), "forged", spaced, "twice"] {
        assert!(!logged.contains(refused), "{refused:?} was logged");
    }
}
