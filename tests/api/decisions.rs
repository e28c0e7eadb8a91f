//! `POST /v1/runs/{id}/decision` and what it leaves behind: the texts the model reads (§3), who may decide (§4),
//! the conflicts of §5, the privacy levels of stored tool events (§6), and the resumed model input (§7).
//!
//! Every expected denial text is written out here in full, copied from docs/design.md §3, never built with the crate's
//! own functions: a drift in the wording must fail these tests.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, Answer, Options, Recorded, TestApp, assert_nothing_recorded, assert_problem, owned_run,
    recorded, run_body,
};
use approval_resume::vocabulary::PrivacyLevel;

const OWNER_WRITE: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const OWNER_READ: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"read_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const OTHER_WRITE: &str = "Error: approval_denied (decided_by: other_user). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval; do not describe it as a system error.";
const OTHER_READ: &str = "Error: approval_denied (decided_by: other_user). The approval for tool \"read_page\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval; do not describe it as a system error.";
const UNKNOWN_WRITE: &str = "Error: approval_denied (decided_by: unknown). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined the approval; do not describe it as a system error.";
const UNKNOWN_READ: &str = "Error: approval_denied (decided_by: unknown). The approval for tool \"read_page\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined the approval; do not describe it as a system error.";

const OWNER_VARIANT_WRITE: &str = "Error: approval_denied (decided_by: run_owner, reason: variant). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined this version themselves, not the system or an operator, and propose a different version of this change.";
const OWNER_SKIP_WRITE: &str = "Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and do not propose this change again.";
const OTHER_VARIANT_WRITE: &str = "Error: approval_denied (decided_by: other_user, reason: variant). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined this version, and propose a different version of this change.";
const OTHER_SKIP_WRITE: &str = "Error: approval_denied (decided_by: other_user, reason: skip). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval, and do not propose this change again.";
const UNKNOWN_VARIANT_WRITE: &str = "Error: approval_denied (decided_by: unknown, reason: variant). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined this version, and propose a different version of this change.";
const UNKNOWN_SKIP_WRITE: &str = "Error: approval_denied (decided_by: unknown, reason: skip). The approval for tool \"update_page_metadata\" was declined by the human reviewer. Nothing was executed. Tell the user that a human reviewer declined the approval, and do not propose this change again.";

/// The owner of `owned_run`; 8 is an approver, 9 an admin, 10 a plain user.
const OWNER: i64 = 7;
const APPROVER: i64 = 8;
const ADMIN: i64 = 9;
const PLAIN: i64 = 10;

async fn people(app: &TestApp) {
    app.user(APPROVER, false, true, false).await;
    app.user(ADMIN, true, false, false).await;
    app.user(PLAIN, false, false, false).await;
}

fn path(run_id: Uuid) -> String {
    format!("/v1/runs/{run_id}/decision")
}

/// Posts a decision body as the admin client (every scope).
async fn post_decision(app: &TestApp, run_id: Uuid, body: Value) -> Answer {
    app.post(&path(run_id), body).await
}

/// Posts a decision body with `key`.
async fn post_decision_as(app: &TestApp, key: &str, run_id: Uuid, body: Value) -> Answer {
    app.call(Method::POST, &path(run_id), Some(key), Some(body))
        .await
}

fn registered_messages(run_id: Uuid) -> Vec<Value> {
    run_body(run_id, OWNER)["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// The tool messages of `owned_run`'s two calls with these contents, in the turn's order.
fn tool_messages(write: &str, read: &str) -> Vec<Value> {
    vec![
        json!({"role": "tool", "tool_call_id": "call_1", "content": write}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": read}),
    ]
}

/// The openai-chat model input: the registered transcript, then one tool message per call.
fn chat_input(run_id: Uuid, write: &str, read: &str) -> Value {
    let mut messages = registered_messages(run_id);
    messages.extend(tool_messages(write, read));
    json!({"format": "openai-chat", "messages": messages})
}

fn results(outcome: &str, write: &str, read: &str) -> Value {
    json!([
        {"call_id": "call_1", "tool": "update_page_metadata", "outcome": outcome, "is_error": true, "content": write, "edited": false},
        {"call_id": "call_2", "tool": "read_page", "outcome": outcome, "is_error": true, "content": read, "edited": false},
    ])
}

/// Asserts a whole denial answer: status, decision, both results as docs/design.md §3 writes them, and the model input.
fn assert_denied(
    answer: &Answer,
    run_id: Uuid,
    digest: &str,
    decider_uid: Option<i64>,
    decided_by: &str,
    reason: Option<&str>,
    (write, read): (&str, &str),
) {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let body = &answer.body;
    let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "decision",
            "format",
            "model_input",
            "results",
            "run_id",
            "status"
        ]
    );
    assert_eq!(body["format"], "openai-chat", "the run's own format");
    assert_eq!(body["run_id"], json!(run_id));
    assert_eq!(body["status"], "resumed");
    let decision = &body["decision"];
    assert_eq!(decision["approved"], false);
    assert_eq!(decision["decided_by"], decided_by);
    assert_eq!(decision["decider_uid"], json!(decider_uid));
    assert_eq!(decision["reason"], json!(reason));
    assert_eq!(decision["turn_digest"], digest);
    assert!(decision["decided_at"].is_string(), "{decision}");
    assert_eq!(body["results"], results("denied", write, read));
    assert_eq!(body["model_input"], chat_input(run_id, write, read));
}

async fn status_of(app: &TestApp, run_id: Uuid) -> Value {
    app.get(&format!("/v1/runs/{run_id}")).await.body["status"].clone()
}

// --- Who declined: the three decided_by tokens, end to end ---

#[tokio::test]
async fn a_denial_by_the_owner_tells_the_model_they_declined_it_themselves() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_denied(
        &answer,
        id,
        &digest,
        Some(OWNER),
        "run_owner",
        None,
        (OWNER_WRITE, OWNER_READ),
    );
    assert_eq!(status_of(&app, id).await, "resumed");
}

#[tokio::test]
async fn a_denial_by_an_approver_tells_the_model_another_backend_user_declined() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    let answer = app.decide(id, false, Some(APPROVER), &digest).await;
    assert_denied(
        &answer,
        id,
        &digest,
        Some(APPROVER),
        "other_user",
        None,
        (OTHER_WRITE, OTHER_READ),
    );
    assert_eq!(status_of(&app, id).await, "resumed");
}

#[tokio::test]
async fn a_denial_by_an_admin_tells_the_model_another_backend_user_declined() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    let answer = app.decide(id, false, Some(ADMIN), &digest).await;
    assert_denied(
        &answer,
        id,
        &digest,
        Some(ADMIN),
        "other_user",
        None,
        (OTHER_WRITE, OTHER_READ),
    );
    assert_eq!(status_of(&app, id).await, "resumed");
}

#[tokio::test]
async fn an_anonymous_denial_tells_the_model_a_human_reviewer_declined() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    // The anonymous scope alone is enough to decide with no decider uid.
    let anonymous = app.client("ops", &["decisions:anonymous"]).await;
    let body = json!({"approved": false, "decider_uid": null, "turn_digest": digest});
    let answer = post_decision_as(&app, &anonymous, id, body).await;
    assert_denied(
        &answer,
        id,
        &digest,
        None,
        "unknown",
        None,
        (UNKNOWN_WRITE, UNKNOWN_READ),
    );
    assert_eq!(status_of(&app, id).await, "resumed");
}

#[tokio::test]
async fn nobody_declines_a_service_run_as_its_owner() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    people(&app).await;
    let id = Uuid::new_v4();
    let run = app.register(run_body(id, 0)).await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let answer = app.decide(id, false, Some(APPROVER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["decision"]["decided_by"], "other_user");
    assert_eq!(
        answer.body["results"],
        results("denied", OTHER_WRITE, OTHER_READ)
    );
}

// --- Reasons ---

#[tokio::test]
async fn a_reason_is_rendered_on_the_write_call_only() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    people(&app).await;
    let cases: [(Option<i64>, &str, &str, &str, &str); 6] = [
        (
            Some(OWNER),
            "run_owner",
            "variant",
            OWNER_VARIANT_WRITE,
            OWNER_READ,
        ),
        (
            Some(OWNER),
            "run_owner",
            "skip",
            OWNER_SKIP_WRITE,
            OWNER_READ,
        ),
        (
            Some(APPROVER),
            "other_user",
            "variant",
            OTHER_VARIANT_WRITE,
            OTHER_READ,
        ),
        (
            Some(ADMIN),
            "other_user",
            "skip",
            OTHER_SKIP_WRITE,
            OTHER_READ,
        ),
        (
            None,
            "unknown",
            "variant",
            UNKNOWN_VARIANT_WRITE,
            UNKNOWN_READ,
        ),
        (None, "unknown", "skip", UNKNOWN_SKIP_WRITE, UNKNOWN_READ),
    ];
    for (decider, decided_by, reason, write, read) in cases {
        let id = Uuid::new_v4();
        let digest = app.register(run_body(id, OWNER)).await["turn"]["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        let body = json!({"approved": false, "decider_uid": decider, "turn_digest": digest, "reason": reason});
        let answer = post_decision(&app, id, body).await;
        assert_denied(
            &answer,
            id,
            &digest,
            decider,
            decided_by,
            Some(reason),
            (write, read),
        );
    }
}

#[tokio::test]
async fn an_approval_with_a_reason_is_unprocessable() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    for reason in ["variant", "skip"] {
        let body = json!({"approved": true, "decider_uid": APPROVER, "turn_digest": digest, "reason": reason});
        let answer = post_decision(&app, id, body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            answer.body
        );
        assert_eq!(answer.code(), "reason_requires_denial");
        assert_eq!(answer.content_type(), "application/problem+json");
    }
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn a_reason_outside_variant_and_skip_is_unprocessable() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let body = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "because"});
    let answer = post_decision(&app, id, body).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_nothing_recorded(&app.pool, id).await;
}

// --- Who may decide (§4): every refusal is 403 and records nothing ---

/// Posts a decision expected to be refused with 403 `code`, and asserts nothing was recorded.
async fn assert_refused(app: &TestApp, key: &str, run_id: Uuid, body: Value, code: &str) {
    let answer = post_decision_as(app, key, run_id, body).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    assert_eq!(answer.code(), code, "{}", answer.body);
    assert_eq!(answer.content_type(), "application/problem+json");
    assert_nothing_recorded(&app.pool, run_id).await;
    let run = app.get(&format!("/v1/runs/{run_id}")).await.body;
    assert_eq!(run["status"], "waiting_for_approval");
    assert!(run.get("decision").is_none(), "{run}");
}

#[tokio::test]
async fn an_unknown_decider_is_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    for approved in [false, true] {
        let body = json!({"approved": approved, "decider_uid": 4242, "turn_digest": digest});
        assert_refused(&app, &app.admin_key, id, body, "unknown_decider").await;
    }
    // An approver of another tenant is nobody here.
    let other = support::add_client(&app.pool, "other-admin", "other", support::ALL_SCOPES).await;
    let user = json!({"username": "elsewhere", "is_admin": true, "can_approve_others": true, "disabled": false});
    let put = app
        .call(
            Method::PUT,
            &format!("/v1/users/{APPROVER}"),
            Some(&other),
            Some(user),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
    let body = json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest});
    assert_refused(&app, &app.admin_key, id, body, "unknown_decider").await;
}

#[tokio::test]
async fn a_decision_body_that_does_not_fit_is_unprocessable_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let bodies = [
        // decider_uid is required, null included, so a forgotten decider is never taken for nobody.
        json!({"approved": false, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": 0, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": -7, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "comment": "no"}),
        json!({"approved": "no", "decider_uid": OWNER, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": OWNER}),
    ];
    for body in bodies {
        let answer = post_decision(&app, id, body.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            answer.body
        );
        assert_eq!(answer.content_type(), "application/problem+json");
        assert_nothing_recorded(&app.pool, id).await;
    }
}

#[tokio::test]
async fn a_disabled_decider_is_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    // A disabled admin, a disabled approver, and the owner once disabled: none may decide.
    app.user(ADMIN, true, false, true).await;
    app.user(APPROVER, false, true, true).await;
    for decider in [ADMIN, APPROVER] {
        let body = json!({"approved": false, "decider_uid": decider, "turn_digest": digest});
        assert_refused(&app, &app.admin_key, id, body, "decider_disabled").await;
    }
    app.user(OWNER, false, false, true).await;
    let body = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest});
    assert_refused(&app, &app.admin_key, id, body, "decider_disabled").await;
}

#[tokio::test]
async fn a_plain_other_user_is_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    for approved in [false, true] {
        let body = json!({"approved": approved, "decider_uid": PLAIN, "turn_digest": digest});
        assert_refused(&app, &app.admin_key, id, body, "decider_not_permitted").await;
    }
}

#[tokio::test]
async fn no_decider_without_the_anonymous_scope_is_refused_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let chat = app
        .client("chat", &["decisions:write", "runs:read", "runs:write"])
        .await;
    let body = json!({"approved": false, "decider_uid": null, "turn_digest": digest});
    let answer = post_decision_as(&app, &chat, id, body).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    assert_eq!(answer.content_type(), "application/problem+json");
    assert_nothing_recorded(&app.pool, id).await;
    // The same client may still decide as a named user.
    let answer = post_decision_as(
        &app,
        &chat,
        id,
        json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test]
async fn a_named_decider_needs_the_decide_scope() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let reader = app.client("reader", &["runs:read", "runs:write"]).await;
    let body = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest});
    assert_refused(&app, &reader, id, body, "missing_scope").await;
}

#[tokio::test]
async fn a_run_of_another_tenant_is_answered_like_a_missing_one() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let stranger = support::add_client(&app.pool, "stranger", "other", support::ALL_SCOPES).await;
    let body = json!({"approved": false, "decider_uid": null, "turn_digest": digest});
    let answer = post_decision_as(&app, &stranger, id, body.clone()).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert_nothing_recorded(&app.pool, id).await;
    let missing = post_decision(&app, Uuid::new_v4(), body).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.code(), answer.code());
}

/// A run of the owner that needs a second approver.
async fn four_eyes_run(app: &TestApp) -> (Uuid, String) {
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, OWNER);
    body["require_second_approver"] = json!(true);
    let run = app.register(body).await;
    assert_eq!(run["require_second_approver"], true);
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn under_four_eyes_the_owner_may_not_approve() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = four_eyes_run(&app).await;
    let body = json!({"approved": true, "decider_uid": OWNER, "turn_digest": digest});
    assert_refused(
        &app,
        &app.admin_key,
        id,
        body.clone(),
        "second_approver_required",
    )
    .await;
    // Not even when the owner is an admin and an approver.
    app.user(OWNER, true, true, false).await;
    assert_refused(&app, &app.admin_key, id, body, "second_approver_required").await;
}

#[tokio::test]
async fn under_four_eyes_the_owner_may_still_deny() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = four_eyes_run(&app).await;
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_denied(
        &answer,
        id,
        &digest,
        Some(OWNER),
        "run_owner",
        None,
        (OWNER_WRITE, OWNER_READ),
    );
}

#[tokio::test]
async fn under_four_eyes_an_approver_may_approve() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = four_eyes_run(&app).await;
    people(&app).await;
    let answer = app.decide(id, true, Some(APPROVER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["status"], "resumed");
    assert_eq!(answer.body["decision"]["approved"], true);
    assert_eq!(answer.body["decision"]["decided_by"], "other_user");
    assert_eq!(answer.body["decision"]["decider_uid"], APPROVER);
}

// --- Conflicts (§5) ---

#[tokio::test]
async fn a_stale_digest_is_a_conflict_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let stale = "0".repeat(64);
    assert_ne!(stale, digest);
    for approved in [false, true] {
        let answer = app.decide(id, approved, Some(OWNER), &stale).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
        assert_eq!(answer.code(), "stale_turn");
        let detail = answer.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("(the run is waiting_for_approval)"),
            "{detail}"
        );
        assert_eq!(answer.body["run_status"], "waiting_for_approval");
        assert_nothing_recorded(&app.pool, id).await;
    }
}

#[tokio::test]
async fn a_turn_digest_that_is_no_digest_is_a_malformed_body_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    // `"null"` is what `jq -r .turn.digest` prints after a failed registration.
    for not_a_digest in ["null", "", "abc", &digest.to_uppercase(), &digest[1..]] {
        let answer = app.decide(id, false, Some(OWNER), not_a_digest).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_turn_digest"),
            "{not_a_digest:?}: {}",
            answer.body
        );
        assert_nothing_recorded(&app.pool, id).await;
    }
}

#[tokio::test]
async fn the_same_denial_again_gets_a_byte_identical_answer_and_records_nothing_new() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let body = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "variant"});
    let first = post_decision(&app, id, body.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let after_first = recorded(&app.pool, id).await;
    let run_after_first = app.get(&format!("/v1/runs/{id}")).await.bytes;
    for _ in 0..2 {
        let again = post_decision(&app, id, body.clone()).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.body);
        assert_eq!(
            String::from_utf8_lossy(&again.bytes),
            String::from_utf8_lossy(&first.bytes)
        );
    }
    assert_eq!(recorded(&app.pool, id).await, after_first);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.bytes,
        run_after_first
    );
}

#[tokio::test]
async fn a_replay_is_answered_before_the_decider_is_checked_again() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    people(&app).await;
    let (id, digest) = owned_run(&app).await;
    let body = json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest, "reason": "skip"});
    let first = post_decision(&app, id, body.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let after_first = recorded(&app.pool, id).await;

    // The approver is disabled after deciding: the decision stays recorded, so asking again is answered with it.
    app.user(APPROVER, false, true, true).await;
    let again = post_decision(&app, id, body.clone()).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(
        String::from_utf8_lossy(&again.bytes),
        String::from_utf8_lossy(&first.bytes)
    );
    // Another decision by the disabled approver is still refused by today's rules.
    let different = post_decision(
        &app,
        id,
        json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest, "reason": "variant"}),
    )
    .await;
    assert_problem(&different, StatusCode::FORBIDDEN, "decider_disabled");
    assert_eq!(recorded(&app.pool, id).await, after_first);
}

#[tokio::test]
async fn the_same_approval_again_gets_a_byte_identical_answer_and_records_nothing_new() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let first = app.decide(id, true, Some(OWNER), &digest).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let after_first = recorded(&app.pool, id).await;
    let again = app.decide(id, true, Some(OWNER), &digest).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(
        String::from_utf8_lossy(&again.bytes),
        String::from_utf8_lossy(&first.bytes)
    );
    assert_eq!(recorded(&app.pool, id).await, after_first);
}

#[tokio::test]
async fn a_different_decision_on_a_decided_turn_is_a_conflict() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    let first = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let after_first = recorded(&app.pool, id).await;
    let events = app.get(&format!("/v1/runs/{id}/events")).await.bytes;
    let others = [
        json!({"approved": true, "decider_uid": OWNER, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest}),
        json!({"approved": true, "decider_uid": APPROVER, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": null, "turn_digest": digest}),
        json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "variant"}),
        json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "skip"}),
    ];
    for body in others {
        let answer = post_decision(&app, id, body.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::CONFLICT,
            "{body} {}",
            answer.body
        );
        assert_eq!(answer.code(), "already_decided", "{body}");
    }
    assert_eq!(recorded(&app.pool, id).await, after_first);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}/events")).await.bytes,
        events
    );
}

#[tokio::test]
async fn a_reason_given_first_and_left_out_again_is_a_different_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let with_reason =
        json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "skip"});
    assert_eq!(
        post_decision(&app, id, with_reason).await.status,
        StatusCode::OK
    );
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
    assert_eq!(answer.code(), "already_decided");
}

#[tokio::test]
async fn a_decision_on_a_cancelled_run_is_not_awaiting_approval() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let cancelled = app.post(&format!("/v1/runs/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    assert_eq!(cancelled.body["status"], "cancelled");
    for approved in [false, true] {
        let answer = app.decide(id, approved, Some(OWNER), &digest).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
        assert_eq!(answer.code(), "not_awaiting_approval");
    }
    assert_eq!(
        recorded(&app.pool, id).await,
        Recorded {
            status: "cancelled".into(),
            approval_events: 0,
            tool_events: 0,
            calls_with_outcome: 0,
        }
    );
}

#[tokio::test]
async fn a_denied_calls_tool_event_was_never_started_and_finished_when_its_result_was_stored() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    // The deny's statement writes the times itself rather than reading them back from the calls: they must be
    // what the calls hold.
    type Times = (
        i32,
        Option<chrono::DateTime<chrono::Utc>>,
        Option<chrono::DateTime<chrono::Utc>>,
    );
    let read = |table: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_as::<_, Times>(sqlx::AssertSqlSafe(format!(
                "select position::integer, started_at, finished_at from {table} where run_id = $1 order by position"
            )))
            .bind(id)
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let (events, calls) = (read("tool_events").await, read("turn_calls").await);
    assert_eq!(events.len(), 2, "one tool event per call");
    assert_eq!(events, calls);
    for (position, started_at, finished_at) in events {
        assert_eq!(started_at, None, "call {position} was never sent");
        assert!(finished_at.is_some(), "call {position} has its result");
    }
}

// --- Approval without executors ---

#[tokio::test]
async fn an_approval_without_executors_answers_not_permitted_for_every_call() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let answer = app.decide(id, true, Some(OWNER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let write = "Error: tool \"update_page_metadata\" is no longer permitted and was not executed.";
    let read = "Error: tool \"read_page\" is no longer permitted and was not executed.";
    assert_eq!(answer.body["status"], "resumed");
    assert_eq!(answer.body["decision"]["approved"], true);
    assert_eq!(answer.body["decision"]["decided_by"], "run_owner");
    assert_eq!(answer.body["decision"]["reason"], Value::Null);
    assert_eq!(
        answer.body["results"],
        results("not_permitted", write, read)
    );
    assert_eq!(answer.body["model_input"], chat_input(id, write, read));
    assert_eq!(
        app.get(&format!("/v1/runs/{id}/model-input")).await.body,
        answer.body["model_input"]
    );
    assert_eq!(status_of(&app, id).await, "resumed");
    assert_eq!(
        recorded(&app.pool, id).await,
        Recorded {
            status: "resumed".into(),
            approval_events: 1,
            tool_events: 2,
            calls_with_outcome: 2,
        }
    );
    let outcomes: Vec<(String, bool)> = sqlx::query_as(
        "select outcome, is_error from tool_events where run_id = $1 order by position",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        outcomes,
        [
            ("not_permitted".to_owned(), true),
            ("not_permitted".to_owned(), true)
        ]
    );
}

// --- Privacy levels (§6) ---

/// Registers a run of the owner at `level` with these arguments on its write call, and denies it as the owner.
async fn denied_at(app: &TestApp, level: &str, write_arguments: &str) -> (Uuid, Answer) {
    denied_at_level(app, Some(level), write_arguments).await
}

/// As `denied_at`; `None` registers the run without a `privacy_level` of its own.
async fn denied_at_level(
    app: &TestApp,
    level: Option<&str>,
    write_arguments: &str,
) -> (Uuid, Answer) {
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, OWNER);
    match level {
        Some(level) => body["privacy_level"] = json!(level),
        None => {
            body.as_object_mut().unwrap().remove("privacy_level");
        }
    }
    body["messages"][2]["tool_calls"][0]["function"]["arguments"] = json!(write_arguments);
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    (id, answer)
}

/// The stored tool events: (privacy_level, arguments, result, arguments_bytes, result_bytes), in call order.
type StoredEvent = (String, Option<String>, Option<String>, i32, i32);

async fn stored_tool_events(pool: &PgPool, run_id: Uuid) -> Vec<StoredEvent> {
    sqlx::query_as(
        "select privacy_level, arguments, result, arguments_bytes, result_bytes
         from tool_events where run_id = $1 order by turn_index, position",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Asserts the approval event is stored whole, both in the table and in GET /events.
async fn assert_approval_event_whole(app: &TestApp, run_id: Uuid, digest: &str) {
    let row: (bool, Option<i64>, String, Option<String>, String) = sqlx::query_as(
        "select approved, decider_uid, decided_by, reason, turn_digest from approval_events where run_id = $1",
    )
    .bind(run_id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        row,
        (
            false,
            Some(OWNER),
            "run_owner".into(),
            None,
            digest.to_owned()
        )
    );
    let events = app.get(&format!("/v1/runs/{run_id}/events")).await;
    assert_eq!(events.status, StatusCode::OK, "{}", events.body);
    let event = &events.body["approval_events"][0];
    assert_eq!(event["approved"], false);
    assert_eq!(event["decider_uid"], OWNER);
    assert_eq!(event["decided_by"], "run_owner");
    assert_eq!(event["reason"], Value::Null);
    assert_eq!(event["turn_digest"], digest);
    assert_eq!(event["turn_index"], 0);
}

const WRITE_ARGUMENTS: &str = r#"{"page": 12, "description": "A page"}"#;

#[tokio::test]
async fn with_the_floor_full_and_the_run_at_none_no_tool_event_is_stored() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, answer) = denied_at(&app, "none", WRITE_ARGUMENTS).await;
    let digest = answer.body["decision"]["turn_digest"].as_str().unwrap();
    assert!(stored_tool_events(&app.pool, id).await.is_empty());
    let events = app.get(&format!("/v1/runs/{id}/events")).await;
    assert_eq!(events.body["tool_events"], json!([]));
    assert_approval_event_whole(&app, id, digest).await;
    // The working transcript is not an audit record: the model still gets the whole results.
    assert_eq!(
        answer.body["model_input"],
        chat_input(id, OWNER_WRITE, OWNER_READ)
    );
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["privacy_level"],
        "none"
    );
}

#[tokio::test]
async fn with_the_floor_metadata_and_the_run_full_tool_events_keep_no_payload() {
    let (_database, pool) = TestDatabase::create().await;
    let options = Options {
        privacy_floor: PrivacyLevel::Metadata,
        ..Options::default()
    };
    let app = support::app_with(pool, options).await;
    let (id, answer) = denied_at(&app, "full", WRITE_ARGUMENTS).await;
    let digest = answer.body["decision"]["turn_digest"].as_str().unwrap();
    assert_eq!(
        stored_tool_events(&app.pool, id).await,
        [
            (
                "metadata".to_owned(),
                None,
                None,
                WRITE_ARGUMENTS.len() as i32,
                OWNER_WRITE.len() as i32
            ),
            (
                "metadata".to_owned(),
                None,
                None,
                r#"{"page": 12}"#.len() as i32,
                OWNER_READ.len() as i32
            ),
        ]
    );
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    let tool_events = events["tool_events"].as_array().unwrap();
    assert_eq!(tool_events.len(), 2);
    for (event, (call_id, tool)) in tool_events
        .iter()
        .zip([("call_1", "update_page_metadata"), ("call_2", "read_page")])
    {
        assert_eq!(event["call_id"], call_id);
        assert_eq!(event["tool"], tool);
        assert_eq!(event["outcome"], "denied");
        assert_eq!(event["is_error"], true);
        assert_eq!(event["decided_by"], "run_owner");
        assert_eq!(event["privacy_level"], "metadata");
        assert_eq!(event["arguments"], Value::Null);
        assert_eq!(event["result"], Value::Null);
        assert!(event["arguments_bytes"].as_i64().unwrap() > 0);
        assert!(event["result_bytes"].as_i64().unwrap() > 0);
    }
    assert_approval_event_whole(&app, id, digest).await;
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["privacy_level"],
        "metadata"
    );
}

#[tokio::test]
async fn with_the_run_redacted_stored_arguments_are_redacted() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let key = "sk-abcdefghijklmnopqrstuvwxyz0123456789";
    let arguments =
        format!(r#"{{"page": 12, "description": "Write to ann@example.com", "api_key": "{key}"}}"#);
    let (id, answer) = denied_at(&app, "redacted", &arguments).await;
    let digest = answer.body["decision"]["turn_digest"].as_str().unwrap();
    let stored = stored_tool_events(&app.pool, id).await;
    assert_eq!(stored.len(), 2);
    let (level, kept, result, arguments_bytes, _) = &stored[0];
    assert_eq!(level, "redacted");
    let kept = kept.as_deref().unwrap();
    assert!(!kept.contains("sk-abc") && !kept.contains(key), "{kept}");
    assert!(!kept.contains("ann@example.com"), "{kept}");
    assert!(
        kept.starts_with(r#"{"page": 12, "description": "Write to ***", "api_key": ""#),
        "{kept}"
    );
    assert_eq!(*arguments_bytes as usize, arguments.len());
    // The denial text holds no secret shape, so redaction leaves it whole.
    assert_eq!(result.as_deref(), Some(OWNER_WRITE));
    assert_eq!(stored[1].1.as_deref(), Some(r#"{"page": 12}"#));
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    assert_eq!(events["tool_events"][0]["arguments"], kept);
    assert_eq!(events["tool_events"][0]["privacy_level"], "redacted");
    assert_approval_event_whole(&app, id, digest).await;
    // The working transcript is not filtered: the run and the model input keep the arguments as the model wrote them.
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["turn"]["pending_calls"][0]["arguments"], arguments);
    assert_eq!(
        answer.body["model_input"]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        arguments
    );
}

#[tokio::test]
async fn with_the_floor_and_the_run_full_tool_events_are_verbatim() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let arguments = r#"{"page": 12, "description": "Write to ann@example.com"}"#;
    let (id, answer) = denied_at(&app, "full", arguments).await;
    let digest = answer.body["decision"]["turn_digest"].as_str().unwrap();
    assert_eq!(
        stored_tool_events(&app.pool, id).await,
        [
            (
                "full".to_owned(),
                Some(arguments.to_owned()),
                Some(OWNER_WRITE.to_owned()),
                arguments.len() as i32,
                OWNER_WRITE.len() as i32
            ),
            (
                "full".to_owned(),
                Some(r#"{"page": 12}"#.to_owned()),
                Some(OWNER_READ.to_owned()),
                r#"{"page": 12}"#.len() as i32,
                OWNER_READ.len() as i32
            ),
        ]
    );
    let events = app.get(&format!("/v1/runs/{id}/events")).await.body;
    assert_eq!(events["tool_events"][0]["arguments"], arguments);
    assert_eq!(events["tool_events"][0]["result"], OWNER_WRITE);
    assert_eq!(events["tool_events"][1]["result"], OWNER_READ);
    assert_approval_event_whole(&app, id, digest).await;
}

/// A run that names no level gets the service's level, not `metadata` (docs/design.md §6); one that names a level gets
/// the stricter of the two. Every service level against no run level and each run level.
#[tokio::test]
async fn the_stricter_of_the_service_floor_and_the_run_level_applies_in_every_combination() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    // Strictest first; the stricter of two is the one with the lower index.
    let levels = ["none", "metadata", "redacted", "full"];
    let floors = [
        PrivacyLevel::None,
        PrivacyLevel::Metadata,
        PrivacyLevel::Redacted,
        PrivacyLevel::Full,
    ];
    for (floor_index, floor) in floors.into_iter().enumerate() {
        let served = app.with_privacy_floor(floor);
        let run_levels = std::iter::once(None).chain(levels.into_iter().map(Some));
        for run_level in run_levels {
            let applied = match run_level {
                None => levels[floor_index],
                Some(level) => {
                    let run_index = levels.iter().position(|known| *known == level).unwrap();
                    levels[floor_index.min(run_index)]
                }
            };
            let case = format!("floor {} run {run_level:?}", levels[floor_index]);
            let (id, answer) = denied_at_level(&served, run_level, WRITE_ARGUMENTS).await;
            let digest = answer.body["decision"]["turn_digest"].as_str().unwrap();
            let stored = stored_tool_events(&app.pool, id).await;
            if applied == "none" {
                assert!(stored.is_empty(), "{case}: {stored:?}");
            } else {
                assert_eq!(stored.len(), 2, "{case}");
                let payload = matches!(applied, "redacted" | "full");
                for (level, arguments, result, arguments_bytes, result_bytes) in &stored {
                    assert_eq!(level, applied, "{case}");
                    assert_eq!(arguments.is_some(), payload, "{case}");
                    assert_eq!(result.is_some(), payload, "{case}");
                    assert!(*arguments_bytes > 0 && *result_bytes > 0, "{case}");
                }
            }
            assert_approval_event_whole(&served, id, digest).await;
            let run = served.get(&format!("/v1/runs/{id}")).await.body;
            assert_eq!(run["privacy_level"], applied, "{case}");
        }
    }
}

// --- The resumed model input (§7) ---

#[tokio::test]
async fn the_model_input_is_a_conflict_before_a_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, _) = owned_run(&app).await;
    for query in ["", "?format=anthropic", "?format=openai-responses"] {
        let answer = app.get(&format!("/v1/runs/{id}/model-input{query}")).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{}", answer.body);
        assert_eq!(answer.code(), "not_resumed");
    }
}

#[tokio::test]
async fn after_a_denial_the_model_input_is_the_one_the_decision_answered() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let decided = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    for query in ["", "?format=openai-chat"] {
        let answer = app.get(&format!("/v1/runs/{id}/model-input{query}")).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        assert_eq!(answer.body, decided.body["model_input"]);
        assert_eq!(answer.body, chat_input(id, OWNER_WRITE, OWNER_READ));
    }
}

/// The (call id, content, is_error) of each result in an Anthropic model input: the tool_result blocks of its last
/// message, which must be a user message.
fn anthropic_results(input: &Value) -> Vec<(String, String, Option<bool>)> {
    let last = input["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{input}");
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| {
            (
                block["tool_use_id"].as_str().unwrap().to_owned(),
                block["content"].as_str().unwrap().to_owned(),
                block["is_error"].as_bool(),
            )
        })
        .collect()
}

/// The (call id, output) of each function_call_output item of an OpenAI Responses model input.
fn responses_results(input: &Value) -> Vec<(String, String)> {
    input["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| {
            (
                item["call_id"].as_str().unwrap().to_owned(),
                item["output"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_format_carries_the_same_results_in_the_same_order() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    people(&app).await;
    let body = json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest, "reason": "skip"});
    let decided = post_decision(&app, id, body.clone()).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);

    let anthropic = app
        .get(&format!("/v1/runs/{id}/model-input?format=anthropic"))
        .await;
    assert_eq!(anthropic.status, StatusCode::OK, "{}", anthropic.body);
    let input = &anthropic.body;
    assert_eq!(input["format"], "anthropic");
    assert_eq!(input["system"], "You edit pages.");
    assert_eq!(
        anthropic_results(input),
        [
            ("call_1".into(), OTHER_SKIP_WRITE.into(), Some(true)),
            ("call_2".into(), OTHER_READ.into(), Some(true)),
        ]
    );
    let uses: Vec<&Value> = input["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_use")
        .map(|block| &block["id"])
        .collect();
    assert_eq!(uses, [&json!("call_1"), &json!("call_2")]);
    assert!(
        input["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|message| message["role"] != "system"),
        "{input}"
    );

    let responses = app
        .get(&format!(
            "/v1/runs/{id}/model-input?format=openai-responses"
        ))
        .await;
    assert_eq!(responses.status, StatusCode::OK, "{}", responses.body);
    let input = &responses.body;
    assert_eq!(input["format"], "openai-responses");
    assert_eq!(
        responses_results(input),
        [
            ("call_1".into(), OTHER_SKIP_WRITE.into()),
            ("call_2".into(), OTHER_READ.into()),
        ]
    );
    let calls: Vec<(&Value, &Value)> = input["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call")
        .map(|item| (&item["call_id"], &item["arguments"]))
        .collect();
    assert_eq!(
        calls,
        [
            (
                &json!("call_1"),
                &json!(r#"{"page": 12, "description": "A page"}"#)
            ),
            (&json!("call_2"), &json!(r#"{"page": 12}"#)),
        ]
    );

    // The decision itself answers in the format asked for, with the same results.
    let replayed = app
        .post(
            &format!("/v1/runs/{id}/decision?format=anthropic"),
            body.clone(),
        )
        .await;
    assert_eq!(replayed.status, StatusCode::OK, "{}", replayed.body);
    assert_eq!(replayed.body["model_input"], anthropic.body);
    assert_eq!(replayed.body["results"], decided.body["results"]);
}

#[tokio::test]
async fn an_unknown_format_is_unprocessable() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let decided = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(decided.status, StatusCode::OK);
    let answer = app
        .get(&format!("/v1/runs/{id}/model-input?format=bogus"))
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        answer.body
    );
    assert_eq!(answer.content_type(), "application/problem+json");
}

#[tokio::test]
async fn a_decision_asking_for_an_unknown_format_is_unprocessable_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let answer = app
        .post(
            &format!("/v1/runs/{id}/decision?format=bogus"),
            json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest}),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        answer.body
    );
    assert_nothing_recorded(&app.pool, id).await;
}

// --- The run after the decision ---

#[tokio::test]
async fn the_run_shows_its_decision_once_decided() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    let before = app.get(&format!("/v1/runs/{id}")).await.body;
    assert!(before.get("decision").is_none(), "{before}");
    let body = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "reason": "variant"});
    let decided = post_decision(&app, id, body).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    let run = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(run.status, StatusCode::OK);
    assert_eq!(run.body["status"], "resumed");
    assert_eq!(run.body["decision"], decided.body["decision"]);
    assert_eq!(
        run.body["decision"],
        json!({
            "approved": false,
            "decided_by": "run_owner",
            "decider_uid": OWNER,
            "reason": "variant",
            "turn_digest": digest,
            "decided_at": decided.body["decision"]["decided_at"],
            "calls": [
                {"call_id": "call_1", "approved": false, "reason": "variant", "edited": false},
                {"call_id": "call_2", "approved": false, "reason": "variant", "edited": false},
            ],
        })
    );
    assert_eq!(run.body["turn"]["index"], 0);
    assert_eq!(run.body["turn"]["digest"], digest);
}
