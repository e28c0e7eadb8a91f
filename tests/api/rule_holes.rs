//! Remembered decisions against the fourth review's holes (issue 50; docs/design.md §18): a rule's arguments match
//! a call's as JSON values whatever the numbers' spelling, and different integers past 64 bits stay different; a
//! decision token below `redacted` cannot test guesses of the arguments it may not see through the rule a call
//! shows; an owner revokes run-scope rules of others, never an owner-scope rule an admin made.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::remembered_rules::{OWNER, body_with, people, resumed_run, revoke, run_rule};
use crate::support::{Signer, TestApp, assert_problem, call};

const APPROVER: i64 = 8;
const ADMIN: i64 = 10;

/// The next turn of a resumed run: one call `next_{n}` per `(tool, arguments)`.
fn turn_of(calls: &[(&str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(n, (tool, arguments))| call(&format!("next_{n}"), tool, arguments))
        .collect();
    json!({"messages": [
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": null, "tool_calls": calls},
    ]})
}

async fn made(app: &TestApp, id: Uuid, body: Value) -> Value {
    let rule = run_rule(app, id, body).await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    rule.body
}

async fn append(app: &TestApp, id: Uuid, calls: &[(&str, &str)]) -> Value {
    let answer = app
        .post(&format!("/v1/runs/{id}/turns"), turn_of(calls))
        .await;
    assert!(answer.status.is_success(), "{:?}", answer.body);
    answer.body
}

#[tokio::test]
async fn a_deny_rule_matches_a_number_written_another_way() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    for spelled in ["42.0", "4.2e1"] {
        // The issue's case: a deny rule on page 42 and an approve rule of the tool, both of the owner.
        let id = resumed_run(&app).await;
        let never = made(
            &app,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "arguments": {"page": 42}}),
        )
        .await;
        made(
            &app,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
        )
        .await;
        let arguments = format!(r#"{{"page": {spelled}}}"#);
        let run = append(&app, id, &[("edit_page", &arguments)]).await;
        assert_eq!(run["status"], "resumed", "{spelled}: {run}");
        assert_eq!(run["decision"]["calls"][0]["approved"], false, "{run}");
        assert_eq!(run["decision"]["calls"][0]["rule_id"], never["id"], "{run}");

        // A turn the rule covers in part waits; a person approving the covered call is refused.
        let waiting = resumed_run(&app).await;
        let never = made(
            &app,
            waiting,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "arguments": {"page": 42}}),
        )
        .await;
        let run = append(
            &app,
            waiting,
            &[("edit_page", &arguments), ("send_mail", "{}")],
        )
        .await;
        assert_eq!(run["status"], "waiting_for_approval", "{run}");
        assert_eq!(run["turn"]["pending_calls"][0]["rule"]["id"], never["id"]);
        let digest = run["turn"]["digest"].as_str().unwrap();
        let refused = app.decide(waiting, true, Some(APPROVER), digest).await;
        assert_problem(&refused, StatusCode::CONFLICT, "denied_by_rule");
    }
}

#[tokio::test]
async fn a_deny_rule_on_an_integer_past_64_bits_does_not_match_its_neighbour() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    // Sent as text: a `Value` cannot hold the integer.
    let never = format!(
        r#"{{"created_by": {OWNER}, "tool": "edit_page", "verdict": "deny",
             "arguments": {{"order": 123456789012345678901234}}}}"#
    );
    let never = app
        .send_bytes(
            Method::POST,
            &format!("/v1/runs/{id}/rules"),
            Some("application/json"),
            never,
        )
        .await;
    assert_eq!(never.status, StatusCode::CREATED, "{:?}", never.body);
    let allow = made(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
    )
    .await;
    let run = append(
        &app,
        id,
        &[("edit_page", r#"{"order": 123456789012345678901235}"#)],
    )
    .await;
    // Approved by the approve rule and released to the worker: the deny rule names another order.
    assert_eq!(run["status"], "released", "{run}");
    assert_eq!(run["decision"]["calls"][0]["rule_id"], allow["id"], "{run}");
}

/// The `rule` a decision token of the owner reads on the first pending call of `id`.
async fn rule_a_token_sees(app: &TestApp, signer: &Signer, id: Uuid) -> Option<Value> {
    let run = app
        .call(
            Method::GET,
            &format!("/v1/runs/{id}"),
            Some(&signer.token(OWNER)),
            None,
        )
        .await;
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    run.body["turn"]["pending_calls"][0].get("rule").cloned()
}

/// Registers the owner's run waiting on `edit_page` `{"page": 12}` at `level`; its id.
async fn waiting_at(app: &TestApp, level: &str) -> Uuid {
    let id = Uuid::new_v4();
    let mut body = body_with(id, &["edit_page"], false);
    body["privacy_level"] = json!(level);
    let run = app.register(body).await;
    assert_eq!(run["status"], "waiting_for_approval", "{run}");
    id
}

/// A rule the owner's decision token makes on `id`.
async fn token_rule(
    app: &TestApp,
    signer: &Signer,
    id: Uuid,
    body: Value,
) -> crate::support::Answer {
    app.call(
        Method::POST,
        &format!("/v1/runs/{id}/rules"),
        Some(&signer.token(OWNER)),
        Some(body),
    )
    .await
}

#[tokio::test]
async fn below_redacted_a_token_sees_no_rule_that_matches_on_arguments() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    for level in ["none", "metadata", "redacted", "full"] {
        let mut shown = Vec::new();
        // A right guess of the arguments (`{"page": 12}`, as registered) and a wrong one, made through a key.
        for guess in [12, 99] {
            let id = waiting_at(&app, level).await;
            made(
                &app,
                id,
                json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny", "arguments": {"page": guess}}),
            )
            .await;
            shown.push(rule_a_token_sees(&app, &signer, id).await.is_some());
        }
        let expected = if matches!(level, "none" | "metadata") {
            // Whatever the guess, the same answer: no rule.
            [false, false]
        } else {
            [true, false]
        };
        assert_eq!(shown, expected, "at {level}");
    }
    // A rule without arguments says nothing of them: shown at every level.
    let id = waiting_at(&app, "none").await;
    let any_call = token_rule(
        &app,
        &signer,
        id,
        json!({"tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    assert_eq!(any_call.status, StatusCode::CREATED, "{:?}", any_call.body);
    let rule = rule_a_token_sees(&app, &signer, id).await;
    assert_eq!(
        rule.map(|rule| rule["id"].clone()),
        Some(any_call.body["id"].clone())
    );
    // A key reads the rule whatever the level: it reads the arguments too.
    let key_view = app.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(
        key_view.body["turn"]["pending_calls"][0]["rule"]["id"],
        any_call.body["id"]
    );
}

#[tokio::test]
async fn below_redacted_a_token_may_not_make_a_rule_with_arguments() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    let guess = json!({"tool": "edit_page", "verdict": "deny", "arguments": {"page": 12}});
    for level in ["none", "metadata"] {
        // Else a deny rule of its guess would answer its approval 409 `denied_by_rule` exactly when the guess is right.
        let id = waiting_at(&app, level).await;
        let refused = token_rule(&app, &signer, id, guess.clone()).await;
        assert_problem(&refused, StatusCode::FORBIDDEN, "token_not_allowed");
        let listed = app.get(&format!("/v1/runs/{id}/rules")).await;
        assert_eq!(listed.body["rules"], json!([]), "at {level}");
    }
    for level in ["redacted", "full"] {
        let id = waiting_at(&app, level).await;
        let allowed = token_rule(&app, &signer, id, guess.clone()).await;
        assert_eq!(
            allowed.status,
            StatusCode::CREATED,
            "at {level}: {:?}",
            allowed.body
        );
    }
    // A run the token's user may not decide is not found, whatever its level.
    let stranger = Signer::register(&app.pool, "chat", "k2");
    let id = waiting_at(&app, "none").await;
    let answer = app
        .call(
            Method::POST,
            &format!("/v1/runs/{id}/rules"),
            Some(&stranger.await.token(9)),
            Some(guess),
        )
        .await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn the_owner_revokes_a_run_rule_of_another_but_not_an_admins_owner_scope_rule() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let in_a_day = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let guardrail = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": ADMIN, "tool": "send_mail", "verdict": "deny",
                   "expires_at": in_a_day}),
        )
        .await;
    assert_eq!(
        guardrail.status,
        StatusCode::CREATED,
        "{:?}",
        guardrail.body
    );
    let by_owner = format!("?revoked_by={OWNER}");
    assert_problem(
        &revoke(&app, &guardrail.body["id"], &app.admin_key, &by_owner).await,
        StatusCode::FORBIDDEN,
        "rule_not_revocable",
    );
    let still = app.get(&format!("/v1/rules?owner_uid={OWNER}")).await;
    assert_eq!(still.body["rules"][0]["live"], true, "{:?}", still.body);
    // The owner's own owner-scope rule is theirs to revoke, as its author.
    let own = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "edit_page", "verdict": "deny",
                   "expires_at": (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339()}),
        )
        .await;
    let revoked = revoke(&app, &own.body["id"], &app.admin_key, &by_owner).await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    // A run-scope rule another person made on the owner's run: the run's owner may revoke it.
    let id = resumed_run(&app).await;
    let approvers = made(
        &app,
        id,
        json!({"created_by": APPROVER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    let revoked = revoke(&app, &approvers["id"], &app.admin_key, &by_owner).await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
    // An admin revokes the guardrail.
    let by_admin = format!("?revoked_by={ADMIN}");
    let revoked = revoke(&app, &guardrail.body["id"], &app.admin_key, &by_admin).await;
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
}
