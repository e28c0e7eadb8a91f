//! Tool names after §3's widening (docs/design.md §3, §19): a name such as `github.create_issue`, which the MCP gate
//! gives a gated tool, passes every check of names (registration in each format, `approvable_tools`, rules,
//! executors' configuration, the database); only a translation `?format=` to a provider whose own rule the name
//! breaks is refused, 422 `format_not_representable` naming the tool.

use approval_resume::executor::Executors;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, assert_problem, call, transcript};

const OWNER: i64 = 7;
/// A gated tool's name as the gate writes it: `{server}.{tool}`, outside the providers' `^[A-Za-z0-9_-]{1,64}$`.
const DOTTED: &str = "github.create_issue";

/// The §3 text of a read call of `DOTTED` denied by the owner.
const OWNER_DENIED: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"github.create_issue\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";

/// Registers an `openai-chat` run of the owner calling `tool` once; its id and answer.
async fn chat_run(app: &TestApp, tool: &str) -> (Uuid, support::Answer) {
    let id = Uuid::new_v4();
    let answer = app
        .post(
            "/v1/runs",
            json!({
                "id": id,
                "owner_uid": OWNER,
                "messages": transcript(vec![call("call_1", tool, r#"{"title": "x"}"#)]),
                "tools": [{"name": tool, "effect": "read"}],
            }),
        )
        .await;
    (id, answer)
}

fn digest(run: &Value) -> String {
    run["turn"]["digest"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_run_calling_a_dotted_tool_is_registered_and_its_denial_names_the_tool_exactly() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let (id, run) = chat_run(&app, DOTTED).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
    let inbox = app
        .get(&format!("/v1/approvals?acting_uid={OWNER}&tool={DOTTED}"))
        .await;
    assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.body);
    assert_eq!(
        inbox.body["items"][0]["run_id"],
        id.to_string(),
        "{}",
        inbox.body
    );
    let denied = app.decide(id, false, Some(OWNER), &digest(&run.body)).await;
    assert_eq!(denied.status, StatusCode::OK, "{}", denied.body);
    let input = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(input.status, StatusCode::OK, "{}", input.body);
    let messages = input.body["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], OWNER_DENIED);
}

#[tokio::test]
async fn a_native_run_calling_a_dotted_tool_is_registered_and_answers_in_its_own_format() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let text = format!(
        r#"{{"id":"{id}","owner_uid":7,"format":"anthropic","messages":[{{"role":"user","content":"File it."}},{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"{DOTTED}","input":{{"title":"x"}}}}]}}],"tools":[{{"name":"{DOTTED}","effect":"read"}}]}}"#
    );
    let run = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), text)
        .await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
    let denied = app.decide(id, false, Some(OWNER), &digest(&run.body)).await;
    assert_eq!(denied.status, StatusCode::OK, "{}", denied.body);
    let own = app.get(&format!("/v1/runs/{id}/model-input")).await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    let last = own.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["content"], OWNER_DENIED);
}

#[tokio::test]
async fn a_translation_to_a_provider_whose_rule_the_name_breaks_is_refused_naming_the_tool() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let long = "x".repeat(65);
    for tool in [DOTTED, long.as_str()] {
        let (id, run) = chat_run(&app, tool).await;
        assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
        let decision =
            json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest(&run.body)});
        let refused = app
            .post(
                &format!("/v1/runs/{id}/decision?format=anthropic"),
                decision,
            )
            .await;
        assert_problem(
            &refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            "format_not_representable",
        );
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("{tool:?}")), "{detail}");
        support::assert_nothing_recorded(&app.pool, id).await;

        app.decide(id, false, Some(OWNER), &digest(&run.body)).await;
        for format in ["anthropic", "openai-responses", "gemini"] {
            let read = app
                .get(&format!("/v1/runs/{id}/model-input?format={format}"))
                .await;
            assert_problem(
                &read,
                StatusCode::UNPROCESSABLE_ENTITY,
                "format_not_representable",
            );
            let detail = read.body["detail"].as_str().unwrap();
            assert!(
                detail.contains(&format!("{tool:?}")) && detail.contains(format),
                "{detail}"
            );
        }
        // The run's own format holds the name as registered.
        let own = app
            .get(&format!("/v1/runs/{id}/model-input?format=openai-chat"))
            .await;
        assert_eq!(own.status, StatusCode::OK, "{}", own.body);
    }
}

#[tokio::test]
async fn a_native_run_with_a_dotted_tool_is_not_translated_and_the_refusal_names_the_tool() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let text = format!(
        r#"{{"id":"{id}","owner_uid":7,"format":"anthropic","messages":[{{"role":"user","content":"File it."}},{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"{DOTTED}","input":{{}}}}]}}]}}"#
    );
    let run = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), text)
        .await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
    app.decide(id, false, Some(OWNER), &digest(&run.body)).await;
    for format in ["openai-chat", "openai-responses", "gemini"] {
        let read = app
            .get(&format!("/v1/runs/{id}/model-input?format={format}"))
            .await;
        assert_problem(
            &read,
            StatusCode::UNPROCESSABLE_ENTITY,
            "format_not_representable",
        );
        let detail = read.body["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("{DOTTED:?}")), "{detail}");
    }
}

#[tokio::test]
async fn approvable_tools_and_rules_take_a_dotted_tool() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let user = app
        .call(
            Method::PUT,
            &format!("/v1/users/{OWNER}"),
            Some(&app.admin_key),
            Some(json!({
                "username": "owner",
                "is_admin": false,
                "can_approve_others": false,
                "disabled": false,
                "approvable_tools": [DOTTED, "x".repeat(128)],
            })),
        )
        .await;
    assert_eq!(user.status, StatusCode::OK, "{}", user.body);
    assert_eq!(user.body["approvable_tools"][0], DOTTED);

    let expires_at = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let rule = app
        .post(
            "/v1/rules",
            json!({"owner_uid": OWNER, "created_by": OWNER, "tool": DOTTED, "verdict": "deny",
                   "expires_at": expires_at}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{}", rule.body);
    assert_eq!(rule.body["tool"], DOTTED);
    // The rule decides the next run calling the tool at its registration.
    let (_, run) = chat_run(&app, DOTTED).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
    assert_eq!(run.body["status"], "resumed", "{}", run.body);
}

#[tokio::test]
async fn names_beyond_the_widened_rule_are_still_refused_everywhere() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    for bad in ["x".repeat(129), "has space".to_owned(), "a/b".to_owned()] {
        let (_, run) = chat_run(&app, &bad).await;
        assert_eq!(
            run.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            run.body
        );
    }
    let detail = chat_run(&app, "has space").await.1.body["detail"].clone();
    assert!(
        detail.as_str().unwrap().contains("^[A-Za-z0-9_.-]{1,128}$"),
        "{detail}"
    );
}

#[test]
fn an_executor_configuration_naming_a_dotted_tool_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.toml");
    std::fs::write(
        &path,
        format!("[tools.\"{DOTTED}\"]\nurl = \"http://127.0.0.1:1/\"\neffect = \"write\"\n"),
    )
    .unwrap();
    let executors = Executors::from_file(&path, |_| None, false).unwrap();
    assert!(executors.enabled(DOTTED).is_some());
    let space = dir.path().join("space.toml");
    std::fs::write(
        &space,
        "[tools.\"has space\"]\nurl = \"http://127.0.0.1:1/\"\neffect = \"write\"\n",
    )
    .unwrap();
    assert!(Executors::from_file(&space, |_| None, false).is_err());
}
