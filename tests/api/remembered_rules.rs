//! Remembered decisions (docs/design.md §18): rules made, listed and revoked on their own, by whom; a turn decided by
//! one author's rules at registration and at `POST /turns`, in that transaction, once; turns covered in part or by
//! several people waiting; §4 checked again at use. The races over several instances are `remembered_races`.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Signer, TestApp, assert_problem, call, transcript};

pub const OWNER: i64 = 7;
const APPROVER: i64 = 8;
const STRANGER: i64 = 9;
const ADMIN: i64 = 10;

/// The §3 text of a write call `edit_page` denied by the owner with the reason `skip`.
const OWNER_SKIP: &str = "Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool \"edit_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and do not propose this change again.";

/// An app with the owner, an approver (`can_approve_others`), a plain user and an admin.
pub async fn people(pool: PgPool) -> TestApp {
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    app.user(APPROVER, false, true, false).await;
    app.user(STRANGER, false, false, false).await;
    app.user(ADMIN, true, false, false).await;
    app
}

/// A registration of the owner's run whose turn calls `tools` (one call each, `call_{n}`), all write tools the
/// worker runs, so that an approval releases them and no executor is needed.
pub fn body_with(id: Uuid, tools: &[&str], require_second_approver: bool) -> Value {
    let calls = tools
        .iter()
        .enumerate()
        .map(|(n, tool)| call(&format!("call_{n}"), tool, r#"{"page": 12}"#))
        .collect();
    let declared: Vec<Value> = ["edit_page", "send_mail"]
        .iter()
        .map(|tool| json!({"name": tool, "effect": "write", "executor": "worker"}))
        .collect();
    json!({
        "id": id,
        "owner_uid": OWNER,
        "messages": transcript(calls),
        "tools": declared,
        "require_second_approver": require_second_approver,
    })
}

/// The next turn of a run decided at turn 0 (as `POST /turns` takes it), calling `tools` with ids `next_{n}`.
pub fn next_turn(tools: &[&str]) -> Value {
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(n, tool)| call(&format!("next_{n}"), tool, r#"{"page": 13}"#))
        .collect();
    json!({"messages": [
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": null, "tool_calls": calls},
    ]})
}

/// Registers a run calling `edit_page` and denies its turn 0 as the owner: the run is resumed, ready for a turn.
pub async fn resumed_run(app: &TestApp) -> Uuid {
    let id = Uuid::new_v4();
    let run = app.register(body_with(id, &["edit_page"], false)).await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let denied = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(denied.body["status"], "resumed", "{:?}", denied.body);
    id
}

pub async fn run_rule(app: &TestApp, run_id: Uuid, body: Value) -> support::Answer {
    app.post(&format!("/v1/runs/{run_id}/rules"), body).await
}

pub async fn revoke(app: &TestApp, rule_id: &Value, key: &str, query: &str) -> support::Answer {
    let path = format!("/v1/rules/{}{query}", rule_id.as_str().unwrap());
    app.call(Method::DELETE, &path, Some(key), None).await
}

async fn append(app: &TestApp, id: Uuid, tools: &[&str]) -> support::Answer {
    app.post(&format!("/v1/runs/{id}/turns"), next_turn(tools))
        .await
}

/// The types of a run's events, in order.
pub async fn event_types(pool: &PgPool, run_id: Uuid) -> Vec<String> {
    sqlx::query_scalar("select type::text from events where run_id = $1 order by xid, id")
        .bind(run_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

fn in_days(days: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::days(days)).to_rfc3339()
}

#[tokio::test]
async fn a_never_rule_of_the_owner_denies_the_next_turn_at_once_with_the_owners_text_and_names_the_rule()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let made = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "reason": "skip"}),
    )
    .await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    assert_eq!(made.body["scope"], "run");
    assert_eq!(made.body["live"], true);

    let answer = append(&app, id, &["edit_page"]).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let run = &answer.body;
    assert_eq!(run["status"], "resumed", "{run}");
    assert_eq!(run["decision"]["decided_by"], "run_owner");
    assert_eq!(run["decision"]["decider_uid"], OWNER);
    assert_eq!(run["decision"]["approved"], false);
    let model_input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    let messages = model_input.body["messages"].as_array().unwrap().clone();
    assert_eq!(messages.last().unwrap()["content"], OWNER_SKIP);
    // The answer holds the turn's results, as the run's view shows them from then on.
    assert_eq!(
        run["results"],
        json!([{"call_id": "next_0", "tool": "edit_page", "outcome": "denied", "is_error": true,
                "content": OWNER_SKIP, "edited": false}]),
        "{run}"
    );
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["results"],
        run["results"]
    );
    // The approval event names the rule of the call; no `run.waiting` for the turn the rule decided.
    let calls: Value = sqlx::query_scalar(
        "select calls from approval_events where run_id = $1 and turn_index = 1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(calls[0]["rule_id"], made.body["id"]);
    assert_eq!(
        event_types(&app.pool, id).await,
        ["run.waiting", "run.resumed", "rule.created", "run.resumed"]
    );
}

#[tokio::test]
async fn an_owner_rule_approving_a_worker_tool_releases_the_registered_turn_and_answers_the_run_decided()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let made = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "edit_page", "verdict": "approve",
                   "expires_at": in_days(1)}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    assert_eq!(made.body["scope"], "owner");

    let id = Uuid::new_v4();
    let answer = app
        .post("/v1/runs", body_with(id, &["edit_page"], false))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.body["status"], "released", "{:?}", answer.body);
    assert_eq!(answer.body["decision"]["decided_by"], "run_owner");
    assert_eq!(answer.body["released_calls"][0]["call_id"], "call_0");
    // Its only call waits for the worker's result: the turn has no result yet.
    assert!(answer.body.get("results").is_none(), "{:?}", answer.body);
    assert_eq!(app.get(&format!("/v1/runs/{id}")).await.body, answer.body);
    assert_eq!(event_types(&app.pool, id).await, ["run.released"]);
}

#[tokio::test]
async fn a_turn_covered_in_part_or_by_two_people_waits_and_shows_the_run_as_registered() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let owner = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    assert_eq!(owner.status, StatusCode::CREATED, "{:?}", owner.body);

    let partly = append(&app, id, &["edit_page", "send_mail"]).await;
    assert_eq!(
        partly.body["status"], "waiting_for_approval",
        "{:?}",
        partly.body
    );
    assert!(partly.body.get("decision").is_none());
    assert!(partly.body.get("results").is_none());

    // The approver covers the other call: every call covered, but by two people.
    let digest = partly.body["turn"]["digest"].as_str().unwrap().to_owned();
    let denied = app.decide(id, false, Some(OWNER), &digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);
    let approver = run_rule(
        &app,
        id,
        json!({"created_by": APPROVER, "tool": "send_mail", "verdict": "deny"}),
    )
    .await;
    assert_eq!(approver.status, StatusCode::CREATED, "{:?}", approver.body);
    let two = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            json!({"messages": [
                {"role": "user", "content": "once more"},
                {"role": "assistant", "content": null, "tool_calls": [
                    call("last_0", "edit_page", "{}"), call("last_1", "send_mail", "{}"),
                ]},
            ]}),
        )
        .await;
    assert_eq!(two.status, StatusCode::OK, "{:?}", two.body);
    assert_eq!(two.body["status"], "waiting_for_approval", "{:?}", two.body);
    assert_eq!(
        event_types(&app.pool, id).await.last().unwrap(),
        "run.waiting"
    );
}

#[tokio::test]
async fn a_revoked_rule_and_a_rule_of_a_user_disabled_since_decide_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let rule = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    let revoked = revoke(&app, &rule.body["id"], &app.admin_key, "?revoked_by=7").await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    assert_eq!(revoked.body["revoked_by"], OWNER);
    assert_eq!(revoked.body["live"], false);
    let waits = append(&app, id, &["edit_page"]).await;
    assert_eq!(
        waits.body["status"], "waiting_for_approval",
        "{:?}",
        waits.body
    );

    let other = resumed_run(&app).await;
    let approver = run_rule(
        &app,
        other,
        json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    assert_eq!(approver.status, StatusCode::CREATED, "{:?}", approver.body);
    app.user(APPROVER, false, true, true).await;
    let waits = append(&app, other, &["edit_page"]).await;
    assert_eq!(
        waits.body["status"], "waiting_for_approval",
        "{:?}",
        waits.body
    );
}

#[tokio::test]
async fn an_approve_rule_of_a_user_who_lost_the_grant_since_decides_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let rule = run_rule(
        &app,
        id,
        json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    app.user(APPROVER, false, false, false).await;
    let waits = append(&app, id, &["edit_page"]).await;
    assert_eq!(
        waits.body["status"], "waiting_for_approval",
        "{:?}",
        waits.body
    );
}

#[tokio::test]
async fn four_eyes_refuses_the_owners_approve_rule_at_creation_and_at_use() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    app.register(body_with(id, &["edit_page"], true)).await;
    let refused = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    assert_problem(&refused, StatusCode::FORBIDDEN, "second_approver_required");
    // The owner may still deny.
    let deny = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    assert_eq!(deny.status, StatusCode::CREATED, "{:?}", deny.body);

    // An owner-scope approve rule is held to four-eyes on each run it would decide.
    app.post(
        "/v1/rules",
        json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "send_mail", "verdict": "approve",
               "expires_at": in_days(1)}),
    )
    .await;
    let four_eyes = app
        .post("/v1/runs", body_with(Uuid::new_v4(), &["send_mail"], true))
        .await;
    assert_eq!(
        four_eyes.body["status"], "waiting_for_approval",
        "{:?}",
        four_eyes.body
    );
    let plain = app
        .post("/v1/runs", body_with(Uuid::new_v4(), &["send_mail"], false))
        .await;
    assert_eq!(plain.body["status"], "released", "{:?}", plain.body);
}

#[tokio::test]
async fn who_may_make_a_rule_is_who_could_make_its_decision() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let rule = |uid: Option<i64>, verdict: &str| json!({"created_by": uid, "tool": "edit_page", "verdict": verdict});
    assert_problem(
        &run_rule(&app, id, rule(Some(STRANGER), "deny")).await,
        StatusCode::FORBIDDEN,
        "decider_not_permitted",
    );
    assert_problem(
        &run_rule(&app, id, rule(Some(99), "deny")).await,
        StatusCode::FORBIDDEN,
        "unknown_decider",
    );
    assert_problem(
        &run_rule(&app, id, rule(None, "deny")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "missing_created_by",
    );
    assert_problem(
        &run_rule(
            &app,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve",
                                    "reason": "skip"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "reason_requires_denial",
    );
    assert_problem(
        &run_rule(
            &app,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny",
                                    "arguments": [1]}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "arguments_not_object",
    );
    // The approver gate: an approve rule of a write outside the author's approvable tools.
    let gated = json!({"username": "user8", "is_admin": false, "can_approve_others": true, "disabled": false,
                       "approvable_tools": ["send_mail"]});
    let put = app
        .call(
            Method::PUT,
            "/v1/users/8",
            Some(&app.admin_key),
            Some(gated),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK);
    assert_problem(
        &run_rule(&app, id, rule(Some(APPROVER), "approve")).await,
        StatusCode::FORBIDDEN,
        "tool_not_approvable",
    );
    // A key without decisions:write makes nothing.
    let reader = app.client("reader", &["runs:read"]).await;
    let refused = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/rules"),
            Some(&reader),
            Some(rule(Some(OWNER), "deny")),
        )
        .await;
    assert_problem(&refused, StatusCode::FORBIDDEN, "missing_scope");
    let none: i64 = sqlx::query_scalar("select count(*) from remembered_rules")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(none, 0);
}

#[tokio::test]
async fn an_owner_scope_rule_is_the_owners_or_an_admins_and_ends_within_the_bound() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let rule = |created_by: i64, expires_at: Value| {
        json!({"owner_uid": OWNER, "created_by": created_by, "tool": "edit_page", "verdict": "deny",
               "expires_at": expires_at})
    };
    assert_problem(
        &app.post("/v1/rules", rule(APPROVER, json!(in_days(1))))
            .await,
        StatusCode::FORBIDDEN,
        "rule_not_permitted",
    );
    assert_problem(
        &app.post("/v1/rules", rule(OWNER, json!(in_days(31)))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "rule_ttl_too_long",
    );
    assert_problem(
        &app.post("/v1/rules", rule(OWNER, json!(in_days(-1)))).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "expires_at_in_past",
    );
    let missing = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
        )
        .await;
    assert_eq!(missing.status, StatusCode::UNPROCESSABLE_ENTITY);
    let service_run = json!({"owner_uid": 0, "created_by": ADMIN, "tool": "edit_page", "verdict": "deny",
                             "expires_at": in_days(1)});
    assert_problem(
        &app.post("/v1/rules", service_run).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_owner",
    );
    let by_admin = app.post("/v1/rules", rule(ADMIN, json!(in_days(30)))).await;
    assert_eq!(by_admin.status, StatusCode::CREATED, "{:?}", by_admin.body);
    let listed = app.get(&format!("/v1/rules?owner_uid={OWNER}")).await;
    assert_eq!(listed.body["rules"].as_array().unwrap().len(), 1);
    assert_eq!(listed.body["rules"][0]["created_by"], ADMIN);
}

#[tokio::test]
async fn a_rule_is_revoked_by_its_author_the_owner_or_an_admin_and_each_change_is_an_event() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let by_approver = json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "deny",
                             "arguments": {"secret": "s3cr3t"}});
    let rule = run_rule(&app, id, by_approver.clone()).await;
    assert_eq!(rule.body["arguments"], r#"{"secret":"s3cr3t"}"#);
    assert_problem(
        &revoke(&app, &rule.body["id"], &app.admin_key, "?revoked_by=9").await,
        StatusCode::FORBIDDEN,
        "rule_not_revocable",
    );
    assert_problem(
        &revoke(&app, &rule.body["id"], &app.admin_key, "").await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "missing_revoked_by",
    );
    let by_owner = revoke(&app, &rule.body["id"], &app.admin_key, "?revoked_by=7").await;
    assert_eq!(by_owner.status, StatusCode::OK, "{:?}", by_owner.body);
    // Revoked again: the rule as it stands, its first revocation kept.
    let again = revoke(&app, &rule.body["id"], &app.admin_key, "?revoked_by=10").await;
    assert_eq!(again.body["revoked_by"], OWNER);
    for (author, revoker) in [(APPROVER, "8"), (APPROVER, "10")] {
        let made = run_rule(
            &app,
            id,
            json!({"created_by": author, "tool": "edit_page", "verdict": "deny"}),
        )
        .await;
        let path = format!("?revoked_by={revoker}");
        let revoked = revoke(&app, &made.body["id"], &app.admin_key, &path).await;
        assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    }
    let listed = app.get(&format!("/v1/runs/{id}/rules")).await;
    assert_eq!(listed.body["rules"].as_array().unwrap().len(), 3);
    // Events: ids, tool, verdict, scope; never the arguments.
    let data: Vec<Value> = sqlx::query_scalar(
        "select data from events where type in ('rule.created', 'rule.revoked') order by xid, id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(data.len(), 6);
    assert!(!data.iter().any(|d| d.to_string().contains("s3cr3t")));
    assert_eq!(data[1]["revoked_by"], OWNER);
    assert_eq!(data[0]["tool"], "edit_page");
    assert_eq!(data[0]["scope"], "run");
    // Another tenant's rule id is not found.
    let other = support::add_client(&app.pool, "other", "other", &["decisions:write"]).await;
    assert_problem(
        &revoke(&app, &rule.body["id"], &other, "?revoked_by=7").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test]
async fn a_rule_with_arguments_decides_only_calls_with_equal_arguments() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "arguments": {"page": 99}}),
    )
    .await;
    let waits = append(&app, id, &["edit_page"]).await;
    assert_eq!(
        waits.body["status"], "waiting_for_approval",
        "{:?}",
        waits.body
    );

    let other = resumed_run(&app).await;
    run_rule(
        &app,
        other,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "arguments": {"page": 13}}),
    )
    .await;
    let decided = append(&app, other, &["edit_page"]).await;
    assert_eq!(decided.body["status"], "resumed", "{:?}", decided.body);
}

#[tokio::test]
async fn the_same_turn_posted_again_answers_the_run_as_it_stands_and_applies_no_rule_twice() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    let first = append(&app, id, &["edit_page"]).await;
    assert_eq!(first.body["status"], "released", "{:?}", first.body);
    let again = append(&app, id, &["edit_page"]).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.body, first.body);
    let decisions: i64 =
        sqlx::query_scalar("select count(*) from approval_events where run_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(decisions, 2);

    let run_id = Uuid::new_v4();
    app.post(
        "/v1/rules",
        json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "send_mail", "verdict": "deny",
               "expires_at": in_days(1)}),
    )
    .await;
    let registered = app
        .post("/v1/runs", body_with(run_id, &["send_mail"], false))
        .await;
    assert_eq!(
        registered.body["status"], "resumed",
        "{:?}",
        registered.body
    );
    let repeated = app
        .post("/v1/runs", body_with(run_id, &["send_mail"], false))
        .await;
    assert_eq!(repeated.status, StatusCode::OK, "{:?}", repeated.body);
    assert_eq!(repeated.body, registered.body);
    assert_eq!(event_types(&app.pool, run_id).await, ["run.resumed"]);
}

#[tokio::test]
async fn a_token_makes_run_rules_as_its_user_and_revokes_only_its_users_rules() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    let id = resumed_run(&app).await;
    let token = signer.token(OWNER);
    let path = format!("/v1/runs/{id}/rules");
    let as_token = |body: Value| app.call(Method::POST, &path, Some(&token), Some(body));
    let made = as_token(json!({"tool": "edit_page", "verdict": "deny", "reason": "skip"})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    assert_eq!(made.body["created_by"], OWNER);
    assert_problem(
        &as_token(json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "deny"})).await,
        StatusCode::FORBIDDEN,
        "decider_mismatch",
    );
    // A token makes no owner-scope rule, and sees no run its user may not decide.
    let owner_scope = app
        .call(
            Method::POST,
            "/v1/rules",
            Some(&token),
            Some(
                json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "x", "verdict": "deny",
                        "expires_at": in_days(1)}),
            ),
        )
        .await;
    assert_problem(&owner_scope, StatusCode::FORBIDDEN, "token_not_allowed");
    let strangers = signer.token(STRANGER);
    let hidden = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/rules"),
            Some(&strangers),
            Some(json!({"tool": "edit_page", "verdict": "deny"})),
        )
        .await;
    assert_problem(&hidden, StatusCode::NOT_FOUND, "not_found");
    // The approver's rule is not the owner's token's to revoke.
    let approvers = run_rule(
        &app,
        id,
        json!({"created_by": APPROVER, "tool": "send_mail", "verdict": "deny"}),
    )
    .await;
    assert_problem(
        &revoke(&app, &approvers.body["id"], &token, "").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let own = revoke(&app, &made.body["id"], &token, "").await;
    assert_eq!(own.status, StatusCode::OK, "{:?}", own.body);
    assert_eq!(own.body["revoked_by"], OWNER);
    let listed = app
        .call(
            Method::GET,
            &format!("/v1/runs/{id}/rules"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.body);
    assert_eq!(listed.body["rules"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn approving_a_call_a_live_deny_rule_covers_is_a_conflict_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    let waits = append(&app, id, &["edit_page", "send_mail"]).await;
    assert_eq!(
        waits.body["status"], "waiting_for_approval",
        "{:?}",
        waits.body
    );
    let digest = waits.body["turn"]["digest"].as_str().unwrap().to_owned();
    let refused = app.decide(id, true, Some(APPROVER), &digest).await;
    assert_problem(&refused, StatusCode::CONFLICT, "denied_by_rule");
    assert!(refused.body["detail"].as_str().unwrap().contains("next_0"));
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["status"],
        "waiting_for_approval"
    );
    // Denying the covered call and approving the other is allowed.
    let mixed = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"decider_uid": APPROVER, "turn_digest": digest, "calls": [
                {"call_id": "next_0", "approved": false},
                {"call_id": "next_1", "approved": true},
            ]}),
        )
        .await;
    assert_eq!(mixed.status, StatusCode::OK, "{:?}", mixed.body);
    // Once the rule is revoked, the call may be approved.
    let other = resumed_run(&app).await;
    let rule_two = run_rule(
        &app,
        other,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    let partly = append(&app, other, &["edit_page", "send_mail"]).await;
    let digest = partly.body["turn"]["digest"].as_str().unwrap().to_owned();
    revoke(&app, &rule_two.body["id"], &app.admin_key, "?revoked_by=7").await;
    let approved = app.decide(other, true, Some(APPROVER), &digest).await;
    assert_eq!(approved.status, StatusCode::OK, "{:?}", approved.body);
}

async fn rule_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from remembered_rules")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A run waiting on `edit_page` and `send_mail`; its id and digest.
async fn waiting_two(app: &TestApp) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let run = app
        .register(body_with(id, &["edit_page", "send_mail"], false))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_decision_that_remembers_makes_one_rule_per_tool_and_verdict_and_its_replay_makes_none() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let (id, digest) = waiting_two(&app).await;
    let body = json!({"approved": false, "reason": "skip", "decider_uid": OWNER, "turn_digest": digest,
                      "remember": "run"});
    let path = format!("/v1/runs/{id}/decision");
    let decided = app.post(&path, body.clone()).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    let rules = app.get(&format!("/v1/runs/{id}/rules")).await.body["rules"].clone();
    let mut tools: Vec<&str> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["tool"].as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(tools, ["edit_page", "send_mail"]);
    assert!(
        rules
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verdict"] == "deny"
                && r["reason"] == "skip"
                && r["created_by"] == OWNER
                && r["arguments"].is_null())
    );
    // The same decision again: the same bytes, no second rule; without `remember` it is another decision.
    let again = app.post(&path, body.clone()).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(again.bytes, decided.bytes);
    assert_eq!(rule_count(&app.pool).await, 2);
    let mut without = body;
    without.as_object_mut().unwrap().remove("remember");
    assert_problem(
        &app.post(&path, without).await,
        StatusCode::CONFLICT,
        "already_decided",
    );
    // The next turn of those tools is decided at once: "never in this conversation".
    let next = append(&app, id, &["send_mail", "edit_page"]).await;
    assert_eq!(next.body["status"], "resumed", "{:?}", next.body);
}

#[tokio::test]
async fn a_refused_remember_refuses_the_whole_decision_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let (id, digest) = waiting_two(&app).await;
    let path = format!("/v1/runs/{id}/decision");
    let edited = json!({"decider_uid": OWNER, "turn_digest": digest, "calls": [
        {"call_id": "call_0", "approved": true, "arguments": "{\"page\": 1}", "remember": "run"},
        {"call_id": "call_1", "approved": false},
    ]});
    assert_problem(
        &app.post(&path, edited).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "remember_edited",
    );
    let by_nobody = app.client("anonymous", &["decisions:anonymous"]).await;
    let anonymous = app
        .call(
            Method::POST,
            &path,
            Some(&by_nobody),
            Some(json!({"approved": false, "decider_uid": null, "turn_digest": digest, "remember": "run"})),
        )
        .await;
    assert_problem(&anonymous, StatusCode::FORBIDDEN, "anonymous_rule");
    let owner_scope = json!({"approved": false, "decider_uid": APPROVER, "turn_digest": digest,
                             "remember": "owner", "remember_until": in_days(1)});
    assert_problem(
        &app.post(&path, owner_scope).await,
        StatusCode::FORBIDDEN,
        "rule_not_permitted",
    );
    let no_end = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "remember": "owner"});
    assert_problem(
        &app.post(&path, no_end).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "remember_until_required",
    );
    support::assert_nothing_recorded(&app.pool, id).await;
    assert_eq!(rule_count(&app.pool).await, 0);
    // The owner remembers for their runs of the tool until a date.
    let owner = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest, "remember": "owner",
                       "remember_until": in_days(2)});
    let decided = app.post(&path, owner).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    let listed = app.get(&format!("/v1/rules?owner_uid={OWNER}")).await;
    assert!(
        listed.body["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["scope"] == "owner")
    );
    let later = app
        .post("/v1/runs", body_with(Uuid::new_v4(), &["edit_page"], false))
        .await;
    assert_eq!(later.body["status"], "resumed", "{:?}", later.body);
}

#[tokio::test]
async fn a_token_remembers_for_its_run_only() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    let token = signer.token(OWNER);
    let (id, digest) = waiting_two(&app).await;
    let path = format!("/v1/runs/{id}/decision");
    let owner_scope = json!({"approved": false, "turn_digest": digest, "remember": "owner",
                             "remember_until": in_days(1)});
    let refused = app
        .call(Method::POST, &path, Some(&token), Some(owner_scope))
        .await;
    assert_problem(&refused, StatusCode::FORBIDDEN, "token_not_allowed");
    let run_scope = json!({"approved": false, "turn_digest": digest, "remember": "run"});
    let decided = app
        .call(Method::POST, &path, Some(&token), Some(run_scope))
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert_eq!(rule_count(&app.pool).await, 2);
}
