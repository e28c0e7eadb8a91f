//! A decision token sees a run as the inbox shows it, filtered by the run's privacy level, everywhere it reads
//! (docs/design.md §6, §13, §17): the run (pending calls, released calls and the worker's results), the decision's
//! answer and its replay. A canary (an API key and an e-mail address) sits in a call's arguments, in a decider's
//! edited arguments, in an executor's output and in a worker's result; at each level the token's three answers are
//! searched for it, while the client's key keeps reading everything.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::executors::{FakeExecutor, app_with_tools};
use crate::support::{self, Signer, TestApp, call, transcript};

const KEY: &str = "sk-abcdefghijklmnopqrstuvwxyz0123456789";
const MAIL: &str = "ann@example.com";

/// A text holding the canary, and a word saying where it was put.
fn canary(place: &str) -> String {
    json!({"where": place, "api_key": KEY, "to": MAIL}).to_string()
}

/// A run of owner 7 at `level`: `send_mail` runs on the service's executor (which answers the canary), `save_page`
/// on the worker, `read_page` is denied; each call's arguments hold the canary. Its id and digest.
async fn canary_run(app: &TestApp, level: &str) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let run = app
        .register(json!({
            "id": id, "owner_uid": 7, "privacy_level": level,
            "messages": transcript(vec![
                call("call_1", "send_mail", &canary("model arguments")),
                call("call_2", "save_page", &canary("model arguments")),
                call("call_3", "read_page", &canary("model arguments")),
            ]),
            "tools": [
                {"name": "save_page", "effect": "write", "executor": "worker"},
                {"name": "read_page", "effect": "read"},
            ],
        }))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

/// The decision the token posts: both writes approved with edited arguments holding the canary, the read denied.
fn decision(digest: &str) -> Value {
    json!({"turn_digest": digest, "calls": [
        {"call_id": "call_1", "approved": true, "arguments": canary("edited arguments")},
        {"call_id": "call_2", "approved": true, "arguments": canary("edited arguments")},
        {"call_id": "call_3", "approved": false},
    ]})
}

fn by_call<'a>(list: &'a Value, call_id: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|item| item["call_id"] == call_id)
        .unwrap_or_else(|| panic!("{call_id} in {list}"))
}

fn text(answer: &support::Answer) -> String {
    String::from_utf8_lossy(&answer.bytes).into_owned()
}

/// The model's text of the tool message answering `call_id` in an OpenAI chat model input.
fn tool_message<'a>(model_input: &'a Value, call_id: &str) -> &'a Value {
    let messages = model_input["messages"].as_array().unwrap();
    let message = messages
        .iter()
        .find(|message| message["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("a tool message for {call_id} in {model_input}"));
    &message["content"]
}

#[tokio::test]
async fn a_token_sees_arguments_edits_and_tool_output_only_as_the_runs_privacy_level_shows_them_in_every_read()
 {
    let (_database, pool) = TestDatabase::create().await;
    let fake = FakeExecutor::start().await;
    let app = app_with_tools(pool, &fake, &[("send_mail", "canary")]).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    app.user(7, false, false, false).await;
    let token = signer.token(7);
    for level in ["none", "metadata", "redacted", "full"] {
        let (id, digest) = canary_run(&app, level).await;
        let decision_path = format!("/v1/runs/{id}/decision");
        let decided = app
            .call(
                Method::POST,
                &decision_path,
                Some(&token),
                Some(decision(&digest)),
            )
            .await;
        assert_eq!(
            decided.status,
            StatusCode::OK,
            "{level}: {:?}",
            decided.body
        );
        assert_eq!(decided.body["status"], "released", "{level}");
        // The worker claims the released call before it posts its result (docs/design.md §15).
        let claim_id = crate::worker_calls::claim(&app, id).await;
        let posted = app
            .post(
                &format!("/v1/runs/{id}/results"),
                json!({"claim_id": claim_id, "results": [{"call_id": "call_2", "content": canary("worker result"), "is_error": false}]}),
            )
            .await;
        assert_eq!(posted.status, StatusCode::OK, "{level}: {:?}", posted.body);
        let replayed = app
            .call(
                Method::POST,
                &decision_path,
                Some(&token),
                Some(decision(&digest)),
            )
            .await;
        assert_eq!(
            replayed.status,
            StatusCode::OK,
            "{level}: {:?}",
            replayed.body
        );
        assert_eq!(replayed.body["status"], "resumed", "{level}");
        let run_path = format!("/v1/runs/{id}");
        let viewed = app.call(Method::GET, &run_path, Some(&token), None).await;
        assert_eq!(viewed.status, StatusCode::OK, "{level}: {:?}", viewed.body);
        let by_key = app.get(&run_path).await.body;

        // The key reads every payload whole, at every level.
        assert!(
            by_key["turn"]["pending_calls"][0]["arguments"]
                .as_str()
                .unwrap()
                .contains(KEY)
        );
        let released_by_key = by_call(&by_key["released_calls"], "call_2");
        assert!(
            released_by_key["arguments"]
                .as_str()
                .unwrap()
                .contains("edited arguments")
        );
        assert!(
            released_by_key["result"]["content"]
                .as_str()
                .unwrap()
                .contains(KEY)
        );

        let reads = [
            ("run", &viewed),
            ("decision", &decided),
            ("replay", &replayed),
        ];
        // Whatever the level, the denial's fixed words reach the decider.
        for (read, answer) in [("decision", &decided), ("replay", &replayed)] {
            let denial = by_call(&answer.body["results"], "call_3")["content"].as_str();
            assert!(
                denial.is_some_and(|text| text.contains("approval_denied")),
                "{level}, {read}: {}",
                answer.body
            );
        }
        match level {
            "none" | "metadata" => {
                for (read, answer) in reads {
                    let shown = text(answer);
                    assert!(
                        !shown.contains(KEY)
                            && !shown.contains(MAIL)
                            && !shown.contains("[REDACTED]"),
                        "{level}, {read}: {shown}"
                    );
                    assert!(answer.body.get("model_input").is_none(), "{level}, {read}");
                }
                for answer in [&decided, &replayed] {
                    let executed = by_call(&answer.body["results"], "call_1");
                    assert_eq!(executed["outcome"], "ok", "{level}");
                    assert!(executed.get("content").is_none(), "{level}: {executed}");
                }
                let released = by_call(&viewed.body["released_calls"], "call_2");
                assert!(released.get("arguments").is_none(), "{level}: {released}");
                assert_eq!(released["result"]["is_error"], false, "{level}: {released}");
                assert!(
                    released["result"].get("content").is_none(),
                    "{level}: {released}"
                );
                let worker = by_call(&replayed.body["results"], "call_2");
                assert!(worker.get("content").is_none(), "{level}: {worker}");
            }
            "redacted" => {
                for (read, answer) in reads {
                    let shown = text(answer);
                    assert!(
                        !shown.contains(KEY) && !shown.contains(MAIL),
                        "{level}, {read}: {shown}"
                    );
                }
                // Exactly the redaction of the model input: each result reads as the tool message the model reads.
                let model_input = &replayed.body["model_input"];
                for call_id in ["call_1", "call_2", "call_3"] {
                    let result = &by_call(&replayed.body["results"], call_id)["content"];
                    assert_eq!(result, tool_message(model_input, call_id), "{call_id}");
                }
                let executed = by_call(&decided.body["results"], "call_1")["content"]
                    .as_str()
                    .unwrap();
                assert!(
                    executed.contains("[REDACTED]") && executed.contains("***"),
                    "{executed}"
                );
                let released = by_call(&viewed.body["released_calls"], "call_2");
                let arguments = released["arguments"].as_str().unwrap();
                assert!(
                    arguments.contains("edited arguments") && arguments.contains("[REDACTED]"),
                    "{arguments}"
                );
                let result = released["result"]["content"].as_str().unwrap();
                assert!(
                    result.contains("worker result") && result.contains("***"),
                    "{result}"
                );
                let pending = viewed.body["turn"]["pending_calls"][0]["arguments"]
                    .as_str()
                    .unwrap();
                assert!(pending.contains("[REDACTED]"), "{pending}");
            }
            _ => {
                // At `full` a token sees what the key sees.
                assert_eq!(viewed.body["released_calls"], by_key["released_calls"]);
                assert_eq!(viewed.body["turn"], by_key["turn"]);
                let executed = by_call(&decided.body["results"], "call_1")["content"]
                    .as_str()
                    .unwrap();
                assert!(
                    executed.contains(KEY) && executed.contains("edited arguments"),
                    "{executed}"
                );
                let worker = by_call(&replayed.body["results"], "call_2")["content"]
                    .as_str()
                    .unwrap();
                assert!(
                    worker.contains("worker result") && worker.contains(MAIL),
                    "{worker}"
                );
            }
        }
    }
}
