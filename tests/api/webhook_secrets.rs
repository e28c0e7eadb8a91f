//! Webhook signing secrets (docs/design.md §17, §11): sealed like payloads under ENCRYPTION_KEYS, counted by `keys
//! status` and re-sealed by `keys rotate`, still signing when stored clear before keys were set; and rotated, through
//! the API and the subcommand, with the old secret signing beside the new one until its overlap ends.

use std::time::Duration;

use approval_resume::storage::Database;
use axum::http::{Method, StatusCode};
use serde_json::json;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::encryption::{OLD_KEYS, command, with_keys};
use crate::support;
use crate::webhooks::{
    Received, Receiver, Reply, deny_runs, dispatch, dispatch_on, listed, settings, subscribe,
    verify,
};

const NEW_KEY: &str = "new:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

/// Whether `request` verifies with `secret` (the Standard Webhooks library accepts it if any signature matches).
fn verifies(secret: &str, request: &Received) -> bool {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&request.body, &request.headers)
        .is_ok()
}

/// The stored columns of a subscription's secrets: (secret, secret_sealed, previous_secret, previous_sealed).
async fn stored(
    pool: &sqlx::PgPool,
    id: &str,
) -> (
    Option<String>,
    Option<Vec<u8>>,
    Option<String>,
    Option<Vec<u8>>,
) {
    sqlx::query_as(
        "select secret, secret_sealed, previous_secret, previous_secret_sealed
         from webhook_subscriptions where id = $1::uuid",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn secrets_are_sealed_with_keys_counted_and_resealed_by_keys_and_a_clear_one_still_signs() {
    let (database, pool) = TestDatabase::create().await;
    let plain = support::app(pool.clone()).await;
    let clear_receiver = Receiver::start(|_| Reply::Status(204)).await;
    let sealed_receiver = Receiver::start(|_| Reply::Status(204)).await;
    // One stored before keys were set, one after.
    let (clear_id, clear_secret) = subscribe(&plain, &clear_receiver.url, None).await;
    let keyed = with_keys(&plain, OLD_KEYS);
    let (sealed_id, sealed_secret) = subscribe(&keyed, &sealed_receiver.url, None).await;
    let (secret, sealed, ..) = stored(&pool, &clear_id).await;
    assert_eq!(secret.as_deref(), Some(clear_secret.as_str()));
    assert!(sealed.is_none());
    let (secret, sealed, ..) = stored(&pool, &sealed_id).await;
    assert!(secret.is_none(), "a secret stored in clear under keys");
    let sealed = String::from_utf8_lossy(&sealed.unwrap()).into_owned();
    assert!(
        !sealed.contains(&sealed_secret["whsec_".len()..][..16]),
        "the sealed column holds the secret"
    );

    let status = command(&database, OLD_KEYS, &["keys", "status"]).await;
    let line = |status: &str, key: &str| {
        status
            .lines()
            .find(|line| line.starts_with("webhook_subscriptions.secret ") && line.contains(key))
            .map(|line| line.split_whitespace().last().unwrap().to_owned())
    };
    assert_eq!(line(&status, "(clear)").as_deref(), Some("1"), "{status}");
    assert_eq!(line(&status, " old ").as_deref(), Some("1"), "{status}");

    // Both sign with the keys configured.
    let _dispatcher = dispatch_on(
        Database::direct(pool.clone()).with_sealer(keyed.state.pool.sealer().clone()),
        settings(),
    );
    deny_runs(&keyed, 1).await;
    for (receiver, secret) in [
        (&clear_receiver, &clear_secret),
        (&sealed_receiver, &sealed_secret),
    ] {
        let got = receiver.wait_for(2, Duration::from_secs(10)).await;
        assert_eq!(got.len(), 2);
        for request in &got {
            verify(secret, request);
        }
    }

    // `keys rotate` moves both under the new key; the old key can go.
    let both = format!("{NEW_KEY},{OLD_KEYS}");
    command(&database, &both, &["keys", "rotate"]).await;
    let status = command(&database, &both, &["keys", "status"]).await;
    assert_eq!(line(&status, " new ").as_deref(), Some("2"), "{status}");
    assert_eq!(line(&status, "(clear)"), None, "{status}");
    assert_eq!(line(&status, " old "), None, "{status}");
    for id in [&clear_id, &sealed_id] {
        let (secret, sealed, ..) = stored(&pool, id).await;
        assert!(secret.is_none() && sealed.is_some());
    }
    drop(_dispatcher);
    let new_only = approval_resume::sealing::Sealer::parse(NEW_KEY).unwrap();
    let _dispatcher = dispatch_on(
        Database::direct(pool.clone()).with_sealer(new_only),
        settings(),
    );
    deny_runs(&keyed, 1).await;
    for (receiver, secret) in [
        (&clear_receiver, &clear_secret),
        (&sealed_receiver, &sealed_secret),
    ] {
        let got = receiver.wait_for(4, Duration::from_secs(10)).await;
        assert_eq!(got.len(), 4);
        for request in &got {
            verify(secret, request);
        }
    }
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_old_one_until_its_overlap_ends() {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_keys(&support::app(pool.clone()).await, OLD_KEYS);
    let receiver = Receiver::start(|_| Reply::Status(204)).await;
    let (id, old) = subscribe(&app, &receiver.url, None).await;

    let rotated = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": 3}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{:?}", rotated.body);
    let new = rotated.body["secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    assert_eq!(rotated.body["id"], id.as_str());
    let expires = rotated.body["previous_secret_expires_at"].as_str().unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(expires).unwrap();
    let left = expires.signed_duration_since(chrono::Utc::now());
    assert!(
        left > chrono::Duration::seconds(1) && left <= chrono::Duration::seconds(3),
        "{left}"
    );
    // Both stored sealed, neither shown again.
    let (secret, sealed, previous, previous_sealed) = stored(&pool, &id).await;
    assert!(
        secret.is_none() && sealed.is_some() && previous.is_none() && previous_sealed.is_some()
    );
    let list = serde_json::to_string(&listed(&app).await).unwrap();
    assert!(!list.contains(&new) && !list.contains(&old), "{list}");

    let _dispatcher = dispatch_on(app.state.pool.clone(), settings());
    deny_runs(&app, 1).await;
    let during = receiver.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(during.len(), 2);
    for request in &during {
        assert!(verifies(&new, request), "the new secret verifies");
        assert!(
            verifies(&old, request),
            "the old secret verifies during the overlap"
        );
    }

    // Past the overlap, the old secret no longer verifies.
    tokio::time::sleep_until(tokio::time::Instant::now() + left.to_std().unwrap()).await;
    deny_runs(&app, 1).await;
    let after = receiver.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(after.len(), 4);
    for request in &after[2..] {
        assert!(verifies(&new, request));
        assert!(!verifies(&old, request), "the old secret retired");
        assert_eq!(request.header("webhook-signature").split(' ').count(), 1);
    }
}

/// A subscription an instance holds (its events keep coming) is signed with the secrets as they stand when a request
/// is sent: a rotation committed while it is held signs the very next requests, not only after the holder lets go.
#[tokio::test]
async fn a_rotation_while_the_subscription_is_held_signs_the_next_requests_with_the_new_secret() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(204)).await;
    let (id, old) = subscribe(&app, &receiver.url, None).await;
    let _dispatcher = dispatch_on(app.state.pool.clone(), settings());
    deny_runs(&app, 1).await;
    let before = receiver.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|request| verifies(&old, request)));

    // At once, while the delivery still holds the subscription (it lets go after a quiet second).
    let rotated = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": 600}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{:?}", rotated.body);
    let new = rotated.body["secret"].as_str().unwrap().to_owned();
    deny_runs(&app, 1).await;
    let after = receiver.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(after.len(), 4);
    for request in &after[2..] {
        assert!(
            verifies(&new, request),
            "a request sent after the rotation is signed with the new secret"
        );
        assert!(
            verifies(&old, request),
            "and with the old one during the overlap"
        );
    }
}

#[tokio::test]
async fn a_rotation_is_refused_past_the_longest_overlap_and_for_another_tenant_s_subscription() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let (id, _) = subscribe(&app, "http://127.0.0.1:9/x", None).await;
    let most = support::webhook_policy().secret_overlap.as_secs();
    let too_long = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": most + 1}),
        )
        .await;
    support::assert_problem(
        &too_long,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_overlap",
    );
    let negative = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": -1}),
        )
        .await;
    support::assert_problem(
        &negative,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_overlap",
    );
    // An integer as JSON Schema reads one (the fuzz sent `1000000000.0`): taken, as for every integer member.
    let whole_number = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": 60.0}),
        )
        .await;
    assert_eq!(
        whole_number.status,
        StatusCode::OK,
        "{:?}",
        whole_number.body
    );
    let stranger = support::add_client(&pool, "stranger", "elsewhere", &["webhooks:write"]).await;
    for (path, key) in [
        (format!("/v1/webhooks/{id}/rotate-secret"), &stranger),
        (
            format!("/v1/webhooks/{}/rotate-secret", Uuid::new_v4()),
            &app.admin_key,
        ),
    ] {
        let answer = app
            .call(Method::POST, &path, Some(key), Some(json!({})))
            .await;
        support::assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    // Without a field: the longest overlap.
    let rotated = app
        .post(&format!("/v1/webhooks/{id}/rotate-secret"), json!({}))
        .await;
    assert_eq!(rotated.status, StatusCode::OK);
    assert!(rotated.body["previous_secret_expires_at"].is_string());
    // Zero: the old one retires at once.
    let rotated = app
        .post(
            &format!("/v1/webhooks/{id}/rotate-secret"),
            json!({"overlap_secs": 0}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK);
    assert!(rotated.body["previous_secret_expires_at"].is_null());
    let (_, _, previous, previous_sealed) = stored(&pool, &id).await;
    assert!(previous.is_none() && previous_sealed.is_none());
}

#[tokio::test]
async fn the_subcommand_rotates_a_secret_and_prints_the_new_one_once() {
    let (database, pool) = TestDatabase::create().await;
    let app = support::app(pool.clone()).await;
    let receiver = Receiver::start(|_| Reply::Status(204)).await;
    let (id, old) = subscribe(&app, &receiver.url, None).await;
    let printed = command(
        &database,
        OLD_KEYS,
        &["webhooks", "rotate-secret", &id, "--overlap-secs", "60"],
    )
    .await;
    let new = printed.trim();
    assert!(new.starts_with("whsec_") && new != old, "{printed}");
    assert_eq!(printed.lines().count(), 1);
    let (secret, sealed, _, previous_sealed) = stored(&pool, &id).await;
    assert!(secret.is_none() && sealed.is_some() && previous_sealed.is_some());

    let keyed = with_keys(&app, OLD_KEYS);
    let _dispatcher = dispatch_on(keyed.state.pool.clone(), settings());
    deny_runs(&keyed, 1).await;
    let got = receiver.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 2);
    for request in &got {
        assert!(verifies(new, request) && verifies(&old, request));
    }
    // Without the key the secret was sealed with, nothing goes unsigned: the delivery fails, saying why.
    drop(_dispatcher);
    let _plain = dispatch(&pool, settings());
    deny_runs(&app, 1).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(receiver.received().len(), 2);
    let listed = listed(&app).await;
    assert_eq!(
        listed[0]["last_error"],
        "the subscription's signing secret cannot be read"
    );
}
