//! Approval links made and revoked through the API (docs/design.md §20): `POST /v1/runs/{id}/links` for a person who
//! may decide the run, refused for anyone else, for another tenant's run, a run that no longer waits, a service
//! without PUBLIC_URL and a key without `decisions:write`; `DELETE` ends a link. The helpers here (people, a waiting
//! run, a link's page, a form post) serve `link_page` and `notify` too.

use std::time::Duration;

use approval_resume::approval_links::LinkSettings;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, Answer, Options, PUBLIC_URL, TestApp, assert_nothing_recorded, assert_problem, call,
    transcript,
};

pub const OWNER: i64 = 7;
pub const APPROVER: i64 = 8;
pub const STRANGER: i64 = 9;
pub const ADMIN: i64 = 10;
pub const DISABLED: i64 = 11;

/// Puts the owner, an approver (`can_approve_others`), a plain user, an admin and a disabled admin.
pub async fn put_people(app: &TestApp) {
    app.user(OWNER, false, false, false).await;
    app.user(APPROVER, false, true, false).await;
    app.user(STRANGER, false, false, false).await;
    app.user(ADMIN, true, false, false).await;
    app.user(DISABLED, true, false, true).await;
}

/// An app over `pool` with [`put_people`] in it.
pub async fn people(pool: PgPool) -> TestApp {
    let app = support::app(pool).await;
    put_people(&app).await;
    app
}

/// A registration of the owner's run whose one call is the write tool `edit_page`, run by the worker (so that an
/// approval releases it and no executor is needed), with `extra` members merged in.
pub fn write_run(id: Uuid, extra: Value) -> Value {
    let mut body = json!({
        "id": id,
        "owner_uid": OWNER,
        "messages": transcript(vec![call("call_1", "edit_page", r#"{"page": 12}"#)]),
        "tools": [{"name": "edit_page", "effect": "write", "executor": "worker"}],
    });
    for (name, value) in extra.as_object().unwrap() {
        body[name] = value.clone();
    }
    body
}

/// Registers a waiting [`write_run`] and returns its id.
pub async fn waiting_run(app: &TestApp) -> Uuid {
    let id = Uuid::new_v4();
    let run = app.register(write_run(id, json!({}))).await;
    assert_eq!(run["status"], "waiting_for_approval", "{run}");
    id
}

/// `POST /v1/runs/{run_id}/links` for `uid` with `key`.
pub async fn make_link(app: &TestApp, key: &str, run_id: Uuid, uid: i64) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/runs/{run_id}/links"),
        Some(key),
        Some(json!({"uid": uid})),
    )
    .await
}

/// A link for `uid` made with the admin key, asserted 201; the answer's body.
pub async fn made_link(app: &TestApp, run_id: Uuid, uid: i64) -> Value {
    let made = make_link(app, &app.admin_key, run_id, uid).await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    made.body
}

/// The path of a link's page below the service's root: its URL without PUBLIC_URL.
pub fn page_path(link: &Value) -> String {
    let url = link["url"].as_str().unwrap();
    url.strip_prefix(PUBLIC_URL)
        .unwrap_or_else(|| panic!("a link's URL starts with PUBLIC_URL: {url}"))
        .to_owned()
}

/// The page path of a fresh link for `uid` to `run_id`.
pub async fn link_for(app: &TestApp, run_id: Uuid, uid: i64) -> String {
    page_path(&made_link(app, run_id, uid).await)
}

/// `GET` of a page, as a browser (or a mail scanner) would: no credential.
pub async fn open(app: &TestApp, path: &str) -> Answer {
    app.call(Method::GET, path, None, None).await
}

/// A form post to a page with `Origin: origin` (none when `None`) and the urlencoded `form`.
pub async fn submit(app: &TestApp, path: &str, origin: Option<&str>, form: &str) -> Answer {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header("content-type", "application/x-www-form-urlencoded");
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    app.send(request.body(Body::from(form.to_owned())).unwrap())
        .await
}

/// Opens the page, reads its nonce and posts `action` from the page's origin.
pub async fn decide_on_page(app: &TestApp, path: &str, action: &str) -> Answer {
    let page = open(app, path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", html(&page));
    let nonce = nonce_of(&html(&page));
    submit(
        app,
        path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action={action}"),
    )
    .await
}

/// A page's HTML with the escapes askama writes undone, so that texts can be compared as written.
pub fn html(answer: &Answer) -> String {
    String::from_utf8_lossy(&answer.bytes)
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&#60;", "<")
        .replace("&gt;", ">")
        .replace("&#62;", ">")
        .replace("&amp;", "&")
        .replace("&#38;", "&")
}

/// The value of the page's hidden `nonce` input.
pub fn nonce_of(html: &str) -> String {
    let marker = r#"name="nonce" value=""#;
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("a nonce input in {html}"))
        + marker.len();
    let end = start + html[start..].find('"').unwrap();
    html[start..end].to_owned()
}

/// `PUT /v1/users/{uid}` with `body`, with the admin key.
pub async fn put_user(app: &TestApp, uid: i64, body: Value) -> Answer {
    app.call(
        Method::PUT,
        &format!("/v1/users/{uid}"),
        Some(&app.admin_key),
        Some(body),
    )
    .await
}

/// The run's status as its view shows it.
pub async fn status(app: &TestApp, run_id: Uuid) -> Value {
    app.get(&format!("/v1/runs/{run_id}")).await.body["status"].clone()
}

#[tokio::test]
async fn a_link_is_made_for_the_owner_an_approver_and_an_admin_with_its_id_url_and_expiry() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let mut urls = Vec::new();
    for uid in [OWNER, APPROVER, ADMIN] {
        let before = chrono::Utc::now();
        let link = made_link(&app, id, uid).await;
        assert!(
            Uuid::parse_str(link["id"].as_str().unwrap()).is_ok(),
            "{link}"
        );
        let url = link["url"].as_str().unwrap();
        let secret = url
            .strip_prefix(&format!("{PUBLIC_URL}/approve/{id}/"))
            .unwrap_or_else(|| panic!("the URL is PUBLIC_URL/approve/run/secret: {url}"));
        assert_eq!(secret.len(), 43, "{url}");
        assert!(
            secret
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'),
            "{url}"
        );
        // LINK_TTL_SECS defaults to a day.
        let expires_at: chrono::DateTime<chrono::Utc> =
            link["expires_at"].as_str().unwrap().parse().unwrap();
        let ttl = expires_at - before;
        assert!(
            (86_390..=86_410).contains(&ttl.num_seconds()),
            "{expires_at} is a day after {before}"
        );
        urls.push(url.to_owned());
    }
    urls.sort_unstable();
    urls.dedup();
    assert_eq!(urls.len(), 3, "each link has its own secret");
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn no_link_is_made_for_a_plain_user_a_disabled_user_or_an_unknown_uid() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    for (uid, code) in [
        (STRANGER, "decider_not_permitted"),
        (DISABLED, "decider_disabled"),
        (99, "unknown_decider"),
    ] {
        let refused = make_link(&app, &app.admin_key, id, uid).await;
        assert_problem(&refused, StatusCode::FORBIDDEN, code);
    }
    assert_problem(
        &make_link(&app, &app.admin_key, id, 0).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_uid",
    );
    assert_eq!(link_count(&app.pool).await, 0);
}

#[tokio::test]
async fn another_tenants_run_is_not_found_for_a_link() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let other = support::add_client(&app.pool, "other", "other", &["decisions:write"]).await;
    assert_problem(
        &make_link(&app, &other, id, OWNER).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_problem(
        &make_link(&app, &app.admin_key, Uuid::new_v4(), OWNER).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(link_count(&app.pool).await, 0);
}

#[tokio::test]
async fn a_run_denied_already_gets_no_link_and_the_answer_says_its_status() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    let run = app.register(write_run(id, json!({}))).await;
    let digest = run["turn"]["digest"].as_str().unwrap();
    let denied = app.decide(id, false, Some(OWNER), digest).await;
    assert_eq!(denied.status, StatusCode::OK, "{:?}", denied.body);
    let refused = make_link(&app, &app.admin_key, id, OWNER).await;
    assert_problem(&refused, StatusCode::CONFLICT, "not_awaiting_approval");
    assert_eq!(refused.body["run_status"], "resumed", "{:?}", refused.body);
    assert_eq!(link_count(&app.pool).await, 0);
}

#[tokio::test]
async fn a_service_without_public_url_makes_no_link() {
    let (_database, pool) = TestDatabase::create().await;
    let options = Options {
        links: LinkSettings {
            public_url: None,
            ttl: Duration::from_secs(86_400),
        },
        ..Options::default()
    };
    let app = support::app_with(pool, options).await;
    put_people(&app).await;
    let id = waiting_run(&app).await;
    assert_problem(
        &make_link(&app, &app.admin_key, id, OWNER).await,
        StatusCode::CONFLICT,
        "public_url_unset",
    );
    assert_eq!(link_count(&app.pool).await, 0);
}

#[tokio::test]
async fn a_key_without_decisions_write_makes_and_revokes_no_link() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let reader = app
        .client("reader", &["runs:read", "runs:write", "approvals:read"])
        .await;
    assert_problem(
        &make_link(&app, &reader, id, OWNER).await,
        StatusCode::FORBIDDEN,
        "missing_scope",
    );
    let link = made_link(&app, id, OWNER).await;
    let path = format!("/v1/runs/{id}/links/{}", link["id"].as_str().unwrap());
    assert_problem(
        &app.call(Method::DELETE, &path, Some(&reader), None).await,
        StatusCode::FORBIDDEN,
        "missing_scope",
    );
    assert_eq!(link_count(&app.pool).await, 1);
    assert_eq!(open(&app, &page_path(&link)).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_revoked_link_shows_revoked_and_its_form_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let link = made_link(&app, id, OWNER).await;
    let path = page_path(&link);
    // The nonce as the page showed it before the revocation: a form left open in a tab.
    let nonce = nonce_of(&html(&open(&app, &path).await));
    let delete = format!("/v1/runs/{id}/links/{}", link["id"].as_str().unwrap());
    for _ in 0..2 {
        let revoked = app
            .call(Method::DELETE, &delete, Some(&app.admin_key), None)
            .await;
        assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{:?}", revoked.body);
    }
    let page = open(&app, &path).await;
    assert_eq!(page.status, StatusCode::GONE);
    assert!(html(&page).contains("Link revoked"), "{}", html(&page));
    let posted = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=deny"),
    )
    .await;
    assert_eq!(posted.status, StatusCode::GONE, "{}", html(&posted));
    assert!(html(&posted).contains("Link revoked"), "{}", html(&posted));
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn another_tenants_link_and_an_unknown_link_are_not_found_for_a_delete() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let link = made_link(&app, id, OWNER).await;
    let other = support::add_client(&app.pool, "other", "other", &["decisions:write"]).await;
    let delete = format!("/v1/runs/{id}/links/{}", link["id"].as_str().unwrap());
    assert_problem(
        &app.call(Method::DELETE, &delete, Some(&other), None).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let unknown = format!("/v1/runs/{id}/links/{}", Uuid::new_v4());
    assert_problem(
        &app.call(Method::DELETE, &unknown, Some(&app.admin_key), None)
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // The link still works for its own tenant's person.
    let page = open(&app, &page_path(&link)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", html(&page));
    let revoked: i64 =
        sqlx::query_scalar("select count(*) from approval_links where revoked_at is not null")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(revoked, 0);
}

pub async fn link_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from approval_links")
        .fetch_one(pool)
        .await
        .unwrap()
}
