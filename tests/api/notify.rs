//! A turn's `notify` (docs/design.md §20): at registration and at `POST /turns`, each named person with an address
//! who is enabled and may decide the run gets a row in the mail outbox for that turn; the answer says who is queued
//! and why each other person is not. At most ten people; a turn decided by remembered rules tells nobody. Users'
//! `email` is checked and shown back.

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::links::{APPROVER, DISABLED, OWNER, STRANGER, people, put_user, write_run};
use crate::support::{TestApp, assert_problem, call};

/// An approver with no address.
const QUIET_APPROVER: i64 = 12;

/// Gives `uid` the address `user{uid}@example.com`, keeping their rights.
async fn with_email(app: &TestApp, uid: i64, is_admin: bool, approver: bool, disabled: bool) {
    let put = put_user(
        app,
        uid,
        json!({"username": format!("user{uid}"), "is_admin": is_admin, "can_approve_others": approver,
               "disabled": disabled, "email": format!("user{uid}@example.com")}),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
}

/// The outbox's rows of `run_id`: (turn index, uid), in that order.
async fn outbox(pool: &PgPool, run_id: Uuid) -> Vec<(i32, i64)> {
    sqlx::query_as(
        "select turn_index, uid from mail_outbox where run_id = $1 order by turn_index, uid",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_registration_queues_mail_for_those_who_may_decide_and_have_an_address_and_says_why_not_for_the_rest()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    with_email(&app, OWNER, false, false, false).await;
    with_email(&app, APPROVER, false, true, false).await;
    with_email(&app, STRANGER, false, false, false).await;
    with_email(&app, DISABLED, true, false, true).await;
    app.user(QUIET_APPROVER, false, true, false).await;
    let id = Uuid::new_v4();
    let run = app
        .register(write_run(
            id,
            json!({"notify": [OWNER, APPROVER, QUIET_APPROVER, 99, STRANGER, DISABLED, OWNER]}),
        ))
        .await;
    assert_eq!(run["status"], "waiting_for_approval", "{run}");
    assert_eq!(
        run["notify"],
        json!({
            "queued": [OWNER, APPROVER],
            "skipped": [
                {"uid": QUIET_APPROVER, "reason": "no_email"},
                {"uid": 99, "reason": "unknown_user"},
                {"uid": STRANGER, "reason": "may_not_decide"},
                {"uid": DISABLED, "reason": "disabled"},
            ],
        }),
        "{run}"
    );
    assert_eq!(outbox(&app.pool, id).await, vec![(0, OWNER), (0, APPROVER)]);
    // The run's own view does not repeat it: only the answer of the request that named `notify`.
    let view = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(view.get("notify"), None, "{view}");
    // A replay of the registration answers the run as it is and queues nothing more: one mail per person and turn.
    let replay = app
        .post(
            "/v1/runs",
            write_run(
                id,
                json!({"notify": [OWNER, APPROVER, QUIET_APPROVER, 99, STRANGER, DISABLED, OWNER]}),
            ),
        )
        .await;
    assert_eq!(replay.status, StatusCode::OK, "{:?}", replay.body);
    assert_eq!(outbox(&app.pool, id).await, vec![(0, OWNER), (0, APPROVER)]);
}

#[tokio::test]
async fn a_registration_naming_eleven_people_is_refused_422_and_registers_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    let eleven: Vec<i64> = (1..=11).collect();
    let refused = app
        .post("/v1/runs", write_run(id, json!({"notify": eleven})))
        .await;
    assert_problem(
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "too_many_notified",
    );
    let refused = app
        .post("/v1/runs", write_run(id, json!({"notify": [OWNER, 0]})))
        .await;
    assert_problem(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_uid");
    let runs: i64 = sqlx::query_scalar("select count(*) from runs")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(runs, 0);
    assert_eq!(outbox(&app.pool, id).await, vec![]);
    // Ten is allowed.
    let ten: Vec<i64> = (1..=10).collect();
    let run = app.register(write_run(id, json!({"notify": ten}))).await;
    assert_eq!(
        run["notify"]["skipped"].as_array().unwrap().len(),
        10,
        "{run}"
    );
}

#[tokio::test]
async fn a_new_turn_with_notify_queues_mail_for_that_turn() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    with_email(&app, OWNER, false, false, false).await;
    with_email(&app, APPROVER, false, true, false).await;
    let id = Uuid::new_v4();
    let run = app.register(write_run(id, json!({}))).await;
    assert_eq!(run.get("notify"), None, "{run}");
    let digest = run["turn"]["digest"].as_str().unwrap();
    let denied = app.decide(id, false, Some(OWNER), digest).await;
    assert_eq!(denied.body["status"], "resumed", "{:?}", denied.body);
    assert_eq!(outbox(&app.pool, id).await, vec![]);

    let turn = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            json!({
                "messages": [
                    {"role": "user", "content": "again"},
                    {"role": "assistant", "content": null,
                     "tool_calls": [call("next_1", "edit_page", r#"{"page": 13}"#)]},
                ],
                "notify": [APPROVER, STRANGER],
            }),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    assert_eq!(
        turn.body["status"], "waiting_for_approval",
        "{:?}",
        turn.body
    );
    assert_eq!(
        turn.body["notify"],
        json!({"queued": [APPROVER], "skipped": [{"uid": STRANGER, "reason": "may_not_decide"}]}),
    );
    assert_eq!(outbox(&app.pool, id).await, vec![(1, APPROVER)]);
}

#[tokio::test]
async fn a_registration_decided_by_remembered_rules_queues_no_mail() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    with_email(&app, OWNER, false, false, false).await;
    with_email(&app, APPROVER, false, true, false).await;
    let expires_at = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let rule = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "edit_page", "verdict": "approve",
                   "expires_at": expires_at}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    let id = Uuid::new_v4();
    let run = app
        .register(write_run(id, json!({"notify": [OWNER, APPROVER]})))
        .await;
    assert_ne!(run["status"], "waiting_for_approval", "{run}");
    assert_eq!(run["decision"]["approved"], true, "{run}");
    assert_eq!(run.get("notify"), None, "{run}");
    assert_eq!(outbox(&app.pool, id).await, vec![]);
}

#[tokio::test]
async fn a_users_email_is_checked_and_shown_back() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let body = |email: Value| {
        json!({"username": "olivia", "is_admin": false, "can_approve_others": true, "disabled": false,
               "email": email})
    };
    for bad in [
        "olivia",
        "olivia@",
        "@example.com",
        " olivia@example.com",
        "Olivia <olivia@example.com>",
        &format!("{}@example.com", "o".repeat(250)),
    ] {
        let refused = put_user(&app, 20, body(json!(bad))).await;
        assert_problem(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_email");
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from backend_users where uid = 20")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    let put = put_user(&app, 20, body(json!("olivia@example.com"))).await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    assert_eq!(put.body["email"], "olivia@example.com");
    let cleared = put_user(&app, 20, body(Value::Null)).await;
    assert_eq!(cleared.status, StatusCode::OK, "{:?}", cleared.body);
    assert_eq!(cleared.body["email"], Value::Null);
}

#[tokio::test]
async fn the_sender_takes_a_due_mail_with_its_runs_source_to_name_it() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    with_email(&app, APPROVER, false, true, false).await;
    let labelled = Uuid::new_v4();
    let unlabelled = Uuid::new_v4();
    app.register(write_run(
        labelled,
        json!({"notify": [APPROVER], "source": "mcp:github"}),
    ))
    .await;
    app.register(write_run(unlabelled, json!({"notify": [APPROVER]})))
        .await;

    let due = approval_resume::storage::mail_outbox::take_due(&app.pool, 10, 300.0)
        .await
        .unwrap();
    let source_of = |run_id: Uuid| {
        due.iter()
            .find(|mail| mail.run_id == run_id)
            .map(|mail| mail.source.clone())
            .expect("a due mail of the run")
    };
    assert_eq!(source_of(labelled).as_deref(), Some("mcp:github"));
    assert_eq!(source_of(unlabelled), None);
}
