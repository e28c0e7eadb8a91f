//! Remembered decisions racing (docs/design.md §18) over several instances of one database: a rule revoked while a
//! turn registers, a rule made while another instance registers a turn of the same run, rules of two people made
//! while the turn they cover registers, and one registration posted to two instances at once. Whatever the
//! interleaving, a turn is decided by rules at most once, or waits, and its events say which.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use futures::future::join;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::remembered_rules::{
    OWNER, body_with, event_types, next_turn, people, resumed_run, revoke, run_rule,
};
use crate::support::TestApp;

const ROUNDS: usize = 6;

async fn append_on(app: &TestApp, id: Uuid, tools: &[&str]) -> crate::support::Answer {
    app.post(&format!("/v1/runs/{id}/turns"), next_turn(tools))
        .await
}

/// The rule ids the approval event of turn 1 names, one per call (none: the turn was not decided).
async fn rules_of_turn_one(pool: &PgPool, id: Uuid) -> Vec<Value> {
    let calls: Option<Value> = sqlx::query_scalar(
        "select calls from approval_events where run_id = $1 and turn_index = 1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
    .unwrap();
    calls
        .map(|calls| {
            calls
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["rule_id"].clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Turn 1 of `id` as its events tell it: decided by its rules (`run.resumed`, no `run.waiting`) or waiting.
async fn turn_one_decided(pool: &PgPool, id: Uuid) -> bool {
    let events = event_types(pool, id).await;
    // Turn 0: waiting, then resumed by the owner's denial.
    let turn_one: Vec<&str> = events[2..]
        .iter()
        .map(String::as_str)
        .filter(|kind| kind.starts_with("run."))
        .collect();
    match turn_one.as_slice() {
        ["run.waiting"] => false,
        ["run.resumed"] => true,
        other => panic!("turn 1 of {id} has the events {other:?}"),
    }
}

#[tokio::test]
async fn a_rule_revoked_while_a_turn_registers_decides_it_only_if_that_turn_committed_first() {
    let (_database, pool) = TestDatabase::create().await;
    let first = people(pool).await;
    let second = first.second_instance();
    for _ in 0..ROUNDS {
        let id = resumed_run(&first).await;
        let rule = run_rule(
            &first,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
        )
        .await;
        let (revoked, appended) = join(
            revoke(&first, &rule.body["id"], &first.admin_key, "?revoked_by=7"),
            append_on(&second, id, &["edit_page"]),
        )
        .await;
        assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
        assert_eq!(appended.status, StatusCode::OK, "{:?}", appended.body);
        let decided = turn_one_decided(&first.pool, id).await;
        assert_eq!(
            decided,
            appended.body["status"] == "resumed",
            "{:?}",
            appended.body
        );
        if decided {
            assert_eq!(
                rules_of_turn_one(&first.pool, id).await,
                [rule.body["id"].clone()]
            );
        }
        // Once the revocation answered, no turn uses the rule.
        let digest = appended.body["turn"]["digest"].as_str().unwrap().to_owned();
        if !decided {
            first.decide(id, false, Some(OWNER), &digest).await;
        }
        let later = first
            .post(
                &format!("/v1/runs/{id}/turns"),
                json!({"messages": [
                    {"role": "user", "content": "later"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        crate::support::call("later_0", "edit_page", "{}"),
                    ]},
                ]}),
            )
            .await;
        assert_eq!(
            later.body["status"], "waiting_for_approval",
            "{:?}",
            later.body
        );
    }
}

#[tokio::test]
async fn a_revocation_waits_for_the_turn_that_holds_its_rule_to_commit() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = resumed_run(&app).await;
    let rule = run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
    )
    .await;
    // A registration's read of the rules, held open as a registration holds it until it commits.
    let mut registering = app.pool.begin().await.unwrap();
    let held = approval_resume::storage::remembered_rules::live_for_turn(
        &mut registering,
        app.state.pool.sealer(),
        "default",
        Some(id),
        OWNER,
        &["edit_page"],
    )
    .await
    .unwrap();
    assert_eq!(held.len(), 1);
    let other = app.second_instance();
    let rule_id = rule.body["id"].clone();
    let revocation = tokio::spawn(async move {
        revoke(&other, &rule_id, &other.admin_key.clone(), "?revoked_by=7").await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !revocation.is_finished(),
        "the revocation answered while a turn held its rule"
    );
    registering.commit().await.unwrap();
    let revoked = revocation.await.unwrap();
    assert_eq!(revoked.status, StatusCode::OK, "{:?}", revoked.body);
}

#[tokio::test]
async fn a_rule_made_while_another_instance_registers_a_turn_of_the_run_decides_it_whole_or_not_at_all()
 {
    let (_database, pool) = TestDatabase::create().await;
    let first = people(pool).await;
    let second = first.second_instance();
    let mut outcomes = (0, 0);
    for _ in 0..ROUNDS {
        let id = resumed_run(&first).await;
        let (made, appended) = join(
            run_rule(
                &first,
                id,
                json!({"created_by": OWNER, "tool": "edit_page", "verdict": "deny"}),
            ),
            append_on(&second, id, &["edit_page"]),
        )
        .await;
        assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
        assert_eq!(appended.status, StatusCode::OK, "{:?}", appended.body);
        let decided = turn_one_decided(&first.pool, id).await;
        assert_eq!(
            decided,
            appended.body["status"] == "resumed",
            "{:?}",
            appended.body
        );
        if decided {
            assert_eq!(
                rules_of_turn_one(&first.pool, id).await,
                [made.body["id"].clone()]
            );
            outcomes.0 += 1;
        } else {
            outcomes.1 += 1;
        }
    }
    assert_eq!(outcomes.0 + outcomes.1, ROUNDS);
}

#[tokio::test]
async fn rules_of_two_people_made_while_their_turn_registers_never_decide_it() {
    let (_database, pool) = TestDatabase::create().await;
    let first = people(pool).await;
    let (second, third) = (first.second_instance(), first.second_instance());
    for _ in 0..ROUNDS {
        let id = resumed_run(&first).await;
        let owner = run_rule(
            &first,
            id,
            json!({"created_by": OWNER, "tool": "edit_page", "verdict": "approve"}),
        );
        let approver = run_rule(
            &second,
            id,
            json!({"created_by": 8, "tool": "send_mail", "verdict": "approve"}),
        );
        let appended = append_on(&third, id, &["edit_page", "send_mail"]);
        let ((owner, approver), appended) = join(join(owner, approver), appended).await;
        assert_eq!(owner.status, StatusCode::CREATED, "{:?}", owner.body);
        assert_eq!(approver.status, StatusCode::CREATED, "{:?}", approver.body);
        assert_eq!(
            appended.body["status"], "waiting_for_approval",
            "{:?}",
            appended.body
        );
        assert!(!turn_one_decided(&first.pool, id).await);
    }
}

#[tokio::test]
async fn one_registration_posted_to_two_instances_at_once_is_decided_by_its_rules_once() {
    let (_database, pool) = TestDatabase::create().await;
    let first = people(pool).await;
    let second = first.second_instance();
    let made = first
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": "send_mail", "verdict": "deny",
                   "expires_at": (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339()}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    for _ in 0..ROUNDS {
        let id = Uuid::new_v4();
        let body = body_with(id, &["send_mail"], false);
        let (a, b) = join(
            first.call(
                Method::POST,
                "/v1/runs",
                Some(&first.admin_key),
                Some(body.clone()),
            ),
            second.call(
                Method::POST,
                "/v1/runs",
                Some(&second.admin_key),
                Some(body),
            ),
        )
        .await;
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::CREATED],
            "{:?} {:?}",
            a.body,
            b.body
        );
        assert_eq!(a.body, b.body);
        assert_eq!(a.body["status"], "resumed", "{:?}", a.body);
        assert_eq!(event_types(&first.pool, id).await, ["run.resumed"]);
        let decisions: i64 =
            sqlx::query_scalar("select count(*) from approval_events where run_id = $1")
                .bind(id)
                .fetch_one(&first.pool)
                .await
                .unwrap();
        assert_eq!(decisions, 1);
    }
}
