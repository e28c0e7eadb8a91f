//! The rule that would decide each pending call, as the run view and the inbox show it while the turn waits
//! (docs/design.md §18): chosen as a registration's use of rules chooses (deny wins, the earliest made, arguments
//! equal, live, its author passing §4 on the run now), never with the rule's arguments, and read in the statement
//! that reads the calls (tests/round_trips.rs counts it).

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::encryption::{OLD_KEYS, with_keys};
use crate::remembered_rules::{OWNER, body_with, next_turn, people, resumed_run, revoke, run_rule};
use crate::support::{Signer, TestApp};

const APPROVER: i64 = 8;

/// The members a shown rule has, exactly.
const RULE_MEMBERS: [&str; 7] = [
    "created_at",
    "created_by",
    "expires_at",
    "id",
    "reason",
    "scope",
    "verdict",
];

/// Registers the owner's run waiting on a call of each of `tools` (`call_{n}`, arguments `{"page": 12}`), with
/// `changes` to the body; its id.
async fn waiting_run(app: &TestApp, tools: &[&str], changes: Value) -> Uuid {
    let id = Uuid::new_v4();
    let mut body = body_with(id, tools, false);
    for (key, value) in changes.as_object().unwrap() {
        body[key] = value.clone();
    }
    let run = app.register(body).await;
    assert_eq!(run["status"], "waiting_for_approval", "{run}");
    id
}

/// The `rule` member of each pending call of the run as a key reads it (`Null` where a call has none).
async fn shown_rules(app: &TestApp, id: Uuid) -> Vec<Value> {
    let run = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    rules_of(&run.body["turn"]["pending_calls"])
}

fn rules_of(pending_calls: &Value) -> Vec<Value> {
    pending_calls
        .as_array()
        .expect("pending calls")
        .iter()
        .map(|call| call.get("rule").cloned().unwrap_or(Value::Null))
        .collect()
}

/// The names of a shown rule's members, sorted.
fn members(rule: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = rule
        .as_object()
        .unwrap_or_else(|| panic!("a rule is shown: {rule}"))
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names
}

async fn made(app: &TestApp, id: Uuid, body: Value) -> Value {
    let rule = run_rule(app, id, body).await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    rule.body
}

async fn owner_rule(app: &TestApp, body: Value) -> Value {
    let rule = app.post("/v1/rules", body).await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    rule.body
}

fn in_days(days: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::days(days)).to_rfc3339()
}

#[tokio::test]
async fn a_waiting_turn_with_a_run_rule_covering_one_of_two_calls_shows_it_on_that_call_only() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let rule = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    // Covered in part: the turn waits, and the answer to `POST /turns` is the view that shows the rule.
    let appended = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            next_turn(&["edit_page", "send_mail"]),
        )
        .await;
    assert_eq!(appended.status, StatusCode::OK, "{:?}", appended.body);
    assert_eq!(appended.body["status"], "waiting_for_approval");
    let answered = rules_of(&appended.body["turn"]["pending_calls"]);
    let shown = shown_rules(&app, id).await;
    assert_eq!(answered, shown);
    assert_eq!(shown[1], Value::Null, "{shown:?}");
    assert_eq!(members(&shown[0]), RULE_MEMBERS);
    assert_eq!(
        shown[0],
        json!({"id": rule["id"], "scope": "run", "verdict": "approve", "reason": null, "created_by": OWNER,
               "created_at": shown[0]["created_at"], "expires_at": null})
    );
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(shown[0]["created_at"].as_str().unwrap()).unwrap(),
        chrono::DateTime::parse_from_rfc3339(rule["created_at"].as_str().unwrap()).unwrap()
    );

    // Once the turn is decided it no longer waits: no call shows a rule.
    let digest = appended.body["turn"]["digest"].as_str().unwrap();
    let decided = app.decide(id, false, Some(OWNER), digest).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert_eq!(shown_rules(&app, id).await, [Value::Null, Value::Null]);
}

#[tokio::test]
async fn a_deny_and_an_approve_rule_on_the_same_call_shows_the_deny() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app, &["edit_page", "send_mail"], json!({})).await;
    let approve = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    assert_eq!(shown_rules(&app, id).await[0]["id"], approve["id"]);
    let deny = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "reason": "skip"}),
    )
    .await;
    // A later approve rule of an owner-scope changes nothing: the deny still wins, whatever the scope.
    owner_rule(
        &app,
        json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "edit_page", "verdict": "approve",
               "expires_at": in_days(1)}),
    )
    .await;
    let shown = shown_rules(&app, id).await;
    assert_eq!(shown[0]["id"], deny["id"], "{shown:?}");
    assert_eq!(shown[0]["verdict"], "deny");
    assert_eq!(shown[0]["reason"], "skip");
    assert_eq!(shown[1], Value::Null);
}

#[tokio::test]
async fn a_rule_whose_author_lost_the_right_shows_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app, &["edit_page"], json!({})).await;
    let rule = made(
        &app,
        id,
        json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    assert_eq!(shown_rules(&app, id).await[0]["id"], rule["id"]);
    app.user(APPROVER, false, false, false).await;
    assert_eq!(shown_rules(&app, id).await, [Value::Null]);

    // Four-eyes: the owner's own approve rule (owner scope, made without a run) is shown on a run without it and not
    // on one that requires a second approver; the owner's deny rule is shown on both.
    let plain = waiting_run(&app, &["send_mail"], json!({})).await;
    let four_eyes = waiting_run(
        &app,
        &["send_mail", "edit_page"],
        json!({"require_second_approver": true}),
    )
    .await;
    let approve = owner_rule(
        &app,
        json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "send_mail", "verdict": "approve",
               "expires_at": in_days(1)}),
    )
    .await;
    let deny = made(
        &app,
        four_eyes,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    assert_eq!(shown_rules(&app, plain).await[0]["id"], approve["id"]);
    assert_eq!(shown_rules(&app, plain).await[0]["scope"], "owner");
    let shown = shown_rules(&app, four_eyes).await;
    assert_eq!(shown[0], Value::Null, "{shown:?}");
    assert_eq!(shown[1]["id"], deny["id"], "{shown:?}");
}

#[tokio::test]
async fn a_revoked_or_expired_rule_shows_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app, &["edit_page", "send_mail"], json!({})).await;
    let run_scope = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    let owner_scope = owner_rule(
        &app,
        json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "send_mail", "verdict": "deny",
               "expires_at": in_days(1)}),
    )
    .await;
    let shown = shown_rules(&app, id).await;
    assert_eq!(shown[0]["id"], run_scope["id"]);
    assert_eq!(shown[1]["id"], owner_scope["id"]);
    assert!(shown[1]["expires_at"].is_string(), "{shown:?}");

    let revoked = revoke(&app, &run_scope["id"], &app.admin_key, "?revoked_by=7").await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    // Expired by the database's clock, as the rule's use judges it.
    sqlx::query(
        "update remembered_rules set expires_at = now() - interval '1 second' where id = $1",
    )
    .bind(Uuid::parse_str(owner_scope["id"].as_str().unwrap()).unwrap())
    .execute(&app.pool)
    .await
    .unwrap();
    assert_eq!(shown_rules(&app, id).await, [Value::Null, Value::Null]);
}

#[tokio::test]
async fn the_inbox_shows_the_rule_that_would_decide_each_call_matching_arguments_it_does_not_show()
{
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    // At `metadata` the inbox shows no arguments, yet a rule with arguments is matched against them.
    let hidden = waiting_run(
        &app,
        &["edit_page", "send_mail"],
        json!({"privacy_level": "metadata"}),
    )
    .await;
    let bare = waiting_run(&app, &["edit_page"], json!({})).await;
    let other_page = made(
        &app,
        hidden,
        json!({"created_by": OWNER, "tool": "edit_page", "arguments": {"page": 13}, "verdict": "deny"}),
    )
    .await;
    let this_page = made(
        &app,
        hidden,
        json!({"created_by": APPROVER, "tool": "edit_page", "arguments": {"page": 12}, "verdict": "approve"}),
    )
    .await;
    let any_mail = made(
        &app,
        hidden,
        json!({"created_by": OWNER, "tool": "send_mail", "verdict": "deny"}),
    )
    .await;
    assert_ne!(other_page["id"], this_page["id"]);

    let page = app.get(&format!("/v1/approvals?acting_uid={OWNER}")).await;
    assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
    let items = page.body["items"].as_array().unwrap();
    let item = |id: Uuid| {
        items
            .iter()
            .find(|item| item["run_id"] == id.to_string())
            .unwrap_or_else(|| panic!("run {id} listed: {items:?}"))
    };
    let calls = &item(hidden)["turn"]["pending_calls"];
    assert!(calls[0].get("arguments").is_none(), "{calls}");
    let rules = rules_of(calls);
    assert_eq!(rules[0]["id"], this_page["id"], "{rules:?}");
    assert_eq!(rules[0]["created_by"], APPROVER);
    assert_eq!(rules[1]["id"], any_mail["id"], "{rules:?}");
    assert_eq!(
        rules_of(&item(bare)["turn"]["pending_calls"]),
        [Value::Null]
    );
    // The run view shows the same choice.
    assert_eq!(shown_rules(&app, hidden).await, rules);
}

#[tokio::test]
async fn a_token_reader_sees_the_rule_without_its_arguments() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    // At `redacted` a token reads the call's arguments (redacted), so it may read the rule that matches them; below
    // it no rule with arguments is shown at all (tests/api/rule_holes.rs).
    let id = waiting_run(&app, &["edit_page"], json!({"privacy_level": "redacted"})).await;
    let rule = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "arguments": {"page": 12}, "verdict": "deny"}),
    )
    .await;
    let token = signer.token(OWNER);
    let run = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&token), None)
        .await;
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    let call = &run.body["turn"]["pending_calls"][0];
    assert_eq!(call["rule"]["id"], rule["id"]);
    assert_eq!(call["rule"]["verdict"], "deny");
    assert_eq!(members(&call["rule"]), RULE_MEMBERS);
}

#[tokio::test]
async fn with_payloads_sealed_a_rule_matches_on_arguments_in_the_run_view_and_the_inbox() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_keys(&people(pool).await, OLD_KEYS);
    let id = waiting_run(&app, &["edit_page"], json!({"privacy_level": "metadata"})).await;
    let rule = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "arguments": {"page": 12}, "verdict": "deny"}),
    )
    .await;
    let sealed: Option<Vec<u8>> =
        sqlx::query_scalar("select arguments_sealed from remembered_rules where id = $1")
            .bind(Uuid::parse_str(rule["id"].as_str().unwrap()).unwrap())
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(sealed.is_some(), "the rule's arguments are sealed");
    assert_eq!(shown_rules(&app, id).await[0]["id"], rule["id"]);
    let page = app.get(&format!("/v1/approvals?acting_uid={OWNER}")).await;
    assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
    let calls = &page.body["items"][0]["turn"]["pending_calls"];
    assert!(calls[0].get("arguments").is_none(), "{calls}");
    assert_eq!(calls[0]["rule"]["id"], rule["id"]);
}

#[tokio::test]
async fn past_the_inbox_s_byte_budget_a_call_whose_rule_matches_on_arguments_shows_no_rule() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    // Each call's arguments (`{"page": 12}`) are 12 bytes; the page may read 20: the newest run's call only.
    let older = waiting_run(&app, &["edit_page"], json!({"privacy_level": "metadata"})).await;
    let newer = waiting_run(&app, &["edit_page"], json!({"privacy_level": "metadata"})).await;
    for id in [older, newer] {
        made(
            &app,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "arguments": {"page": 12}, "verdict": "deny"}),
        )
        .await;
    }
    let budgeted = crate::approvals::with_inbox_budget(&app, 20);

    let page = budgeted
        .get(&format!("/v1/approvals?acting_uid={OWNER}"))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
    let items = page.body["items"].as_array().unwrap();
    let rule_of = |id: Uuid| {
        let item = items
            .iter()
            .find(|item| item["run_id"] == id.to_string())
            .unwrap_or_else(|| panic!("run {id} listed: {items:?}"));
        rules_of(&item["turn"]["pending_calls"])[0].clone()
    };
    // Within the budget the rule is matched and shown; past it, which rule would decide is not known: none.
    assert_eq!(rule_of(newer)["verdict"], "deny", "{items:?}");
    assert_eq!(rule_of(older), Value::Null, "{items:?}");
    // The run view reads its one run's arguments whole and shows it.
    assert_eq!(shown_rules(&budgeted, older).await[0]["verdict"], "deny");
}
