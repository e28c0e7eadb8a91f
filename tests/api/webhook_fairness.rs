//! Webhooks shared fairly between tenants (docs/design.md §17): a cap on subscriptions per tenant, delivery slots that
//! a tenant with many slow subscriptions cannot keep from another, and a backlog count that costs a bounded read per
//! subscription and stays right.

use std::time::{Duration, Instant};

use approval_resume::delivery::webhooks::Settings;
use approval_resume::delivery::webhooks::subscription::Policy;
use approval_resume::state::AppState;
use approval_resume::storage::webhooks::{BACKLOG_SCAN, CLAIM_PAGE, claim};
use axum::http::{Method, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp};
use crate::webhooks::{Receiver, Reply, deny_runs, dispatch, listed, settings, subscribe};

fn with_policy(app: &TestApp, policy: Policy) -> TestApp {
    app.with_state(AppState {
        webhooks: policy,
        ..app.state.clone()
    })
}

#[tokio::test]
async fn a_tenant_may_not_have_more_subscriptions_than_the_cap_and_others_are_not_counted() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_policy(
        &support::app(pool.clone()).await,
        Policy {
            max_per_tenant: 3,
            ..support::webhook_policy()
        },
    );
    let mut ids = Vec::new();
    for n in 0..3 {
        let (id, _) = subscribe(&app, &format!("http://127.0.0.1:9/{n}"), None).await;
        ids.push(id);
    }
    let refused = app
        .post("/v1/webhooks", json!({"url": "http://127.0.0.1:9/4"}))
        .await;
    support::assert_problem(&refused, StatusCode::CONFLICT, "too_many_subscriptions");
    assert!(refused.body["detail"].as_str().unwrap().contains('3'));
    assert_eq!(listed(&app).await.len(), 3);

    // Another tenant has a cap of its own.
    let other = support::add_client(&pool, "other", "elsewhere", &["webhooks:write"]).await;
    let theirs = app
        .call(
            Method::POST,
            "/v1/webhooks",
            Some(&other),
            Some(json!({"url": "http://127.0.0.1:9/theirs"})),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{:?}", theirs.body);

    // Removing one makes room again.
    let removed = app
        .call(
            Method::DELETE,
            &format!("/v1/webhooks/{}", ids[0]),
            Some(&app.admin_key),
            None,
        )
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    subscribe(&app, "http://127.0.0.1:9/again", None).await;
}

#[tokio::test]
async fn creations_at_once_never_pass_the_cap_together() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_policy(
        &support::app(pool.clone()).await,
        Policy {
            max_per_tenant: 2,
            ..support::webhook_policy()
        },
    );
    let creations = (0..8).map(|n| {
        let app = &app;
        async move {
            app.post(
                "/v1/webhooks",
                json!({"url": format!("http://127.0.0.1:9/{n}")}),
            )
            .await
            .status
        }
    });
    let statuses = futures_util::future::join_all(creations).await;
    let created = statuses
        .iter()
        .filter(|status| **status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 2, "{statuses:?}");
    assert_eq!(listed(&app).await.len(), 2);
}

/// A client of its own tenant `fast`, with a user 7, registering and denying runs.
struct OtherTenant<'a> {
    app: &'a TestApp,
    key: String,
}

impl<'a> OtherTenant<'a> {
    async fn new(app: &'a TestApp) -> OtherTenant<'a> {
        let key = support::add_client(&app.pool, "fast", "fast", support::ALL_SCOPES).await;
        let user = app
            .call(
                Method::PUT,
                "/v1/users/7",
                Some(&key),
                Some(
                    json!({"username": "fast7", "is_admin": false, "can_approve_others": false,
                            "disabled": false}),
                ),
            )
            .await;
        assert_eq!(user.status, StatusCode::OK, "{:?}", user.body);
        OtherTenant { app, key }
    }

    async fn subscribe(&self, url: &str) {
        let answer = self
            .app
            .call(
                Method::POST,
                "/v1/webhooks",
                Some(&self.key),
                Some(json!({"url": url})),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    }

    async fn deny_runs(&self, count: usize) {
        for _ in 0..count {
            let id = Uuid::new_v4();
            let run = self
                .app
                .call(
                    Method::POST,
                    "/v1/runs",
                    Some(&self.key),
                    Some(support::run_body(id, 7)),
                )
                .await;
            assert_eq!(run.status, StatusCode::CREATED, "{:?}", run.body);
            let digest = run.body["turn"]["digest"].as_str().unwrap();
            let decided = self
                .app
                .call(
                    Method::POST,
                    &format!("/v1/runs/{id}/decision"),
                    Some(&self.key),
                    Some(json!({"approved": false, "decider_uid": 7, "turn_digest": digest})),
                )
                .await;
            assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
        }
    }
}

#[tokio::test]
async fn a_tenant_with_many_slow_subscriptions_cannot_starve_another_tenant_s_deliveries() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    // Tenant `default`: ten subscriptions to a receiver that takes 300 ms per request, each with 40 events waiting
    // (about six seconds of sending for each, alone).
    let slow = Receiver::start(|_| Reply::After(Duration::from_millis(300), 204)).await;
    for _ in 0..10 {
        subscribe(&app, &slow.url, None).await;
    }
    deny_runs(&app, 20).await;
    // Tenant `fast`: one subscription, created last (so the longest due goes first would take it last).
    let fast = Receiver::start(|_| Reply::Status(204)).await;
    let other = OtherTenant::new(&app).await;
    other.subscribe(&fast.url).await;
    // One slot: a slot kept for as long as events keep coming, or claims by the longest due alone, leave the fast
    // tenant waiting behind every slow subscription.
    let _dispatcher = dispatch(
        &pool,
        Settings {
            concurrency: 1,
            requests_per_subscription: 2,
            lease: Duration::from_secs(6),
            limits: approval_resume::delivery::webhooks::deliver::Limits {
                timeout: Duration::from_secs(2),
                ..settings().limits
            },
            max_hold: Duration::from_millis(500),
            ..settings()
        },
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while slow.received().is_empty() {
        assert!(Instant::now() < deadline, "the slow tenant got nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    other.deny_runs(5).await;
    let got = fast.wait_for(10, Duration::from_secs(4)).await;
    assert_eq!(
        got.len(),
        10,
        "the fast tenant got {} of its 10 events within {:?}; the slow one {} meanwhile",
        got.len(),
        started.elapsed(),
        slow.received().len()
    );
    // The slow tenant still gets its events too.
    let before = slow.received().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(slow.received().len() > before);
}

#[tokio::test]
async fn the_backlog_counts_each_subscription_s_types_exactly_up_to_its_bound() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (all, _) = subscribe(&app, "http://127.0.0.1:9/all", None).await;
    let (resumed, _) = subscribe(&app, "http://127.0.0.1:9/resumed", Some(&["run.resumed"])).await;
    let runs = deny_runs(&app, 3).await;
    let backlog = |list: &[serde_json::Value], id: &str| {
        let subscription = list.iter().find(|s| s["id"] == id).unwrap();
        (
            subscription["backlog"].as_i64().unwrap(),
            subscription["backlog_capped"].as_bool().unwrap(),
        )
    };
    let list = listed(&app).await;
    assert_eq!(backlog(&list, &all), (6, false));
    assert_eq!(backlog(&list, &resumed), (3, false));
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains("webhook_backlog_events{state=\"active\"} 9"),
        "{metrics}"
    );

    // Far more events than the bound past both cursors, none of them `run.resumed`.
    sqlx::query(
        "insert into events (tenant, run_id, type, data)
         select 'default', $1, 'run.waiting', '{}' from generate_series(1, $2)",
    )
    .bind(runs[0])
    .bind(BACKLOG_SCAN as i32 + 50)
    .execute(&pool)
    .await
    .unwrap();
    let list = listed(&app).await;
    assert_eq!(backlog(&list, &all), (BACKLOG_SCAN, true));
    // Its three come before the bound; whatever lies past it is not read.
    assert_eq!(backlog(&list, &resumed), (3, true));
    let metrics = support::metrics(&app).await;
    assert!(
        metrics.contains(&format!(
            "webhook_backlog_events{{state=\"active\"}} {}",
            BACKLOG_SCAN + 3
        )),
        "{metrics}"
    );
}

/// Inserts `count` events of `kind` for the default tenant's run `run`, each in a transaction of its own order.
async fn insert_events(pool: &sqlx::PgPool, run: Uuid, kind: &str, count: i64) {
    sqlx::query(
        "insert into events (tenant, run_id, type, data)
         select 'default', $1, $2, '{}' from generate_series(1, $3)",
    )
    .bind(run)
    .bind(kind)
    .bind(count)
    .execute(pool)
    .await
    .unwrap();
}

/// The subscription's cursor: the id of the last event passed.
async fn cursor_id(pool: &sqlx::PgPool, subscription: &str) -> i64 {
    sqlx::query_scalar("select cursor_id from webhook_subscriptions where id = $1::uuid")
        .bind(subscription)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_claim_passes_a_page_of_events_of_other_types_and_the_first_of_the_subscription_s_types_is_still_claimed()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let runs = deny_runs(&app, 1).await;
    // Subscribed after the run's events, to a type none of the next events is of.
    let (expired, _) = subscribe(&app, "http://127.0.0.1:9/expired", Some(&["run.expired"])).await;
    let last: i64 = sqlx::query_scalar("select max(id) from events")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(cursor_id(&pool, &expired).await <= last);
    insert_events(&pool, runs[0], "run.waiting", 2 * CLAIM_PAGE + 10).await;
    insert_events(&pool, runs[0], "run.expired", 1).await;
    let claim = || async {
        claim(
            &app.state.pool,
            app.state.pool.sealer(),
            Uuid::new_v4(),
            Duration::from_secs(30),
            0,
            16,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|claimed| (claimed.id.to_string(), claimed.cursor.id))
        .collect::<Vec<_>>()
    };

    // Each claim reads one page past the cursor, finds none of its types there and passes them, so that the next
    // claim does not read them again; a page holding one of its types claims it, cursor unmoved.
    assert_eq!(claim().await, []);
    assert_eq!(cursor_id(&pool, &expired).await, last + CLAIM_PAGE);
    assert_eq!(claim().await, []);
    assert_eq!(cursor_id(&pool, &expired).await, last + 2 * CLAIM_PAGE);
    assert_eq!(claim().await, [(expired.clone(), last + 2 * CLAIM_PAGE)]);
    // Nothing of its types was passed: its delivery reads the `run.expired` event next.
    let pending: i64 = sqlx::query_scalar(
        "select count(*) from events e join webhook_subscriptions s on s.id = $1::uuid
         where e.tenant = s.tenant and e.id > s.cursor_id and e.type = any(s.event_types)",
    )
    .bind(&expired)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(pending, 1);
}
