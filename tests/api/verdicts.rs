//! Per-call verdicts and edited arguments (docs/design.md §3 "The edit note", §4, §5): mixed decisions run the approved
//! calls in turn order and never send a denied one; an edited call's executor gets the edited arguments and the
//! model is told; replays, conflicts, refusals and the four-eyes rule hold for the per-call form as for the whole.

use approval_resume::domain::results;
use approval_resume::vocabulary::DecidedBy;
use axum::http::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::executors::{FakeExecutor, app_with_tools, run_calling};
use crate::support::{Answer, TestApp, assert_nothing_recorded, assert_problem};

const OWNER: i64 = 7;

async fn decide_calls(
    app: &TestApp,
    run_id: Uuid,
    decider: Option<i64>,
    digest: &str,
    calls: Value,
) -> Answer {
    app.post(
        &format!("/v1/runs/{run_id}/decision"),
        json!({"decider_uid": decider, "turn_digest": digest, "calls": calls}),
    )
    .await
}

/// Three tools on the fake executor, each answering `{tool} done`; a run of owner 7 calling them in order, with
/// arguments `{"n": 0}`, `{"n": 1}`, `{"n": 2}` under ids `call_0`..`call_2`.
async fn three_calls(pool: sqlx::PgPool, fake: &FakeExecutor) -> (TestApp, Uuid, String) {
    let app = app_with_tools(
        pool,
        fake,
        &[("first", "ok"), ("second", "ok"), ("third", "ok")],
    )
    .await;
    let (id, digest) = run_calling(&app, &["first", "second", "third"]).await;
    (app, id, digest)
}

const EDITED: &str = r#"{"n": 41, "title": "Q3 plan"}"#;

fn mixed() -> Value {
    // Out of the turn's order on purpose: results come in the turn's order whatever the order here.
    json!([
        {"call_id": "call_2", "approved": false, "reason": "variant"},
        {"call_id": "call_0", "approved": true},
        {"call_id": "call_1", "approved": true, "arguments": EDITED},
    ])
}

#[tokio::test]
async fn a_mixed_decision_runs_the_approved_calls_in_order_and_never_sends_the_denied_one() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;

    let answer = decide_calls(&app, id, Some(OWNER), &digest, mixed()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = &answer.body;
    assert_eq!(body["status"], "resumed");
    assert_eq!(body["decision"]["approved"], Value::Null, "mixed");
    assert_eq!(
        body["decision"]["calls"],
        json!([
            {"call_id": "call_0", "approved": true, "reason": null, "edited": false},
            {"call_id": "call_1", "approved": true, "reason": null, "edited": true},
            {"call_id": "call_2", "approved": false, "reason": "variant", "edited": false},
        ])
    );
    let note = results::edit_note(DecidedBy::RunOwner, EDITED);
    // The fake's tools are configured as writes, so the reason is rendered.
    let denied = results::denial_text(
        "third",
        approval_resume::vocabulary::Effect::Write,
        DecidedBy::RunOwner,
        Some(approval_resume::vocabulary::DenialReason::Variant),
    );
    assert_eq!(
        body["results"],
        json!([
            {"call_id": "call_0", "tool": "first", "outcome": "ok", "is_error": false, "content": "first done", "edited": false},
            {"call_id": "call_1", "tool": "second", "outcome": "ok", "is_error": false,
             "content": format!("{note}\n\nsecond done"), "edited": true},
            {"call_id": "call_2", "tool": "third", "outcome": "denied", "is_error": true, "content": denied, "edited": false},
        ])
    );
    // The model input carries the three results in the turn's order; the assistant turn is as the model wrote it.
    let messages = body["model_input"]["messages"].as_array().unwrap();
    let tools: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0], ("call_0", "first done"));
    assert!(
        tools[1]
            .1
            .starts_with("Note: approval_edited (decided_by: run_owner).")
    );
    assert!(
        tools[2]
            .1
            .starts_with("Error: approval_denied (decided_by: run_owner, reason: variant).")
    );
    let assistant = messages.iter().rfind(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["tool_calls"][1]["function"]["arguments"],
        r#"{"n": 1}"#
    );

    // Only the approved calls reached the executor, in order; the edited one with the edited arguments.
    let received = fake.received();
    let sent: Vec<(&str, &Value, &str)> = received
        .iter()
        .map(|r| {
            (
                r.body["call_id"].as_str().unwrap(),
                &r.body["arguments"],
                r.idempotency_key.as_str(),
            )
        })
        .collect();
    let key = |call: &str| format!("{id}:{call}");
    assert_eq!(
        sent,
        [
            ("call_0", &json!({"n": 0}), key("call_0").as_str()),
            (
                "call_1",
                &json!({"n": 41, "title": "Q3 plan"}),
                key("call_1").as_str()
            ),
        ]
    );

    // The audit records each verdict and a digest of the edit, never the edited arguments.
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    let audit = &events["approval_events"][0];
    assert_eq!(audit["approved"], Value::Null);
    assert_eq!(
        audit["calls"][1]["arguments_sha256"],
        hex::encode(Sha256::digest(EDITED.as_bytes()))
    );
    assert!(!audit.to_string().contains("Q3 plan"), "{audit}");
    // The tool event (privacy `full` here) holds what ran: the edited arguments.
    assert_eq!(events["tool_events"][1]["arguments"], EDITED);
    assert_eq!(events["tool_events"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn edited_arguments_equal_as_json_to_the_proposed_ones_are_no_edit() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let calls = json!([
        {"call_id": "call_0", "approved": true, "arguments": "{ \"n\" : 0 }"},
        {"call_id": "call_1", "approved": true},
        {"call_id": "call_2", "approved": true},
    ]);
    let answer = decide_calls(&app, id, Some(OWNER), &digest, calls).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["decision"]["approved"], true);
    assert_eq!(answer.body["results"][0]["content"], "first done");
    assert_eq!(answer.body["results"][0]["edited"], false);
    assert_eq!(answer.body["decision"]["calls"][0]["edited"], false);
    assert_eq!(fake.received()[0].body["arguments"], json!({"n": 0}));
}

#[tokio::test]
async fn a_per_call_decision_that_denies_every_call_takes_the_deny_path() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let calls = json!([
        {"call_id": "call_0", "approved": false},
        {"call_id": "call_1", "approved": false, "reason": "skip"},
        {"call_id": "call_2", "approved": false},
    ]);
    let answer = decide_calls(&app, id, Some(OWNER), &digest, calls).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["decision"]["approved"], false);
    let outcomes: Vec<&str> = answer.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["denied", "denied", "denied"]);
    assert!(
        answer.body["results"][1]["content"]
            .as_str()
            .unwrap()
            .contains("reason: skip")
    );
    assert!(
        fake.received().is_empty(),
        "a denied call reached an executor"
    );
}

#[tokio::test]
async fn the_same_per_call_decision_again_is_answered_with_the_same_bytes_and_another_is_a_conflict()
 {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let first = decide_calls(&app, id, Some(OWNER), &digest, mixed()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);

    // Reordered, and the edited arguments spelled differently but equal as JSON: the same decision.
    let again = json!([
        {"call_id": "call_1", "approved": true, "arguments": r#"{"title":"Q3 plan","n":41}"#},
        {"call_id": "call_0", "approved": true},
        {"call_id": "call_2", "approved": false, "reason": "variant"},
    ]);
    let replay = decide_calls(&app, id, Some(OWNER), &digest, again).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.body);
    assert_eq!(replay.bytes, first.bytes, "a replay is byte-identical");
    assert_eq!(fake.received().len(), 2, "a replay runs nothing again");

    let conflicts = [
        // Another edit.
        json!([
            {"call_id": "call_0", "approved": true},
            {"call_id": "call_1", "approved": true, "arguments": r#"{"n": 42}"#},
            {"call_id": "call_2", "approved": false, "reason": "variant"},
        ]),
        // No edit.
        json!([
            {"call_id": "call_0", "approved": true},
            {"call_id": "call_1", "approved": true},
            {"call_id": "call_2", "approved": false, "reason": "variant"},
        ]),
        // Another reason.
        json!([
            {"call_id": "call_0", "approved": true},
            {"call_id": "call_1", "approved": true, "arguments": EDITED},
            {"call_id": "call_2", "approved": false},
        ]),
    ];
    for calls in conflicts {
        let answer = decide_calls(&app, id, Some(OWNER), &digest, calls).await;
        assert_problem(&answer, StatusCode::CONFLICT, "already_decided");
    }
    let whole = app.decide(id, true, Some(OWNER), &digest).await;
    assert_problem(&whole, StatusCode::CONFLICT, "already_decided");
}

#[tokio::test]
async fn a_whole_turn_denial_and_the_same_verdicts_per_call_are_one_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let whole = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(whole.status, StatusCode::OK, "{}", whole.body);
    let per_call = json!([
        {"call_id": "call_2", "approved": false},
        {"call_id": "call_1", "approved": false},
        {"call_id": "call_0", "approved": false},
    ]);
    let replay = decide_calls(&app, id, Some(OWNER), &digest, per_call).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.body);
    assert_eq!(replay.bytes, whole.bytes);
}

#[tokio::test]
async fn under_four_eyes_an_owner_approving_one_call_is_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("first", "ok"), ("second", "ok")]).await;
    app.user(OWNER, false, false, false).await;
    app.user(9, true, false, false).await;
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id, "owner_uid": OWNER, "require_second_approver": true,
            "messages": crate::support::transcript(vec![
                crate::support::call("call_0", "first", "{}"),
                crate::support::call("call_1", "second", "{}"),
            ]),
        }))
        .await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let one_approved = json!([
        {"call_id": "call_0", "approved": false},
        {"call_id": "call_1", "approved": true},
    ]);
    let answer = decide_calls(&app, id, Some(OWNER), &digest, one_approved.clone()).await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "second_approver_required");
    assert_nothing_recorded(&app.pool, id).await;
    // A user who may not decide others' runs is refused the same way for a per-call decision.
    app.user(8, false, false, false).await;
    let answer = decide_calls(&app, id, Some(8), &digest, one_approved.clone()).await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "decider_not_permitted");
    assert_nothing_recorded(&app.pool, id).await;
    assert!(fake.received().is_empty());
    // An admin may give the same verdicts.
    let answer = decide_calls(&app, id, Some(9), &digest, one_approved).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["decision"]["decided_by"], "other_user");
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn under_four_eyes_the_owner_may_deny_every_call_per_call() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("first", "ok")]).await;
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id, "owner_uid": OWNER, "require_second_approver": true,
            "messages": crate::support::transcript(vec![crate::support::call("call_0", "first", "{}")]),
        }))
        .await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let calls = json!([{"call_id": "call_0", "approved": false}]);
    let answer = decide_calls(&app, id, Some(OWNER), &digest, calls).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test]
async fn verdicts_that_do_not_fit_the_turn_are_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let cases = [
        (
            json!([{"call_id": "call_0", "approved": true}]),
            "missing_call",
        ),
        (
            json!([
                {"call_id": "call_0", "approved": true},
                {"call_id": "call_1", "approved": true},
                {"call_id": "call_2", "approved": true},
                {"call_id": "call_9", "approved": true},
            ]),
            "unknown_call",
        ),
        (
            json!([
                {"call_id": "call_0", "approved": true},
                {"call_id": "call_0", "approved": true},
            ]),
            "repeated_call",
        ),
        (
            json!([{"call_id": "call_0", "approved": false, "arguments": "{}"}]),
            "arguments_require_approval",
        ),
        (
            json!([{"call_id": "call_0", "approved": true, "reason": "skip"}]),
            "reason_requires_denial",
        ),
        (
            json!([{"call_id": "call_0", "approved": true, "arguments": "\"text\""}]),
            "arguments_not_object",
        ),
    ];
    for (calls, code) in cases {
        let answer = decide_calls(&app, id, Some(OWNER), &digest, calls).await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, code);
    }
    let both = json!({"approved": true, "decider_uid": OWNER, "turn_digest": digest, "calls": []});
    let answer = app.post(&format!("/v1/runs/{id}/decision"), both).await;
    assert_problem(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "approved_and_calls",
    );
    let object = json!([{"call_id": "call_0", "approved": true, "arguments": {"n": 1}}]);
    let answer = decide_calls(&app, id, Some(OWNER), &digest, object).await;
    assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
    assert_nothing_recorded(&app.pool, id).await;
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn a_null_calls_or_approved_is_refused_as_the_spec_types_them_not_read_as_absent() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let (app, id, digest) = three_calls(pool, &fake).await;
    let every_call = json!([
        {"call_id": "call_0", "approved": false},
        {"call_id": "call_1", "approved": false},
        {"call_id": "call_2", "approved": false},
    ]);
    let path = format!("/v1/runs/{id}/decision");
    let bodies = [
        // Read as absent, this was a whole-turn denial (schemathesis ST201).
        json!({"approved": false, "calls": null, "decider_uid": OWNER, "turn_digest": digest}),
        // And this a per-call one.
        json!({"approved": null, "calls": every_call, "decider_uid": OWNER, "turn_digest": digest}),
        json!({"approved": null, "calls": null, "decider_uid": OWNER, "turn_digest": digest}),
    ];
    for body in bodies {
        let answer = app.post(&path, body.clone()).await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_body");
        assert!(
            answer.body["detail"].as_str().unwrap().contains("null"),
            "{body}: {}",
            answer.body
        );
    }
    assert_nothing_recorded(&app.pool, id).await;
    // Left out, either member is still the other form.
    let denial = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest});
    assert_eq!(app.post(&path, denial).await.status, StatusCode::OK);
}
