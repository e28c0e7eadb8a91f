//! The three model-input formats of docs/design.md §7 for a realistic run, held to golden files: two denied turns, then
//! a turn decided per call (one call approved with edited arguments, one denied) and a turn that expired.
//!
//! The golden files `tests/golden/model_input.{format}.json` are what `tests/sdk/validate_formats.py` checks
//! against the providers' own request types (openai and anthropic Python SDKs), so a change to the rendering shows
//! up here as a diff and there as a verdict.
//!
//! To rewrite the golden files after an intended change, run
//! `UPDATE_GOLDEN=1 cargo nextest run --test api formats`, review the diff, and commit it with the change.
//!
//! Nothing volatile reaches the files: the run id is a fixed UUID, call ids are chosen here, and the model input
//! carries no timestamps, uids or usernames (docs/design.md §3).

use std::path::PathBuf;

use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, TestApp, call};

/// Fixed, so the run is the same on every run of the test.
const RUN_ID: Uuid = Uuid::from_u128(0x0b5e_55ed_4f0a_4c1e_9d2a_6a1d_e11e_7e57);
const OWNER: i64 = 7;
/// A backend user with the `agent_approve` grant, deciding the owner's second turn.
const APPROVER: i64 = 9;

const FORMATS: [&str; 3] = ["openai-chat", "anthropic", "openai-responses"];

const OWNER_VARIANT_WRITE: &str = "Error: approval_denied (decided_by: run_owner, reason: variant). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined this version themselves, not the system or an operator, and propose a different version of this change.";
/// A reason is rendered on write calls only, so the read call of the same denial keeps the plain text.
const OWNER_READ: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"read_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const OTHER_SKIP_WRITE: &str = "Error: approval_denied (decided_by: other_user, reason: skip). The approval for tool \"update_page_metadata\" was declined by another backend user, not the person you are talking to. Nothing was executed. Tell the user that another backend user declined the approval, and do not propose this change again.";

/// Turn 0: the owner asks for a description; the model proposes it (write) and reads the page (read).
fn registration() -> Value {
    json!({
        "id": RUN_ID,
        "owner_uid": OWNER,
        "messages": [
            {"role": "system", "content": "You edit pages of the company website. Propose changes; a human approves them."},
            {"role": "user", "content": "Please give page 12 a meta description about our opening hours."},
            {"role": "assistant", "content": "I will read the page and set its description.", "tool_calls": [
                call("call_1", "update_page_metadata", r#"{"page": 12, "description": "Opening hours and holidays"}"#),
                call("call_2", "read_page", r#"{"page": 12}"#),
            ]},
        ],
        "tools": [
            {"name": "update_page_metadata", "effect": "write"},
            {"name": "read_page", "effect": "read"},
        ],
    })
}

/// Turn 1, after the owner's denial: the model asks, the owner answers, the model proposes another version.
fn second_turn() -> Value {
    json!({"messages": [
        {"role": "assistant", "content": "You declined that description. Shall I propose a shorter one?"},
        {"role": "user", "content": "Yes, under 60 characters, and mention Saturdays."},
        {"role": "assistant", "content": null, "tool_calls": [
            call("call_3", "update_page_metadata", r#"{"page": 12, "description": "Open Mon-Sat, 9 to 18"}"#),
        ]},
    ]})
}

/// Registers the run, has the owner deny turn 0 (`variant`), appends turn 1 and has an approver deny it (`skip`).
/// Returns the model input the second decision answered with, in the default format.
async fn resumed_twice(app: &TestApp) -> Value {
    app.user(OWNER, false, false, false).await;
    app.user(APPROVER, false, true, false).await;
    let run = app.register(registration()).await;

    let decision = json!({
        "approved": false, "decider_uid": OWNER, "turn_digest": run["turn"]["digest"], "reason": "variant",
    });
    let answer = app
        .post(&format!("/v1/runs/{RUN_ID}/decision"), decision)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);

    let answer = app
        .post(&format!("/v1/runs/{RUN_ID}/turns"), second_turn())
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["status"], "waiting_for_approval");

    let decision = json!({
        "approved": false, "decider_uid": APPROVER, "turn_digest": answer.body["turn"]["digest"], "reason": "skip",
    });
    let answer = app
        .post(&format!("/v1/runs/{RUN_ID}/decision"), decision)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["model_input"].clone()
}

/// After [`resumed_twice`]: turn 2 decided per call (the write approved with edited arguments, which without an
/// executor is `not_permitted` after the edit note; the read denied), then turn 3, which expires.
async fn resumed_four_times(app: &TestApp) {
    resumed_twice(app).await;
    let third = json!({"messages": [
        {"role": "assistant", "content": "Your colleague declined it. Shall I try once more, and check the page?"},
        {"role": "user", "content": "Yes."},
        {"role": "assistant", "content": null, "tool_calls": [
            call("call_4", "update_page_metadata", r#"{"page": 12, "description": "Open Mon-Sat"}"#),
            call("call_5", "read_page", r#"{"page": 12}"#),
        ]},
    ]});
    let answer = app.post(&format!("/v1/runs/{RUN_ID}/turns"), third).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let decision = json!({"decider_uid": OWNER, "turn_digest": answer.body["turn"]["digest"], "calls": [
        {"call_id": "call_4", "approved": true, "arguments": r#"{"page": 12, "description": "Open Monday to Saturday"}"#},
        {"call_id": "call_5", "approved": false},
    ]});
    let answer = app
        .post(&format!("/v1/runs/{RUN_ID}/decision"), decision)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let fourth = json!({"messages": [
        {"role": "assistant", "content": null, "tool_calls": [
            call("call_6", "update_page_metadata", r#"{"page": 12, "description": "Open Mon-Sat, 9-18"}"#),
        ]},
    ], "approval_ttl_secs": 3600});
    let answer = app.post(&format!("/v1/runs/{RUN_ID}/turns"), fourth).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    sqlx::query("update runs set expires_at = now() - interval '1 second' where id = $1")
        .bind(RUN_ID)
        .execute(&app.pool)
        .await
        .unwrap();
    let expired = approval_resume::resume::sweeper::sweep_once(&app.state.resumer)
        .await
        .unwrap();
    assert_eq!(expired, 1);
}

async fn model_input(app: &TestApp, format: &str) -> Value {
    let answer = app
        .get(&format!("/v1/runs/{RUN_ID}/model-input?format={format}"))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{format}: {}", answer.body);
    assert_eq!(answer.body["format"], format);
    answer.body
}

fn golden_path(format: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("model_input.{format}.json"))
}

/// Compares `actual` to its golden file as pretty-printed text (keys sorted, trailing newline), so the file in the
/// repository is exactly what the SDK validator reads. With `UPDATE_GOLDEN=1` the file is rewritten instead.
fn assert_golden(format: &str, actual: &Value) {
    let path = golden_path(format);
    let text = format!("{}\n", serde_json::to_string_pretty(actual).unwrap());
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "{}: {error}; create it with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(
        text,
        golden,
        "{format} differs from {}; if the change is intended, rerun with UPDATE_GOLDEN=1 and review the diff",
        path.display()
    );
}

/// The calls a model input carries: (call id, tool name, arguments parsed), in order.
fn calls(input: &Value) -> Vec<(String, String, Value)> {
    let parse = |text: &Value| serde_json::from_str(text.as_str().unwrap()).unwrap();
    entries(input)
        .into_iter()
        .flat_map(|entry| {
            if let Some(calls) = entry["tool_calls"].as_array() {
                let call = |c: &Value| {
                    (
                        text(&c["id"]),
                        text(&c["function"]["name"]),
                        parse(&c["function"]["arguments"]),
                    )
                };
                return calls.iter().map(call).collect();
            }
            match entry["type"].as_str() {
                Some("tool_use") => vec![(
                    text(&entry["id"]),
                    text(&entry["name"]),
                    entry["input"].clone(),
                )],
                Some("function_call") => {
                    vec![(
                        text(&entry["call_id"]),
                        text(&entry["name"]),
                        parse(&entry["arguments"]),
                    )]
                }
                _ => Vec::new(),
            }
        })
        .collect()
}

/// The results a model input carries: (call id, result text), in order.
fn results(input: &Value) -> Vec<(String, String)> {
    entries(input)
        .into_iter()
        .filter_map(
            |entry| match (entry["role"].as_str(), entry["type"].as_str()) {
                (Some("tool"), _) => Some((text(&entry["tool_call_id"]), text(&entry["content"]))),
                (_, Some("tool_result")) => {
                    Some((text(&entry["tool_use_id"]), text(&entry["content"])))
                }
                (_, Some("function_call_output")) => {
                    Some((text(&entry["call_id"]), text(&entry["output"])))
                }
                _ => None,
            },
        )
        .collect()
}

/// Every message or item of the list, each followed by its content blocks (where tool_use and tool_result live).
fn entries(input: &Value) -> Vec<&Value> {
    let list = input.get("messages").or(input.get("input"));
    let list = list
        .and_then(Value::as_array)
        .expect("a messages or input list");
    list.iter()
        .flat_map(|entry| {
            std::iter::once(entry).chain(entry["content"].as_array().into_iter().flatten())
        })
        .collect()
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a string, not {value}"))
        .to_owned()
}

#[tokio::test]
async fn each_format_of_a_two_turn_run_matches_its_golden_file() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let answered = resumed_twice(&app).await;
    // The default format is openai-chat, and the decision answered with what the endpoint serves.
    let default = app.get(&format!("/v1/runs/{RUN_ID}/model-input")).await;
    assert_eq!(default.body, model_input(&app, "openai-chat").await);
    assert_eq!(answered, default.body);
    // The golden files hold the richest input: denials, an edit, a denial beside it, and an expiry.
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    resumed_four_times(&app).await;
    for format in FORMATS {
        assert_golden(format, &model_input(&app, format).await);
    }
    let chat = model_input(&app, "openai-chat").await;
    let tool_texts: Vec<String> = results(&chat).into_iter().map(|(_, text)| text).collect();
    assert!(tool_texts[3].starts_with("Note: approval_edited (decided_by: run_owner)."));
    assert!(tool_texts[3].ends_with(
        "\n\nError: tool \"update_page_metadata\" is no longer permitted and was not executed."
    ));
    assert!(tool_texts[5].starts_with("Error: approval_expired."));
    for format in ["anthropic", "openai-responses"] {
        let other = model_input(&app, format).await;
        assert_eq!(results(&other), results(&chat), "{format}: results");
    }
}

#[tokio::test]
async fn all_three_formats_carry_the_same_calls_and_results_in_the_same_order() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    resumed_twice(&app).await;
    let chat = model_input(&app, "openai-chat").await;
    let expected_results = vec![
        ("call_1".to_owned(), OWNER_VARIANT_WRITE.to_owned()),
        ("call_2".to_owned(), OWNER_READ.to_owned()),
        ("call_3".to_owned(), OTHER_SKIP_WRITE.to_owned()),
    ];
    assert_eq!(results(&chat), expected_results);
    let ids: Vec<String> = calls(&chat).into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
    for format in ["anthropic", "openai-responses"] {
        let other = model_input(&app, format).await;
        assert_eq!(calls(&other), calls(&chat), "{format}: calls");
        assert_eq!(results(&other), expected_results, "{format}: results");
    }
}
