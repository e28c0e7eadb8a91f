//! Runs in the provider's own format, kept whole (docs/design.md §14): each fixture of
//! `tests/fixtures/native` registered as the compact JSON it is, then denied, approved, decided per call, expired and
//! continued with a second turn; every answer's bytes hold every registered member and message unchanged, then the
//! results in the format's own shape, with the texts of docs/design.md §3. With and without encryption at rest.

use std::collections::HashMap;
use std::path::PathBuf;

use approval_resume::resume::sweeper;
use axum::http::{Method, StatusCode};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::encryption::{OLD_KEYS, with_keys};
use crate::executors::{FakeExecutor, app_with_tools};
use crate::support::{self, Answer, TestApp, assert_problem, row_counts};

const OWNER: i64 = 7;
const NATIVE: [&str; 3] = ["anthropic", "openai-responses", "gemini"];

const OWNER_DENIED_WRITE: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"update_page_metadata\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const OWNER_DENIED_READ: &str = "Error: approval_denied (decided_by: run_owner). The approval for tool \"read_page\" was declined by the user who started this run, the person you are talking to. Nothing was executed. Tell them that they declined the approval themselves, not the system or an operator, and ask whether the change should be proposed again.";
const EXPIRED_WRITE: &str = "Error: approval_expired. No one decided on the approval for tool \"update_page_metadata\" before it expired. Nothing was executed. Tell the user that the approval request expired without a decision, not that anyone declined it, and ask whether the change should be proposed again.";

/// A fixture's text, exactly as the file holds it.
fn fixture(format: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/native")
        .join(format!("{format}.json"));
    std::fs::read_to_string(path).unwrap()
}

/// The fixture with `id` and `owner_uid` spliced in front of its members: its bytes are sent as they are.
fn body(format: &str, id: Uuid) -> String {
    let text = fixture(format);
    format!("{{\"id\":\"{id}\",\"owner_uid\":{OWNER},{}", &text[1..])
}

/// A fixture's members as their own texts.
fn members(format: &str) -> HashMap<String, Box<RawValue>> {
    serde_json::from_str(&fixture(format)).unwrap()
}

/// The names of a format's list and system members.
fn names(format: &str) -> (&'static str, &'static str) {
    match format {
        "anthropic" => ("messages", "system"),
        "openai-responses" => ("input", "instructions"),
        "gemini" => ("contents", "system_instruction"),
        _ => ("messages", "system"),
    }
}

async fn post_text(app: &TestApp, path: &str, text: String) -> Answer {
    app.send_bytes(Method::POST, path, Some("application/json"), text)
        .await
}

/// Registers the fixture of `format` (owner 7 exists) and returns the run's id and answer.
async fn register(app: &TestApp, format: &str) -> (Uuid, Value) {
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let answer = post_text(app, "/v1/runs", body(format, id)).await;
    assert_eq!(
        answer.status,
        StatusCode::CREATED,
        "{format}: {}",
        answer.body
    );
    (id, answer.body)
}

fn digest(run: &Value) -> String {
    run["turn"]["digest"].as_str().unwrap().to_owned()
}

/// Asserts that `text` holds the fixture's system member and its whole list, byte for byte, as `model_input`'s
/// members, the list followed by what the service appended.
fn assert_holds_registered_bytes(format: &str, text: &str) {
    let members = members(format);
    let (list, system) = names(format);
    let system_text = format!("\"{system}\":{}", members[system].get());
    assert!(
        text.contains(&system_text),
        "{format}: the system member is not kept whole in {text}"
    );
    let list_text = members[list].get();
    let open = format!("\"{list}\":{},", &list_text[..list_text.len() - 1]);
    assert!(
        text.contains(&open),
        "{format}: the list is not kept whole in {text}"
    );
    assert!(
        text.contains("1.50"),
        "{format}: a number form was rewritten"
    );
}

/// The results a native model input ends with: (call id or name, text, is_error), in order.
fn native_results(format: &str, input: &Value) -> Vec<(String, String, bool)> {
    let (list, _) = names(format);
    let last = input[list].as_array().unwrap().last().unwrap().clone();
    let text = |value: &Value| value.as_str().unwrap().to_owned();
    match format {
        "anthropic" => {
            assert_eq!(last["role"], "user");
            let blocks = last["content"].as_array().unwrap();
            blocks
                .iter()
                .map(|block| {
                    assert_eq!(block["type"], "tool_result");
                    (
                        text(&block["tool_use_id"]),
                        text(&block["content"]),
                        block["is_error"].as_bool().unwrap(),
                    )
                })
                .collect()
        }
        "gemini" => {
            assert_eq!(last["role"], "user");
            let parts = last["parts"].as_array().unwrap();
            parts
                .iter()
                .map(|part| {
                    let response = &part["functionResponse"];
                    assert!(
                        response.get("id").is_none(),
                        "the calls had no id: {response}"
                    );
                    let (key, content) = response["response"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .next()
                        .unwrap();
                    (text(&response["name"]), text(content), key == "error")
                })
                .collect()
        }
        _ => {
            let items = input[list].as_array().unwrap();
            items[items.len() - 2..]
                .iter()
                .map(|item| {
                    assert_eq!(item["type"], "function_call_output");
                    (text(&item["call_id"]), text(&item["output"]), false)
                })
                .collect()
        }
    }
}

/// The ids of the fixture's pending calls, and how each format names a result's call (Gemini: by function).
fn call_ids(format: &str) -> [&'static str; 2] {
    match format {
        "anthropic" => [
            "toolu_01A09q90qw90lq917835lq9",
            "toolu_01B19q90qw90lq917835lq9",
        ],
        "openai-responses" => [
            "call_EJ2N9qKvGa2fx7jJ4Uq8hHn0",
            "call_Xk3pQ7r9Ls2Vb8Nw1Ty4Hm6J",
        ],
        _ => ["call_0", "call_1"],
    }
}

fn result_keys(format: &str) -> [&'static str; 2] {
    match format {
        "gemini" => ["update_page_metadata", "read_page"],
        _ => call_ids(format),
    }
}

#[tokio::test]
async fn each_native_registration_is_denied_with_every_registered_byte_back_then_its_formats_results()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for format in NATIVE {
        let (id, run) = register(&app, format).await;
        assert_eq!(run["format"], format);
        let pending = run["turn"]["pending_calls"].as_array().unwrap();
        let ids: Vec<&str> = pending
            .iter()
            .map(|call| call["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, call_ids(format), "{format}");
        // Objects are arguments in their RFC 8785 form; the OpenAI formats' strings stay as the model wrote them.
        let expected = match format {
            "openai-responses" => {
                r#"{"page": 12, "description": "Open Mon-Sat from 8", "weight": 1.50}"#
            }
            _ => r#"{"description":"Open Mon-Sat from 8","page":12,"weight":1.5}"#,
        };
        assert_eq!(pending[0]["arguments"], expected, "{format}");

        let answer = app.decide(id, false, Some(OWNER), &digest(&run)).await;
        assert_eq!(answer.status, StatusCode::OK, "{format}: {}", answer.body);
        assert_eq!(answer.body["format"], format);
        assert_eq!(answer.body["model_input"]["format"], format);
        let text = String::from_utf8(answer.bytes.to_vec()).unwrap();
        assert_holds_registered_bytes(format, &text);
        let keys = result_keys(format);
        let expected = vec![
            (keys[0].to_owned(), OWNER_DENIED_WRITE.to_owned(), true),
            (keys[1].to_owned(), OWNER_DENIED_READ.to_owned(), true),
        ];
        let mut found = native_results(format, &answer.body["model_input"]);
        if format == "openai-responses" {
            // Responses outputs carry no error flag: the text says it.
            found.iter_mut().for_each(|result| result.2 = true);
        }
        assert_eq!(found, expected, "{format}");
        // The model input read later is the same bytes.
        let read = app.get(&format!("/v1/runs/{id}/model-input")).await;
        assert_eq!(read.status, StatusCode::OK);
        assert!(text.ends_with(&format!(
            "\"model_input\":{}}}",
            String::from_utf8(read.bytes.to_vec()).unwrap()
        )));
    }
}

#[tokio::test]
async fn the_anthropic_results_are_one_user_message_with_is_error_after_the_unchanged_assistant_turn()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, run) = register(&app, "anthropic").await;
    let answer = app.decide(id, false, Some(OWNER), &digest(&run)).await;
    let text = String::from_utf8(answer.bytes.to_vec()).unwrap();
    let messages = members("anthropic")["messages"].get().to_owned();
    let tail = format!(
        "{},{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01A09q90qw90lq917835lq9\",\"content\":{},\"is_error\":true}},",
        &messages[..messages.len() - 1],
        serde_json::to_string(OWNER_DENIED_WRITE).unwrap()
    );
    assert!(text.contains(&tail), "{text}");
    assert!(
        text.ends_with("]}}"),
        "the results close the messages and the answer: {text}"
    );
}

#[tokio::test]
async fn an_approval_runs_the_calls_with_their_canonical_arguments_and_answers_in_the_runs_format()
{
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(
        pool,
        &fake,
        &[("update_page_metadata", "ok"), ("read_page", "ok")],
    )
    .await;
    for format in NATIVE {
        let (id, run) = register(&app, format).await;
        let answer = app.decide(id, true, Some(OWNER), &digest(&run)).await;
        assert_eq!(answer.status, StatusCode::OK, "{format}: {}", answer.body);
        let text = String::from_utf8(answer.bytes.to_vec()).unwrap();
        assert_holds_registered_bytes(format, &text);
        let keys = result_keys(format);
        let found = native_results(format, &answer.body["model_input"]);
        assert_eq!(
            found,
            vec![
                (
                    keys[0].to_owned(),
                    "update_page_metadata done".to_owned(),
                    false
                ),
                (keys[1].to_owned(), "read_page done".to_owned(), false),
            ],
            "{format}"
        );
    }
    // Each format's calls reach the executor in the turn's order, with the same arguments and their own ids.
    let received = fake.received();
    let tools: Vec<&str> = received
        .iter()
        .map(|r| r.body["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["update_page_metadata", "read_page"].repeat(3));
    let proposed = json!({"page": 12, "description": "Open Mon-Sat from 8", "weight": 1.5});
    for at in [0, 2, 4] {
        assert_eq!(received[at].body["arguments"], proposed);
    }
    let keys: Vec<&str> = received
        .iter()
        .map(|r| r.idempotency_key.rsplit(':').next().unwrap())
        .collect();
    let mut expected = call_ids("anthropic").to_vec();
    expected.extend(call_ids("openai-responses"));
    expected.extend(call_ids("gemini"));
    assert_eq!(keys, expected);
}

#[tokio::test]
async fn a_per_call_decision_edits_one_call_in_its_result_and_never_in_the_transcript() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for format in NATIVE {
        let (id, run) = register(&app, format).await;
        let ids = call_ids(format);
        let decision = json!({"decider_uid": OWNER, "turn_digest": digest(&run), "calls": [
            {"call_id": ids[1], "approved": false},
            {"call_id": ids[0], "approved": true, "arguments": r#"{"page": 12, "description": "Open 8-18"}"#},
        ]});
        let answer = app.post(&format!("/v1/runs/{id}/decision"), decision).await;
        assert_eq!(answer.status, StatusCode::OK, "{format}: {}", answer.body);
        let text = String::from_utf8(answer.bytes.to_vec()).unwrap();
        assert_holds_registered_bytes(format, &text);
        let found = native_results(format, &answer.body["model_input"]);
        assert!(
            found[0]
                .1
                .starts_with("Note: approval_edited (decided_by: run_owner)."),
            "{format}: {}",
            found[0].1
        );
        assert!(found[0].1.ends_with(
            "{\"page\": 12, \"description\": \"Open 8-18\"}\n\nError: tool \"update_page_metadata\" is no longer permitted and was not executed."
        ));
        assert_eq!(found[1].1, OWNER_DENIED_READ, "{format}");
    }
}

#[tokio::test]
async fn an_expired_native_turn_answers_every_call_with_the_expired_text_in_its_format() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    for format in NATIVE {
        let (id, _) = register(&app, format).await;
        sqlx::query("update runs set expires_at = now() - interval '1 second' where id = $1")
            .bind(id)
            .execute(&app.pool)
            .await
            .unwrap();
        assert_eq!(sweeper::sweep_once(&app.state.resumer).await.unwrap(), 1);
        let read = app.get(&format!("/v1/runs/{id}/model-input")).await;
        assert_eq!(read.status, StatusCode::OK, "{format}: {}", read.body);
        assert_holds_registered_bytes(format, std::str::from_utf8(&read.bytes).unwrap());
        let found = native_results(format, &read.body);
        assert_eq!(found[0].1, EXPIRED_WRITE, "{format}");
    }
}

/// The second turn of each format, as its loop sends it after the first model input: compact text.
fn second_turn(format: &str) -> (&'static str, &'static str) {
    match format {
        "anthropic" => (
            "messages",
            r#"[{"role":"assistant","content":[{"type":"thinking","thinking":"They declined; propose a shorter one.","signature":"Zm9vYmFy"},{"type":"tool_use","id":"toolu_03","name":"update_page_metadata","input":{"page":12,"description":"Open 8-18","weight":2.0}}]}]"#,
        ),
        "openai-responses" => (
            "input",
            r#"[{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAAAB2"},{"type":"function_call","call_id":"call_3","name":"update_page_metadata","arguments":"{\"page\":12,\"weight\":2.0}"}]"#,
        ),
        _ => (
            "contents",
            r#"[{"role":"model","parts":[{"functionCall":{"name":"update_page_metadata","args":{"page":12,"weight":2.0}},"thoughtSignature":"c2ln"}]}]"#,
        ),
    }
}

#[tokio::test]
async fn a_second_turn_appends_what_followed_and_keeps_both_turns_whole_with_and_without_keys() {
    let (_database, pool) = TestDatabase::create().await;
    let plain = support::app(pool).await;
    let sealed = with_keys(&plain, OLD_KEYS);
    for app in [&plain, &sealed] {
        for format in NATIVE {
            let (id, run) = register(app, format).await;
            let first = app.decide(id, false, Some(OWNER), &digest(&run)).await;
            assert_eq!(first.status, StatusCode::OK, "{format}: {}", first.body);
            let first_input = app.get(&format!("/v1/runs/{id}/model-input")).await.bytes;
            let (member, turn) = second_turn(format);
            let next = post_text(
                app,
                &format!("/v1/runs/{id}/turns"),
                format!("{{\"{member}\":{turn}}}"),
            )
            .await;
            assert_eq!(next.status, StatusCode::OK, "{format}: {}", next.body);
            assert_eq!(next.body["format"], format);
            let expected_id = match format {
                "anthropic" => "toolu_03",
                "openai-responses" => "call_3",
                _ => "call_2",
            };
            assert_eq!(
                next.body["turn"]["pending_calls"][0]["id"], expected_id,
                "{format}"
            );
            // While the second turn waits, the model input is still the first one, byte for byte.
            let waiting = app.get(&format!("/v1/runs/{id}/model-input")).await;
            assert_eq!(waiting.bytes, first_input, "{format}");

            let second = app
                .decide(
                    id,
                    false,
                    Some(OWNER),
                    next.body["turn"]["digest"].as_str().unwrap(),
                )
                .await;
            assert_eq!(second.status, StatusCode::OK, "{format}: {}", second.body);
            let text = String::from_utf8(second.bytes.to_vec()).unwrap();
            assert_holds_registered_bytes(format, &text);
            // The first model input, less its closing, then the second turn's entries as sent, then its results.
            let first_text = String::from_utf8(first_input.to_vec()).unwrap();
            let continued = format!(
                "{},{}",
                &first_text[..first_text.len() - 2],
                &turn[1..turn.len() - 1]
            );
            assert!(text.contains(&continued), "{format}: {text}");
            let (list, _) = names(format);
            let last = second.body["model_input"][list]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .to_string();
            assert!(last.contains("approval_denied"), "{format}: {last}");
        }
    }
}

#[tokio::test]
async fn with_keys_the_native_answer_is_the_same_bytes_and_nothing_is_stored_in_clear() {
    let (_database, pool) = TestDatabase::create().await;
    let plain = support::app(pool).await;
    let sealed = with_keys(&plain, OLD_KEYS);
    for format in NATIVE {
        let mut answers = Vec::new();
        for app in [&plain, &sealed] {
            let (id, run) = register(app, format).await;
            let answer = app.decide(id, false, Some(OWNER), &digest(&run)).await;
            assert_eq!(answer.status, StatusCode::OK, "{format}: {}", answer.body);
            answers.push((id, answer.body["model_input"].to_string()));
        }
        assert_eq!(answers[0].1, answers[1].1, "{format}");
        let (system, system_sealed): (Option<String>, Option<Vec<u8>>) =
            sqlx::query_as("select system, system_sealed from runs where id = $1")
                .bind(answers[1].0)
                .fetch_one(&plain.pool)
                .await
                .unwrap();
        assert!(system.is_none() && system_sealed.is_some(), "{format}");
        let (messages,): (Option<String>,) =
            sqlx::query_as("select messages from runs where id = $1")
                .bind(answers[1].0)
                .fetch_one(&plain.pool)
                .await
                .unwrap();
        assert!(messages.is_none(), "{format}");
    }
}

#[tokio::test]
async fn the_run_view_inbox_and_events_say_the_runs_format() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(9, false, true, false).await;
    for format in NATIVE {
        let (id, _) = register(&app, format).await;
        let view = app.get(&format!("/v1/runs/{id}")).await;
        assert_eq!(view.body["format"], format);
        let inbox = app.get("/v1/approvals?acting_uid=9").await;
        assert_eq!(inbox.status, StatusCode::OK, "{}", inbox.body);
        let item = inbox.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["run_id"] == id.to_string())
            .cloned();
        assert_eq!(item.unwrap()["format"], format);
        let data: Value = sqlx::query_scalar("select data from events where run_id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
        assert_eq!(data["format"], format);
        assert!(
            !data.to_string().contains("Mon-Sat"),
            "an event carries no payload"
        );
    }
}

#[tokio::test]
async fn a_native_run_in_a_format_that_would_drop_a_block_is_refused_naming_it_and_nothing_is_decided()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, run) = register(&app, "anthropic").await;
    let decision = json!({"approved": false, "decider_uid": OWNER, "turn_digest": digest(&run)});
    let refused = app
        .post(
            &format!("/v1/runs/{id}/decision?format=openai-chat"),
            decision,
        )
        .await;
    assert_problem(
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "format_not_representable",
    );
    // The first element without a counterpart: the system block's cache_control, before any message.
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "system[0].cache_control (a member of a system block) has no counterpart in openai-chat"
        ),
        "{detail}"
    );
    support::assert_nothing_recorded(&app.pool, id).await;

    app.decide(id, false, Some(OWNER), &digest(&run)).await;
    for other in ["openai-chat", "openai-responses", "gemini"] {
        let read = app
            .get(&format!("/v1/runs/{id}/model-input?format={other}"))
            .await;
        assert_problem(
            &read,
            StatusCode::UNPROCESSABLE_ENTITY,
            "format_not_representable",
        );
    }
}

#[tokio::test]
async fn a_plain_native_run_translates_to_the_other_formats_with_the_same_results() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let id = Uuid::new_v4();
    let text = format!(
        r#"{{"id":"{id}","owner_uid":7,"format":"anthropic","system":"You edit pages.","messages":[{{"role":"user","content":"Set it."}},{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"update_page_metadata","input":{{"page":12}}}}]}}]}}"#
    );
    let run = post_text(&app, "/v1/runs", text).await;
    assert_eq!(run.status, StatusCode::CREATED, "{}", run.body);
    app.decide(id, false, Some(OWNER), &digest(&run.body)).await;
    let chat = app
        .get(&format!("/v1/runs/{id}/model-input?format=openai-chat"))
        .await;
    assert_eq!(chat.status, StatusCode::OK, "{}", chat.body);
    assert_eq!(
        chat.body["messages"][0],
        json!({"role": "system", "content": "You edit pages."})
    );
    assert_eq!(chat.body["messages"][3]["tool_call_id"], "toolu_1");
    assert_eq!(chat.body["messages"][3]["content"], OWNER_DENIED_WRITE);
    let gemini = app
        .get(&format!("/v1/runs/{id}/model-input?format=gemini"))
        .await;
    assert_eq!(gemini.status, StatusCode::OK, "{}", gemini.body);
    assert_eq!(
        gemini.body["contents"][2]["parts"][0]["functionResponse"]["response"]["error"],
        OWNER_DENIED_WRITE
    );
}

#[tokio::test]
async fn bad_native_input_is_refused_422_naming_what_and_where_and_nothing_is_stored() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    let cases: [(&str, &str, &str); 7] = [
        (
            r#""format":"claude","messages":[]"#,
            "invalid_body",
            "unknown variant `claude`",
        ),
        (
            r#""format":"anthropic","contents":[]"#,
            "invalid_body",
            "contents: contents is a member of gemini",
        ),
        (
            r#""format":"anthropic","messages":[{"role":"assistant","content":[{"type":"tool_use","name":"x","input":{}}]}]"#,
            "invalid_transcript",
            "messages[0].content[0]: a tool_use block needs a string \"id\"",
        ),
        (
            r#""format":"anthropic","messages":[{"role":"user","content":"hi"}]"#,
            "invalid_transcript",
            "messages[0]: the last message must be the assistant's",
        ),
        (
            r#""format":"gemini","contents":[{"role":"model","parts":[{"text":"done","thoughtSignature":"s"}]}]"#,
            "invalid_transcript",
            "contents[0]: the last content, of role \"model\", has no functionCall part",
        ),
        (
            r#""format":"openai-responses","input":[{"type":"function_call","call_id":"c","name":"x","arguments":"{}"},{"role":"user","content":"no"}]"#,
            "invalid_transcript",
            "input: no function_call item follows the last user message",
        ),
        (
            r#""format":"openai-chat","system":"s","messages":[]"#,
            "invalid_body",
            "system: system is a member of anthropic",
        ),
    ];
    for (members, code, detail) in cases {
        let id = Uuid::new_v4();
        let answer = post_text(
            &app,
            "/v1/runs",
            format!("{{\"id\":\"{id}\",\"owner_uid\":7,{members}}}"),
        )
        .await;
        assert_problem(&answer, StatusCode::UNPROCESSABLE_ENTITY, code);
        let said = answer.body["detail"].as_str().unwrap();
        assert!(said.contains(detail), "{members}: {said}");
    }
    assert_eq!(row_counts(&app.pool).await.runs, 0);

    // A new turn with no pending call, or in another format's member, stores nothing either.
    let (id, run) = register(&app, "gemini").await;
    app.decide(id, false, Some(OWNER), &digest(&run)).await;
    let stored: String = sqlx::query_scalar("select messages from runs where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    for (text, detail) in [
        (
            r#"{"contents":[{"role":"model","parts":[{"text":"done"}]}]}"#,
            "has no functionCall part",
        ),
        (
            r#"{"messages":[]}"#,
            "messages is a member of openai-chat and anthropic",
        ),
        (
            r#"{"system_instruction":{"parts":[]},"contents":[]}"#,
            "registered once",
        ),
    ] {
        let answer = post_text(&app, &format!("/v1/runs/{id}/turns"), text.to_owned()).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{text}: {}",
            answer.body
        );
        assert!(
            answer.body["detail"].as_str().unwrap().contains(detail),
            "{}",
            answer.body
        );
    }
    let after: String = sqlx::query_scalar("select messages from runs where id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(after, stored);
}

#[tokio::test]
async fn the_same_native_registration_again_is_the_same_run_and_the_stored_text_is_the_sent_one() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, first) = register(&app, "anthropic").await;
    let again = post_text(&app, "/v1/runs", body("anthropic", id)).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body, first);
    let (messages, system): (String, String) =
        sqlx::query_as("select messages, system from runs where id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let members = members("anthropic");
    assert_eq!(messages, members["messages"].get());
    assert_eq!(system, members["system"].get());
}

/// The members of a run in `format` whose one pending call has `{"order": {"id": NUMBER}}` as its arguments.
fn with_number(format: &str, number: &str) -> String {
    match format {
        "anthropic" => format!(
            r#""format":"anthropic","messages":[{{"role":"user","content":"cancel it"}},{{"role":"assistant","content":[{{"type":"tool_use","id":"toolu_1","name":"cancel_order","input":{{"order":{{"id":{number}}}}}}}]}}]"#
        ),
        _ => format!(
            r#""format":"gemini","contents":[{{"role":"user","parts":[{{"text":"cancel it"}}]}},{{"role":"model","parts":[{{"functionCall":{{"name":"cancel_order","args":{{"order":{{"id":{number}}}}}}}}}]}}]"#
        ),
    }
}

#[tokio::test]
async fn a_number_past_2_53_in_native_arguments_is_refused_however_written_and_2_53_itself_is_kept()
{
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.user(OWNER, false, false, false).await;
    for (format, place) in [
        ("anthropic", "messages[1].content[0].input.order.id"),
        ("gemini", "contents[1].parts[0].args.order.id"),
    ] {
        for number in [
            "9007199254740993.0",
            "123456789012345678901234",
            "9.007199254740993e15",
            "-9007199254740993",
        ] {
            let id = Uuid::new_v4();
            let members = with_number(format, number);
            let answer = post_text(
                &app,
                "/v1/runs",
                format!("{{\"id\":\"{id}\",\"owner_uid\":7,{members}}}"),
            )
            .await;
            assert_problem(
                &answer,
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_transcript",
            );
            let said = answer.body["detail"].as_str().unwrap();
            assert!(
                said.starts_with(&format!("{place}: a number beyond 2^53")),
                "{format} {number}: {said}"
            );
        }
        assert_eq!(row_counts(&app.pool).await.runs, 0, "{format}");
    }
    for format in ["anthropic", "gemini"] {
        let id = Uuid::new_v4();
        let members = with_number(format, "9007199254740992.0");
        let answer = post_text(
            &app,
            "/v1/runs",
            format!("{{\"id\":\"{id}\",\"owner_uid\":7,{members}}}"),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{format}: {}",
            answer.body
        );
        assert_eq!(
            answer.body["turn"]["pending_calls"][0]["arguments"],
            r#"{"order":{"id":9007199254740992}}"#,
            "{format}"
        );
    }
}
