//! The approvals inbox: who sees which waiting runs, filters, paging, and arguments only where privacy allows.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, call, transcript};

/// Registers a run of `owner` calling `tool` at the given privacy level; returns its id.
async fn waiting_run(app: &TestApp, owner: i64, tool: &str, privacy_level: &str) -> Uuid {
    let id = Uuid::new_v4();
    app.register(json!({
        "id": id,
        "owner_uid": owner,
        "messages": transcript(vec![call(&format!("call_{}", id.simple()), tool, r#"{"key": "sk-abcdefghijklmnopqrstuvwx0123"}"#)]),
        "privacy_level": privacy_level,
    }))
    .await;
    id
}

/// The same app with an inbox page allowed to load `bytes` of arguments (INBOX_ARGUMENTS_BYTES).
pub fn with_inbox_budget(app: &TestApp, bytes: usize) -> TestApp {
    use approval_resume::domain::limits::WorkLimits;
    use approval_resume::state::{AppState, Limits};

    app.with_state(AppState {
        limits: Limits {
            work: WorkLimits {
                inbox_arguments_bytes: bytes,
                ..WorkLimits::default()
            },
            ..app.state.limits
        },
        ..app.state.clone()
    })
}

async fn inbox(app: &TestApp, query: &str) -> support::Answer {
    app.get(&format!("/v1/approvals?{query}")).await
}

fn run_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["run_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_plain_user_sees_only_their_own_waiting_runs_and_an_approver_sees_all() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    app.user(8, false, false, false).await;
    app.user(9, false, true, false).await;
    let own = waiting_run(&app, 7, "update_page", "metadata").await;
    let other = waiting_run(&app, 8, "update_page", "metadata").await;
    let decided = waiting_run(&app, 7, "update_page", "metadata").await;
    let digest = app.get(&format!("/v1/runs/{decided}")).await.body["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        app.decide(decided, false, Some(7), &digest).await.status,
        StatusCode::OK
    );

    let mine = inbox(&app, "acting_uid=7").await;
    assert_eq!(mine.status, StatusCode::OK, "{:?}", mine.body);
    assert_eq!(run_ids(&mine.body), [own.to_string()]);
    let approver = inbox(&app, "acting_uid=9").await;
    assert_eq!(
        run_ids(&approver.body),
        [other.to_string(), own.to_string()],
        "newest first"
    );
}

#[tokio::test]
async fn the_inbox_filters_by_owner_and_by_tool() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    app.user(8, false, false, false).await;
    app.user(9, true, false, false).await;
    let a = waiting_run(&app, 7, "update_page", "metadata").await;
    let b = waiting_run(&app, 8, "send_mail", "metadata").await;
    assert_eq!(
        run_ids(&inbox(&app, "acting_uid=9&owner_uid=8").await.body),
        [b.to_string()]
    );
    assert_eq!(
        run_ids(&inbox(&app, "acting_uid=9&tool=update_page").await.body),
        [a.to_string()]
    );
    assert!(run_ids(&inbox(&app, "acting_uid=9&tool=nothing").await.body).is_empty());
}

#[tokio::test]
async fn paging_with_the_cursor_visits_every_run_once_newest_first() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let mut registered = Vec::new();
    for _ in 0..7 {
        registered.push(
            waiting_run(&app, 7, "update_page", "metadata")
                .await
                .to_string(),
        );
    }
    registered.reverse();
    let mut seen = Vec::new();
    let mut query = "acting_uid=7&limit=3".to_owned();
    for _ in 0..5 {
        let page = inbox(&app, &query).await;
        assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
        seen.extend(run_ids(&page.body));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => query = format!("acting_uid=7&limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, registered);
}

#[tokio::test]
async fn arguments_are_shown_only_where_the_privacy_level_allows() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    let metadata = waiting_run(&app, 7, "update_page", "metadata").await;
    let redacted = waiting_run(&app, 7, "update_page", "redacted").await;
    let full = waiting_run(&app, 7, "update_page", "full").await;
    let page = inbox(&app, "acting_uid=7").await.body;
    let arguments = |id: Uuid| {
        let item = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["run_id"] == id.to_string())
            .unwrap();
        item["turn"]["pending_calls"][0].get("arguments").cloned()
    };
    assert_eq!(arguments(metadata), None);
    let masked = arguments(redacted).unwrap();
    assert!(
        !masked
            .as_str()
            .unwrap()
            .contains("sk-abcdefghijklmnopqrstuvwx0123"),
        "{masked}"
    );
    assert_eq!(
        arguments(full),
        Some(json!(r#"{"key": "sk-abcdefghijklmnopqrstuvwx0123"}"#))
    );
}

#[tokio::test]
async fn an_unknown_or_disabled_acting_user_is_refused_naming_acting_uid() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(5, true, false, true).await;
    let unknown = inbox(&app, "acting_uid=404").await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::FORBIDDEN, "unknown_decider")
    );
    let disabled = inbox(&app, "acting_uid=5").await;
    assert_eq!(
        (disabled.status, disabled.code()),
        (StatusCode::FORBIDDEN, "decider_disabled")
    );
    // The inbox has no decider: the detail names the parameter that was sent.
    for refused in [unknown, disabled] {
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(detail.starts_with("acting_uid names"), "{detail}");
    }
}

#[tokio::test]
async fn bad_inbox_queries_are_answered_422() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    for query in [
        "",
        "acting_uid=7&limit=0",
        "acting_uid=7&limit=201",
        "acting_uid=7&cursor=nonsense",
        "acting_uid=x",
    ] {
        let answer = inbox(&app, query).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query}: {:?}",
            answer.body
        );
    }
    let without_scope = app.client("chat", &["runs:read"]).await;
    let refused = app
        .call(
            Method::GET,
            "/v1/approvals?acting_uid=7",
            Some(&without_scope),
            None,
        )
        .await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::FORBIDDEN, "missing_scope")
    );
}

#[tokio::test]
async fn a_page_loads_arguments_up_to_its_byte_budget_and_marks_the_rest_omitted() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(7, false, false, false).await;
    // Each call's arguments are 41 bytes; the page may load 100.
    let oldest = waiting_run(&app, 7, "update_page", "full").await;
    let hidden = waiting_run(&app, 7, "update_page", "metadata").await;
    let second = waiting_run(&app, 7, "update_page", "full").await;
    let newest = waiting_run(&app, 7, "update_page", "full").await;
    let budgeted = with_inbox_budget(&app, 100);

    let page = inbox(&budgeted, "acting_uid=7").await;
    assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
    assert_eq!(
        run_ids(&page.body),
        [newest, second, hidden, oldest].map(|id| id.to_string())
    );
    let call_of = |i: usize| page.body["items"][i]["turn"]["pending_calls"][0].clone();
    for shown in [call_of(0), call_of(1)] {
        assert_eq!(
            shown["arguments"],
            r#"{"key": "sk-abcdefghijklmnopqrstuvwx0123"}"#
        );
        assert!(shown.get("arguments_omitted").is_none(), "{shown}");
    }
    let metadata = call_of(2);
    assert!(
        metadata.get("arguments").is_none() && metadata.get("arguments_omitted").is_none(),
        "a run that shows no arguments spends none of the budget: {metadata}"
    );
    let omitted = call_of(3);
    assert!(omitted.get("arguments").is_none(), "{omitted}");
    assert_eq!(omitted["arguments_omitted"], true, "{omitted}");

    // The whole budget back: nothing is omitted.
    let page = inbox(&app, "acting_uid=7").await;
    assert_eq!(
        page.body["items"][3]["turn"]["pending_calls"][0]["arguments"],
        r#"{"key": "sk-abcdefghijklmnopqrstuvwx0123"}"#
    );
}
