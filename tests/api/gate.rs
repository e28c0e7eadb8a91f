//! The approver tool gate (docs/design.md §4, ADR-133): `approvable_tools` on users, `tool_not_approvable` and
//! `anonymous_write_approval` on approvals, never on denials, and the inbox's `approvable` marks.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, assert_nothing_recorded, assert_problem, call};

const OWNER: i64 = 7;
const OTHER: i64 = 8;
const ADMIN: i64 = 9;
const TOOL: &str = "deploy";

async fn put_user(
    app: &TestApp,
    uid: i64,
    is_admin: bool,
    approver: bool,
    tools: Value,
) -> support::Answer {
    app.call(
        Method::PUT,
        &format!("/v1/users/{uid}"),
        Some(&app.admin_key),
        Some(json!({
            "username": format!("user{uid}"),
            "is_admin": is_admin,
            "can_approve_others": approver,
            "disabled": false,
            "approvable_tools": tools,
        })),
    )
    .await
}

/// A waiting run of the owner with one call of `TOOL`, declared with `effect`; its id and digest.
async fn run_with(app: &TestApp, effect: &str) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id,
            "owner_uid": OWNER,
            "messages": support::transcript(vec![call("call_1", TOOL, "{}")]),
            "tools": [{"name": TOOL, "effect": effect}],
        }))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn approvable_tools_are_stored_and_shown_and_absent_or_null_means_no_limit() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let listed = put_user(&app, OWNER, false, false, json!(["deploy", "send_mail"])).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(
        listed.body["approvable_tools"],
        json!(["deploy", "send_mail"])
    );
    let cleared = put_user(&app, OWNER, false, false, Value::Null).await;
    assert_eq!(cleared.body["approvable_tools"], Value::Null);
    let empty = put_user(&app, OTHER, false, false, json!([])).await;
    assert_eq!(empty.body["approvable_tools"], json!([]));
    let absent = app
        .call(
            Method::PUT,
            &format!("/v1/users/{OTHER}"),
            Some(&app.admin_key),
            Some(json!({"username": "other", "is_admin": false, "can_approve_others": false, "disabled": false})),
        )
        .await;
    assert_eq!(absent.status, StatusCode::OK, "{}", absent.body);
    assert_eq!(absent.body["approvable_tools"], Value::Null);
    let invalid = put_user(&app, OTHER, false, false, json!(["no spaces"])).await;
    assert_problem(
        &invalid,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_approvable_tools",
    );
}

/// Owner / other user / admin / anonymous × read / write × in list / not in list, approving and denying.
#[tokio::test]
async fn the_gate_holds_every_approver_to_their_list_for_writes_only_and_never_for_denials() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let approvers = [
        ("owner", Some(OWNER)),
        ("other user", Some(OTHER)),
        ("admin", Some(ADMIN)),
        ("anonymous", None),
    ];
    for (who, uid) in approvers {
        for effect in ["read", "write"] {
            for in_list in [true, false] {
                let list = if in_list {
                    json!([TOOL])
                } else {
                    json!(["something_else"])
                };
                put_user(&app, OWNER, false, false, list.clone()).await;
                put_user(&app, OTHER, false, true, list.clone()).await;
                put_user(&app, ADMIN, true, false, list).await;
                for approved in [true, false] {
                    let (id, digest) = run_with(&app, effect).await;
                    let answer = app.decide(id, approved, uid, &digest).await;
                    let case = format!("{who}, {effect}, in list: {in_list}, approved: {approved}");
                    let refusal = match (approved, effect, uid) {
                        (false, _, _) | (true, "read", _) => None,
                        (true, _, None) => Some("anonymous_write_approval"),
                        (true, _, Some(_)) if in_list => None,
                        (true, _, Some(_)) => Some("tool_not_approvable"),
                    };
                    match refusal {
                        None => {
                            assert_eq!(answer.status, StatusCode::OK, "{case}: {}", answer.body)
                        }
                        Some(code) => {
                            assert_eq!(
                                answer.status,
                                StatusCode::FORBIDDEN,
                                "{case}: {}",
                                answer.body
                            );
                            assert_eq!(answer.code(), code, "{case}");
                            assert_nothing_recorded(&pool, id).await;
                        }
                    }
                }
            }
        }
    }
}

/// A waiting run of the owner with a write call of `TOOL` and a read call of `lookup`; its id and digest.
async fn run_with_a_write_and_a_read(app: &TestApp) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id,
            "owner_uid": OWNER,
            "messages": support::transcript(vec![
                call("call_w", TOOL, "{}"),
                call("call_r", "lookup", "{}"),
            ]),
            "tools": [{"name": TOOL, "effect": "write"}, {"name": "lookup", "effect": "read"}],
        }))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn per_call_verdicts_are_gated_on_the_calls_they_approve_and_never_on_the_ones_they_deny() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    put_user(&app, OWNER, false, false, json!(["lookup"])).await;
    for (who, uid) in [
        ("the owner, whose list lacks the tool", Some(OWNER)),
        ("nobody", None),
    ] {
        let decide = |id: Uuid, digest: String, write_approved: bool| {
            let body = json!({"decider_uid": uid, "turn_digest": digest, "calls": [
                {"call_id": "call_w", "approved": write_approved},
                {"call_id": "call_r", "approved": true},
            ]});
            let app = &app;
            async move { app.post(&format!("/v1/runs/{id}/decision"), body).await }
        };
        let (id, digest) = run_with_a_write_and_a_read(&app).await;
        let refused = decide(id, digest, true).await;
        let code = if uid.is_some() {
            "tool_not_approvable"
        } else {
            "anonymous_write_approval"
        };
        assert_problem(&refused, StatusCode::FORBIDDEN, code);
        assert_nothing_recorded(&pool, id).await;

        let (id, digest) = run_with_a_write_and_a_read(&app).await;
        let allowed = decide(id, digest, false).await;
        assert_eq!(
            allowed.status,
            StatusCode::OK,
            "{who} denying the write and approving the read: {}",
            allowed.body
        );
        assert_eq!(allowed.body["decision"]["approved"], Value::Null);
    }
}

#[tokio::test]
async fn a_tool_the_configuration_makes_write_is_gated_even_when_the_run_declares_it_read() {
    let (_database, pool) = TestDatabase::create().await;
    let fake = crate::executors::FakeExecutor::start().await;
    let app = crate::executors::app_with_tools(pool, &fake, &[(TOOL, "ok")]).await;
    put_user(&app, OWNER, false, false, json!([])).await;
    let (id, digest) = run_with(&app, "read").await;
    let answer = app.decide(id, true, Some(OWNER), &digest).await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "tool_not_approvable");
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn the_inbox_marks_the_calls_the_acting_user_may_not_approve() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    put_user(&app, OWNER, false, false, json!(["read_page"])).await;
    let id = Uuid::new_v4();
    app.register(json!({
        "id": id,
        "owner_uid": OWNER,
        "messages": support::transcript(vec![
            call("call_1", "update_page_metadata", "{}"),
            call("call_2", "read_page", "{}"),
            call("call_3", TOOL, "{}"),
        ]),
        "tools": [
            {"name": "update_page_metadata", "effect": "write"},
            {"name": "read_page", "effect": "read"},
            {"name": TOOL, "effect": "read"},
        ],
    }))
    .await;
    let page = app.get(&format!("/v1/approvals?acting_uid={OWNER}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let marks: Vec<(String, bool)> = page.body["items"][0]["turn"]["pending_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            (
                call["id"].as_str().unwrap().to_owned(),
                call["approvable"] == true,
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            ("call_1".to_owned(), false),
            ("call_2".to_owned(), true),
            ("call_3".to_owned(), true)
        ]
    );
    // Without a list, every call may be approved.
    put_user(&app, OWNER, false, false, Value::Null).await;
    let page = app.get(&format!("/v1/approvals?acting_uid={OWNER}")).await;
    for call in page.body["items"][0]["turn"]["pending_calls"]
        .as_array()
        .unwrap()
    {
        assert_eq!(call["approvable"], true, "{call}");
    }
}

/// An app whose tool `TOOL` is a read, run by a fake executor that answers `ok`.
async fn app_with_a_read_tool(pool: sqlx::PgPool) -> (TestApp, crate::executors::FakeExecutor) {
    use approval_resume::executor::Executors;
    use approval_resume::vocabulary::Effect;
    let fake = crate::executors::FakeExecutor::start().await;
    let mut executor = fake.executor("ok");
    executor.effect = Effect::Read;
    let tools = std::collections::HashMap::from([(TOOL.to_owned(), executor)]);
    let options = support::Options {
        executors: Executors::from_tools(tools),
        ..support::Options::default()
    };
    (support::app_with(pool, options).await, fake)
}

/// Approves the one call of run `id` as `uid`, with `arguments` instead of the proposed `{}` when given.
async fn approve_one(
    app: &TestApp,
    id: Uuid,
    digest: &str,
    uid: Option<i64>,
    arguments: Option<&str>,
) -> support::Answer {
    let body = json!({"decider_uid": uid, "turn_digest": digest, "calls": [
        {"call_id": "call_1", "approved": true, "arguments": arguments},
    ]});
    app.post(&format!("/v1/runs/{id}/decision"), body).await
}

#[tokio::test]
async fn editing_a_read_call_needs_the_right_to_approve_a_write_and_nobody_may_edit() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, fake) = app_with_a_read_tool(pool.clone()).await;
    let edited = Some(r#"{"path": "/etc/shadow"}"#);
    // The owner and an approver of others' runs, each with an empty list: they may approve reads only.
    put_user(&app, OWNER, false, false, json!([])).await;
    put_user(&app, OTHER, false, true, json!([])).await;
    for (uid, code) in [
        (Some(OWNER), "tool_not_approvable"),
        (Some(OTHER), "tool_not_approvable"),
        (None, "anonymous_edit"),
    ] {
        let (id, digest) = run_with(&app, "read").await;
        let refused = approve_one(&app, id, &digest, uid, edited).await;
        assert_problem(&refused, StatusCode::FORBIDDEN, code);
        assert_nothing_recorded(&pool, id).await;
        // The same approval without the edit is a plain read, which the gate lets through.
        let approved = approve_one(&app, id, &digest, uid, None).await;
        assert_eq!(
            approved.status,
            StatusCode::OK,
            "{uid:?}: {}",
            approved.body
        );
    }
    // Every call the executor ran had the proposed arguments: no edit ever reached it.
    let received = fake.received();
    assert_eq!(received.len(), 3);
    assert!(
        received
            .iter()
            .all(|request| !request.body.to_string().contains("shadow")),
        "{received:?}"
    );
    // A user whose list names the tool, or who has no list, may edit it.
    put_user(&app, OWNER, false, false, json!([TOOL])).await;
    put_user(&app, OTHER, false, true, Value::Null).await;
    for uid in [OWNER, OTHER] {
        let (id, digest) = run_with(&app, "read").await;
        let approved = approve_one(&app, id, &digest, Some(uid), edited).await;
        assert_eq!(approved.status, StatusCode::OK, "{uid}: {}", approved.body);
        assert_eq!(approved.body["decision"]["calls"][0]["edited"], true);
    }
}
