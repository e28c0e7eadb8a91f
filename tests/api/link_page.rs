//! The page of an approval link (docs/design.md §20): opening it decides nothing; it says whom it decides as, shows
//! the pending calls as that person's decision token would (arguments by the run's privacy level), offers only what
//! §4 lets them do, and is served uncached, unframed and without script. Its own form, from PUBLIC_URL's origin and
//! with its nonce, decides the turn once as the link's person, with the ADR-200 text the model then reads; any other
//! post, and any post on an unknown, expired or used link, records nothing.

use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::links::{
    ADMIN, APPROVER, OWNER, decide_on_page, html, link_for, made_link, nonce_of, open, page_path,
    people, put_user, status, submit, waiting_run, write_run,
};
use crate::remembered_rules;
use crate::support::{PUBLIC_URL, TestApp, assert_nothing_recorded, call, recorded, transcript};

/// The §3 text of the write call `edit_page` denied by the run's owner.
const OWNER_DENIED: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"edit_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

/// The same denied by another backend user.
const OTHER_DENIED: &str = "Error: approval_denied (decided_by: other_user). The approval for tool \"edit_page\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval; do not describe it as a system error.";

/// The same denied by the owner with "never in this conversation" (reason `skip`).
const OWNER_SKIP: &str = "Error: approval_denied (decided_by: run_owner, reason: skip). The approval for tool \"edit_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and do not propose this change again.";

/// A word put in a call's arguments, searched for in the page.
const CANARY: &str = "canary-5f1e9c-do-not-show";

/// Whether the page offers the button with this `action`.
fn offers(page: &str, action: &str) -> bool {
    page.contains(&format!(r#"name="action" value="{action}""#))
}

/// The text of the last message of the run's model input (the tool result of its one call).
async fn model_reads(app: &TestApp, run_id: Uuid) -> Value {
    let input = app.get(&format!("/v1/runs/{run_id}/model-input")).await;
    assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
    input.body["messages"].as_array().unwrap().last().unwrap()["content"].clone()
}

async fn link_used(app: &TestApp) -> bool {
    sqlx::query_scalar("select bool_or(used_at is not null) from approval_links")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn opening_a_link_three_times_decides_nothing_and_uses_nothing_up() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    for _ in 0..3 {
        let page = open(&app, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", html(&page));
        assert!(offers(&html(&page), "deny"), "{}", html(&page));
    }
    assert_nothing_recorded(&app.pool, id).await;
    assert_eq!(status(&app, id).await, "waiting_for_approval");
    assert!(!link_used(&app).await);
}

#[tokio::test]
async fn the_page_says_whom_it_decides_as_names_the_tool_and_carries_the_links_nonce() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, APPROVER).await;
    let page = html(&open(&app, &path).await);
    assert!(
        page.contains("You decide as <strong>user8</strong>."),
        "{page}"
    );
    assert!(page.contains("edit_page"), "{page}");
    assert!(page.contains(r#"<form method="post">"#), "{page}");
    let nonce = nonce_of(&page);
    let stored: String = sqlx::query_scalar("select nonce from approval_links")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(nonce, stored);
    for action in [
        "approve",
        "approve_for_conversation",
        "deny",
        "never_in_conversation",
    ] {
        assert!(offers(&page, action), "{action} in {page}");
    }
}

#[tokio::test]
async fn the_page_names_the_runs_source_among_its_facts_when_it_has_one() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let labelled = Uuid::new_v4();
    app.register(write_run(labelled, json!({"source": "mcp:github"})))
        .await;
    let page = html(&open(&app, &link_for(&app, labelled, OWNER).await).await);
    assert!(
        page.contains("<dt>Source</dt><dd><code>mcp:github</code></dd>"),
        "{page}"
    );
    let unlabelled = waiting_run(&app).await;
    let page = html(&open(&app, &link_for(&app, unlabelled, OWNER).await).await);
    assert!(!page.contains("<dt>Source</dt>"), "{page}");
}

#[tokio::test]
async fn every_page_is_served_uncached_unframed_without_a_referrer_and_without_script() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let form = open(&app, &path).await;
    let unknown = open(&app, &format!("/approve/{id}/{}", "A".repeat(43))).await;
    let refused = submit(&app, &path, None, "action=deny").await;
    assert_eq!(
        decide_on_page(&app, &path, "deny").await.status,
        StatusCode::SEE_OTHER
    );
    let outcome = open(&app, &path).await;
    for (page, expected) in [
        (&form, StatusCode::OK),
        (&unknown, StatusCode::GONE),
        (&refused, StatusCode::FORBIDDEN),
        (&outcome, StatusCode::OK),
    ] {
        assert_eq!(page.status, expected, "{}", html(page));
        let header = |name: &str| {
            page.headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_else(|| panic!("{name} on the {expected} page"))
                .to_owned()
        };
        assert!(header("content-type").starts_with("text/html"));
        assert_eq!(header("cache-control"), "no-store");
        assert_eq!(header("referrer-policy"), "same-origin");
        assert_eq!(header("x-frame-options"), "DENY");
        assert_eq!(header("x-content-type-options"), "nosniff");
        let policy = header("content-security-policy");
        for directive in [
            "default-src 'none'",
            "style-src http://approvals.test",
            "frame-ancestors 'none'",
            "form-action 'self'",
            "base-uri 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} in {policy}");
        }
        assert!(
            !html(page).to_ascii_lowercase().contains("<script"),
            "{}",
            html(page)
        );
    }
}

/// Registers a waiting run of the owner at `level` whose call's arguments hold [`CANARY`]; the page of the owner's
/// link to it.
async fn canary_page(app: &TestApp, level: &str) -> String {
    let id = Uuid::new_v4();
    let arguments = json!({"page": 12, "description": CANARY}).to_string();
    app.register(json!({
        "id": id,
        "owner_uid": OWNER,
        "privacy_level": level,
        "messages": transcript(vec![call("call_1", "edit_page", &arguments)]),
        "tools": [{"name": "edit_page", "effect": "write", "executor": "worker"}],
    }))
    .await;
    let path = link_for(app, id, OWNER).await;
    let page = open(app, &path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", html(&page));
    html(&page)
}

#[tokio::test]
async fn arguments_show_on_the_page_at_full_and_never_at_metadata() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let full = canary_page(&app, "full").await;
    assert!(full.contains(CANARY), "{full}");
    let metadata = canary_page(&app, "metadata").await;
    assert!(!metadata.contains(CANARY), "{metadata}");
    assert!(!metadata.contains("canary"), "{metadata}");
    assert!(metadata.contains("edit_page"), "{metadata}");
}

#[tokio::test]
async fn the_owners_deny_from_the_page_resumes_the_run_with_the_owners_text_and_the_page_then_says_so()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;

    let posted = decide_on_page(&app, &path, "deny").await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    assert_eq!(posted.headers["location"], "?decided");
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed", "{run}");
    assert_eq!(run["decision"]["decided_by"], "run_owner", "{run}");
    assert_eq!(run["decision"]["decider_uid"], OWNER, "{run}");
    assert_eq!(run["decision"]["approved"], false, "{run}");
    assert_eq!(model_reads(&app, id).await, OWNER_DENIED);
    let events = app.get(&format!("/v1/runs/{id}/events")).await;
    assert_eq!(
        events.body["approval_events"][0]["client_name"], "approval-link",
        "{:?}",
        events.body
    );
    assert!(link_used(&app).await);

    // The page the 303 leads to: the same URL with `?decided`.
    let page = open(&app, &format!("{path}?decided")).await;
    assert_eq!(page.status, StatusCode::OK);
    let page = html(&page);
    assert!(page.contains("Denied by you."), "{page}");
    assert!(page.contains(OWNER_DENIED), "{page}");
    assert!(!page.contains("<form"), "{page}");
}

#[tokio::test]
async fn a_deny_from_an_approvers_or_an_admins_link_is_another_users_with_that_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    for uid in [APPROVER, ADMIN] {
        let id = waiting_run(&app).await;
        let path = link_for(&app, id, uid).await;
        let posted = decide_on_page(&app, &path, "deny").await;
        assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
        let run = app.get(&format!("/v1/runs/{id}")).await.body;
        assert_eq!(run["status"], "resumed", "{run}");
        assert_eq!(run["decision"]["decided_by"], "other_user", "{run}");
        assert_eq!(run["decision"]["decider_uid"], uid, "{run}");
        assert_eq!(model_reads(&app, id).await, OTHER_DENIED);
        let page = html(&open(&app, &path).await);
        assert!(page.contains("Denied by you."), "{page}");
        assert!(page.contains(OTHER_DENIED), "{page}");
    }
}

#[tokio::test]
async fn a_second_submission_of_a_used_link_is_gone_and_changes_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    let deny = format!("nonce={nonce}&action=deny");
    let first = submit(&app, &path, Some(PUBLIC_URL), &deny).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER, "{}", html(&first));
    let after_first = recorded(&app.pool, id).await;
    let decision = app.get(&format!("/v1/runs/{id}")).await.body["decision"].clone();

    for action in ["deny", "approve"] {
        let again = submit(
            &app,
            &path,
            Some(PUBLIC_URL),
            &format!("nonce={nonce}&action={action}"),
        )
        .await;
        assert_eq!(again.status, StatusCode::GONE, "{}", html(&again));
        assert!(
            html(&again).contains("Link already used"),
            "{}",
            html(&again)
        );
    }
    assert_eq!(recorded(&app.pool, id).await, after_first);
    assert_eq!(
        app.get(&format!("/v1/runs/{id}")).await.body["decision"],
        decision
    );
}

#[tokio::test]
async fn the_owners_approve_from_the_page_releases_the_write_call_to_the_worker() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let posted = decide_on_page(&app, &path, "approve").await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "released", "{run}");
    assert_eq!(run["decision"]["approved"], true, "{run}");
    assert_eq!(run["decision"]["decided_by"], "run_owner", "{run}");
    let page = html(&open(&app, &path).await);
    assert!(page.contains("Approved by you."), "{page}");
    assert!(!page.contains("What the model reads"), "{page}");
}

#[tokio::test]
async fn a_post_without_the_pages_origin_or_its_nonce_is_refused_403_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    let right = format!("nonce={nonce}&action=deny");
    let another_nonce = format!("nonce={}&action=deny", "0".repeat(32));
    let cases: [(Option<&str>, &str); 6] = [
        (None, &right),
        (Some("http://evil.test"), &right),
        (Some("https://approvals.test"), &right),
        (Some("null"), &right),
        (Some(PUBLIC_URL), "action=deny"),
        (Some(PUBLIC_URL), &another_nonce),
    ];
    for (origin, form) in cases {
        let refused = submit(&app, &path, origin, form).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{origin:?} {form}: {}",
            html(&refused)
        );
        assert!(html(&refused).contains("Not decided"), "{}", html(&refused));
    }
    let unknown_action = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=maybe"),
    )
    .await;
    assert_eq!(unknown_action.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_nothing_recorded(&app.pool, id).await;
    assert!(!link_used(&app).await);
    // The link still decides from its own form.
    assert_eq!(
        submit(&app, &path, Some(PUBLIC_URL), &right).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn an_unknown_secret_or_run_is_gone_and_records_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    let secret = path.rsplit('/').next().unwrap();
    let unknown = [
        format!("/approve/{id}/{}", "A".repeat(43)),
        format!("/approve/{}/{secret}", Uuid::new_v4()),
        format!("/approve/{id}/short"),
        format!("/approve/not-a-run/{secret}"),
    ];
    for path in &unknown {
        let page = open(&app, path).await;
        assert_eq!(page.status, StatusCode::GONE, "{path}");
        assert!(html(&page).contains("Unknown link"), "{}", html(&page));
        let posted = submit(
            &app,
            path,
            Some(PUBLIC_URL),
            &format!("nonce={nonce}&action=deny"),
        )
        .await;
        assert_eq!(posted.status, StatusCode::GONE, "{path}");
    }
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn an_expired_link_is_gone_and_decides_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    sqlx::query("update approval_links set expires_at = now() - interval '1 minute'")
        .execute(&app.pool)
        .await
        .unwrap();
    let page = open(&app, &path).await;
    assert_eq!(page.status, StatusCode::GONE);
    assert!(html(&page).contains("Link expired"), "{}", html(&page));
    let posted = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=deny"),
    )
    .await;
    assert_eq!(posted.status, StatusCode::GONE, "{}", html(&posted));
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn an_owner_on_a_four_eyes_run_is_offered_deny_but_not_approve() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    app.register(write_run(id, json!({"require_second_approver": true})))
        .await;
    let owners = link_for(&app, id, OWNER).await;
    let page = html(&open(&app, &owners).await);
    assert!(!offers(&page, "approve"), "{page}");
    assert!(!offers(&page, "approve_for_conversation"), "{page}");
    assert!(offers(&page, "deny"), "{page}");
    assert!(offers(&page, "never_in_conversation"), "{page}");
    // A crafted approve from the owner's page is refused as §4 refuses it.
    let nonce = nonce_of(&page);
    let approve = submit(
        &app,
        &owners,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=approve"),
    )
    .await;
    assert_eq!(approve.status, StatusCode::FORBIDDEN, "{}", html(&approve));
    assert_nothing_recorded(&app.pool, id).await;
    // The second approver is offered Approve.
    let approvers = html(&open(&app, &link_for(&app, id, APPROVER).await).await);
    assert!(offers(&approvers, "approve"), "{approvers}");
}

#[tokio::test]
async fn an_approver_whose_approvable_tools_leave_out_the_write_tool_is_offered_deny_but_not_approve()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let limited = 12;
    let put = put_user(
        &app,
        limited,
            json!({"username": "limited", "is_admin": false, "can_approve_others": true, "disabled": false,
               "approvable_tools": ["send_mail"]}),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, limited).await;
    let page = html(&open(&app, &path).await);
    assert!(
        page.contains("You decide as <strong>limited</strong>."),
        "{page}"
    );
    assert!(!offers(&page, "approve"), "{page}");
    assert!(!offers(&page, "approve_for_conversation"), "{page}");
    assert!(offers(&page, "deny"), "{page}");
    let approve = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={}&action=approve", nonce_of(&page)),
    )
    .await;
    assert_eq!(approve.status, StatusCode::FORBIDDEN, "{}", html(&approve));
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn never_in_this_conversation_denies_with_skip_and_makes_a_run_rule() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let posted = decide_on_page(&app, &path, "never_in_conversation").await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "resumed", "{run}");
    assert_eq!(run["decision"]["approved"], false, "{run}");
    assert_eq!(model_reads(&app, id).await, OWNER_SKIP);
    let rules = app.get(&format!("/v1/runs/{id}/rules")).await.body["rules"].clone();
    let rules = rules.as_array().unwrap();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["scope"], "run");
    assert_eq!(rules[0]["tool"], "edit_page");
    assert_eq!(rules[0]["verdict"], "deny");
    assert_eq!(rules[0]["created_by"], OWNER);
    assert_eq!(rules[0]["live"], true);
}

#[tokio::test]
async fn a_link_whose_person_was_disabled_since_shows_not_yours_and_decides_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let link = made_link(&app, id, APPROVER).await;
    let path = page_path(&link);
    let nonce = nonce_of(&html(&open(&app, &path).await));
    app.user(APPROVER, false, true, true).await;
    let page = open(&app, &path).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", html(&page));
    let posted = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=deny"),
    )
    .await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN, "{}", html(&posted));
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn a_link_made_for_one_turn_shows_its_outcome_and_decides_nothing_on_the_next_turn() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    let run = app.register(write_run(id, json!({}))).await;
    let digest = run["turn"]["digest"].as_str().unwrap().to_owned();
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    // Someone else decides turn 0; the model then proposes the same change again (call ids are unique in a run, so
    // the next turn's digest differs).
    let denied = app.decide(id, false, Some(APPROVER), &digest).await;
    assert_eq!(denied.body["status"], "resumed", "{:?}", denied.body);
    let turn = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            json!({"messages": [
                {"role": "user", "content": "again"},
                {"role": "assistant", "content": null,
                 "tool_calls": [call("call_2", "edit_page", r#"{"page": 12}"#)]},
            ]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{:?}", turn.body);
    assert_eq!(turn.body["turn"]["index"], 1, "{:?}", turn.body);
    let before = recorded(&app.pool, id).await;

    // The link of turn 0 shows turn 0's outcome, and its old form decides nothing on turn 1.
    let page = html(&open(&app, &path).await);
    assert!(page.contains("Denied by another person."), "{page}");
    let posted = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=deny"),
    )
    .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    assert_eq!(status(&app, id).await, "waiting_for_approval");
    assert_eq!(recorded(&app.pool, id).await, before);
}

#[tokio::test]
async fn allow_for_this_conversation_approves_and_makes_a_run_rule() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = waiting_run(&app).await;
    let path = link_for(&app, id, OWNER).await;
    let posted = decide_on_page(&app, &path, "approve_for_conversation").await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["status"], "released", "{run}");
    assert_eq!(run["decision"]["approved"], true, "{run}");
    let rules = app.get(&format!("/v1/runs/{id}/rules")).await.body["rules"].clone();
    let rules = rules.as_array().unwrap();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["scope"], "run");
    assert_eq!(rules[0]["tool"], "edit_page");
    assert_eq!(rules[0]["verdict"], "approve");
    assert_eq!(rules[0]["created_by"], OWNER);
}

#[tokio::test]
async fn the_outcome_page_never_shows_arguments_edited_arguments_or_results() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    let arguments = json!({"page": 12, "description": CANARY}).to_string();
    let run = app
        .register(json!({
            "id": id,
            "owner_uid": OWNER,
            "messages": transcript(vec![
                call("call_1", "edit_page", &arguments),
                call("call_2", "send_mail", &arguments),
            ]),
            "tools": [
                {"name": "edit_page", "effect": "write", "executor": "worker"},
                {"name": "send_mail", "effect": "write", "executor": "worker"},
            ],
        }))
        .await;
    let digest = run["turn"]["digest"].as_str().unwrap();
    let path = link_for(&app, id, OWNER).await;
    let edited = json!({"page": 12, "description": format!("{CANARY}-edited")}).to_string();
    let decided = app
        .post(
            &format!("/v1/runs/{id}/decision"),
            json!({"turn_digest": digest, "decider_uid": APPROVER, "calls": [
                {"call_id": "call_1", "approved": true, "arguments": edited},
                {"call_id": "call_2", "approved": false},
            ]}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    // The worker claims the released call and posts its result, holding the canary too.
    let claim = app.post(&format!("/v1/runs/{id}/claim"), json!({})).await;
    assert_eq!(claim.status, StatusCode::OK, "{:?}", claim.body);
    let result = app
        .post(
            &format!("/v1/runs/{id}/results"),
            json!({"claim_id": claim.body["claim_id"], "results": [
                {"call_id": "call_1", "content": format!("saved {CANARY}"), "is_error": false},
            ]}),
        )
        .await;
    assert!(result.status.is_success(), "{:?}", result.body);
    let page = open(&app, &path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", html(&page));
    let page = html(&page);
    assert!(
        page.contains("Decided call by call by another person."),
        "{page}"
    );
    assert!(page.contains("\"send_mail\" was declined"), "{page}");
    assert!(!page.contains("canary"), "{page}");
    assert!(!page.contains("Note:"), "{page}");
}

#[tokio::test]
async fn a_post_after_the_turn_expired_decides_nothing_and_the_page_shows_the_expired_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = Uuid::new_v4();
    app.register(write_run(id, json!({"approval_ttl_secs": 3600})))
        .await;
    let path = link_for(&app, id, OWNER).await;
    let nonce = nonce_of(&html(&open(&app, &path).await));
    sqlx::query("update runs set expires_at = now() - interval '1 second' where id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    let posted = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={nonce}&action=deny"),
    )
    .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", html(&posted));
    let run = app.get(&format!("/v1/runs/{id}")).await.body;
    assert_eq!(run["decision"], Value::Null, "{run}");
    assert_eq!(recorded(&app.pool, id).await.approval_events, 0);
    let expired = "Error: approval_expired. No one decided on the approval for tool \"edit_page\" before it expired.";
    assert!(
        model_reads(&app, id)
            .await
            .as_str()
            .unwrap()
            .starts_with(expired),
        "{run}"
    );
    let page = html(&open(&app, &path).await);
    assert!(
        page.contains("Nobody decided before the request expired."),
        "{page}"
    );
    assert!(page.contains(expired), "{page}");
    assert!(!link_used(&app).await);
}

#[tokio::test]
async fn a_username_written_as_markup_is_shown_as_text() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let put = put_user(
        &app,
        OWNER,
        json!({"username": "<script>alert(1)</script><b>olivia", "is_admin": false,
               "can_approve_others": false, "disabled": false}),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    let id = waiting_run(&app).await;
    let page = open(&app, &link_for(&app, id, OWNER).await).await;
    let raw = String::from_utf8_lossy(&page.bytes).into_owned();
    assert!(!raw.contains("<script"), "{raw}");
    assert!(!raw.contains("<b>"), "{raw}");
    assert!(
        html(&page).contains("You decide as <strong><script>alert(1)</script><b>olivia</strong>."),
        "{raw}"
    );
}

#[tokio::test]
async fn a_turn_with_a_call_a_remembered_decision_denies_offers_no_approve_and_refuses_one_409() {
    let (_database, pool) = TestDatabase::create().await;
    let app = people(pool).await;
    let id = remembered_rules::resumed_run(&app).await;
    let rule = remembered_rules::run_rule(
        &app,
        id,
        json!({"created_by": OWNER, "tool": "send_mail", "verdict": "deny"}),
    )
    .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{:?}", rule.body);
    let turn = app
        .post(
            &format!("/v1/runs/{id}/turns"),
            remembered_rules::next_turn(&["edit_page", "send_mail"]),
        )
        .await;
    assert_eq!(
        turn.body["status"], "waiting_for_approval",
        "{:?}",
        turn.body
    );
    let path = link_for(&app, id, APPROVER).await;
    let page = html(&open(&app, &path).await);
    assert!(
        page.contains("A remembered decision would deny this call."),
        "{page}"
    );
    assert!(!offers(&page, "approve"), "{page}");
    assert!(offers(&page, "deny"), "{page}");
    let before = recorded(&app.pool, id).await;
    let approve = submit(
        &app,
        &path,
        Some(PUBLIC_URL),
        &format!("nonce={}&action=approve", nonce_of(&page)),
    )
    .await;
    assert_eq!(approve.status, StatusCode::CONFLICT, "{}", html(&approve));
    assert_eq!(recorded(&app.pool, id).await, before);
    assert_eq!(status(&app, id).await, "waiting_for_approval");
}
