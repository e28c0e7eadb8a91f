//! Decision tokens (docs/design.md §13): every refusal with its own code, `sub` over the body, a run-bound token on
//! another run, the routes a token may not use, key rotation, the audit of a decision posted with a token, keys only
//! on clients that may decide, and a token's reads filtered by the run's privacy level (docs/design.md §13).

use approval_resume::storage::{clients, token_keys};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{
    self, Signer, TestApp, assert_nothing_recorded, assert_problem, claims, owned_run, run_body,
    with,
};

async fn setup(pool: sqlx::PgPool) -> (TestApp, Signer) {
    let app = support::app(pool).await;
    app.client("chat", &["runs:read", "decisions:write"]).await;
    let signer = Signer::register(&app.pool, "chat", "k1").await;
    (app, signer)
}

fn deny(digest: &str) -> Value {
    json!({"approved": false, "turn_digest": digest})
}

#[tokio::test]
async fn a_token_reads_and_denies_its_users_run_as_that_user_and_the_audit_names_the_token() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, digest) = owned_run(&app).await;
    let token = signer.token(7);

    let run = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&token), None)
        .await;
    assert_eq!(run.status, StatusCode::OK, "{:?}", run.body);
    let decided = post_decision(&app, id, &token, deny(&digest)).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert_eq!(decided.body["decision"]["decided_by"], "run_owner");
    assert_eq!(decided.body["decision"]["decider_uid"], 7);
    let content = decided.body["results"][0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("Error: approval_denied (decided_by: run_owner)."),
        "{content}"
    );

    let input = app
        .call(
            Method::GET,
            &format!("/v1/runs/{id}/model-input"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
    let events = app.get(&format!("/v1/runs/{id}/events")).await;
    let event = &events.body["approval_events"][0];
    assert_eq!(event["client_name"], "chat");
    assert_eq!(event["credential"], "token");
    assert_eq!(event["token_kid"], "k1");
}

#[tokio::test]
async fn a_decision_posted_with_an_api_key_is_audited_as_such() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    let (id, digest) = owned_run(&app).await;
    assert_eq!(
        app.decide(id, false, Some(7), &digest).await.status,
        StatusCode::OK
    );
    let events = app.get(&format!("/v1/runs/{id}/events")).await;
    let event = &events.body["approval_events"][0];
    assert_eq!(event["credential"], "api_key");
    assert_eq!(event["token_kid"], Value::Null);
}

#[tokio::test]
async fn every_refused_token_is_answered_401_with_a_code_saying_why_and_nothing_is_recorded() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, digest) = owned_run(&app).await;
    let cases = signer.refused_tokens();
    for (token, code) in cases {
        let answer = post_decision(&app, id, &token, deny(&digest)).await;
        assert_problem(&answer, StatusCode::UNAUTHORIZED, code);
    }
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn a_token_of_a_revoked_client_is_refused_401() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, _) = owned_run(&app).await;
    let token = signer.token(7);
    assert!(clients::revoke(&app.pool, "chat").await.unwrap());
    let answer = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&token), None)
        .await;
    assert_problem(&answer, StatusCode::UNAUTHORIZED, "token_client_revoked");
}

#[tokio::test]
async fn the_decider_is_the_tokens_sub_and_a_body_naming_another_uid_is_refused_403() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, digest) = owned_run(&app).await;
    app.user(8, true, false, false).await;
    let token = signer.token(7);
    let path = format!("/v1/runs/{id}/decision");
    for named in [json!(8), Value::Null] {
        let body = json!({"approved": false, "decider_uid": named, "turn_digest": digest});
        let answer = app
            .call(Method::POST, &path, Some(&token), Some(body))
            .await;
        assert_problem(&answer, StatusCode::FORBIDDEN, "decider_mismatch");
    }
    assert_nothing_recorded(&app.pool, id).await;
    let body = json!({"approved": false, "decider_uid": 7, "turn_digest": digest});
    let answer = app
        .call(Method::POST, &path, Some(&token), Some(body))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["decision"]["decided_by"], "run_owner");
}

#[tokio::test]
async fn a_token_bound_to_one_run_finds_no_other_run() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (bound, _) = owned_run(&app).await;
    let other = Uuid::new_v4();
    let digest = app.register(run_body(other, 7)).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = signer.sign(with(claims(7), json!({"run": bound})));
    let read = app
        .call(
            Method::GET,
            &format!("/v1/runs/{other}"),
            Some(&token),
            None,
        )
        .await;
    assert_problem(&read, StatusCode::NOT_FOUND, "not_found");
    let decided = app
        .call(
            Method::POST,
            &format!("/v1/runs/{other}/decision"),
            Some(&token),
            Some(deny(&digest)),
        )
        .await;
    assert_problem(&decided, StatusCode::NOT_FOUND, "not_found");
    assert_nothing_recorded(&app.pool, other).await;
    let own = app
        .call(
            Method::GET,
            &format!("/v1/runs/{bound}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(own.status, StatusCode::OK);
}

#[tokio::test]
async fn a_token_sees_only_the_runs_its_user_may_decide() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, digest) = owned_run(&app).await;
    app.user(8, false, false, false).await;
    app.user(9, false, true, false).await;
    let plain = signer.token(8);
    let read = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&plain), None)
        .await;
    assert_problem(&read, StatusCode::NOT_FOUND, "not_found");
    // Its decision too, judged from the decision's own read of the run and the user.
    let refused = post_decision(&app, id, &plain, deny(&digest)).await;
    assert_problem(&refused, StatusCode::NOT_FOUND, "not_found");
    let missing = post_decision(&app, Uuid::new_v4(), &plain, deny(&digest)).await;
    assert_eq!(
        refused.body["detail"], missing.body["detail"],
        "like a missing run"
    );
    let approver = signer.token(9);
    let decided = post_decision(&app, id, &approver, deny(&digest)).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert_eq!(decided.body["decision"]["decided_by"], "other_user");
}

#[tokio::test]
async fn the_owner_of_a_four_eyes_run_may_not_approve_it_with_a_token() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    app.user(7, false, false, false).await;
    let id = Uuid::new_v4();
    let mut body = run_body(id, 7);
    body["require_second_approver"] = json!(true);
    let digest = app.register(body).await["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = post_decision(
        &app,
        id,
        &signer.token(7),
        json!({"approved": true, "turn_digest": digest}),
    )
    .await;
    assert_problem(&answer, StatusCode::FORBIDDEN, "second_approver_required");
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn a_token_on_a_route_it_may_not_use_is_refused_403() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, _) = owned_run(&app).await;
    let token = signer.token(7);
    let user =
        json!({"username": "x", "is_admin": true, "can_approve_others": true, "disabled": false});
    let routes = [
        (Method::GET, "/v1/approvals".to_owned(), None),
        (Method::GET, format!("/v1/runs/{id}/events"), None),
        (Method::POST, format!("/v1/runs/{id}/cancel"), None),
        (
            Method::POST,
            "/v1/runs".to_owned(),
            Some(run_body(Uuid::new_v4(), 7)),
        ),
        (Method::PUT, "/v1/users/7".to_owned(), Some(user)),
    ];
    for (method, path, body) in routes {
        let answer = app.call(method, &path, Some(&token), body).await;
        assert_problem(&answer, StatusCode::FORBIDDEN, "token_not_allowed");
    }
    assert_nothing_recorded(&app.pool, id).await;
}

#[tokio::test]
async fn a_rotated_key_verifies_until_it_is_retired() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, old) = setup(pool).await;
    let (id, _) = owned_run(&app).await;
    let new = Signer::register(&app.pool, "chat", "k2").await;
    let path = format!("/v1/runs/{id}");
    for signer in [&old, &new] {
        let answer = app
            .call(Method::GET, &path, Some(&signer.token(7)), None)
            .await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{}: {:?}",
            signer.kid,
            answer.body
        );
    }
    assert!(token_keys::retire(&app.pool, "chat", "k1").await.unwrap());
    let answer = app
        .call(Method::GET, &path, Some(&old.token(7)), None)
        .await;
    assert_problem(&answer, StatusCode::UNAUTHORIZED, "token_unknown_kid");
    let answer = app
        .call(Method::GET, &path, Some(&new.token(7)), None)
        .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn a_token_key_is_added_only_to_a_client_that_may_decide() {
    let (_database, pool) = TestDatabase::create().await;
    let app = support::app(pool).await;
    app.client("reader", &["runs:read"]).await;
    let key = Signer::unregistered("reader", "k1")
        .key
        .verifying_key()
        .to_bytes();
    let added = token_keys::add(&app.pool, "reader", "k1", &key)
        .await
        .unwrap();
    assert_eq!(added, token_keys::Added::ClientMayNotDecide);
    assert!(token_keys::list(&app.pool).await.unwrap().is_empty());
    let added = token_keys::add(&app.pool, "nobody", "k1", &key)
        .await
        .unwrap();
    assert_eq!(added, token_keys::Added::NoSuchClient);
}

#[tokio::test]
async fn a_token_whose_client_no_longer_holds_decisions_write_is_refused_401_and_decides_nothing() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    let (id, digest) = owned_run(&app).await;
    let token = signer.token(7);
    sqlx::query("update api_clients set scopes = '{runs:read}' where name = 'chat'")
        .execute(&app.pool)
        .await
        .unwrap();
    let read = app
        .call(Method::GET, &format!("/v1/runs/{id}"), Some(&token), None)
        .await;
    assert_problem(&read, StatusCode::UNAUTHORIZED, "token_client_lacks_scope");
    let decided = post_decision(&app, id, &token, deny(&digest)).await;
    assert_problem(
        &decided,
        StatusCode::UNAUTHORIZED,
        "token_client_lacks_scope",
    );
    assert_nothing_recorded(&app.pool, id).await;
}

const SECRET: &str = "sk-abcdefghijklmnopqrstuvwxyz0123456789";

/// A waiting run of owner 7 at `level` whose one call's arguments and user message hold a secret; its id and digest.
async fn secret_run(app: &TestApp, level: &str) -> (Uuid, String) {
    let id = Uuid::new_v4();
    let arguments = json!({"api_key": SECRET, "to": "ann@example.com"}).to_string();
    let mut messages = support::transcript(vec![support::call("call_1", "read_page", &arguments)]);
    messages[1]["content"] = json!(format!("my key is {SECRET}"));
    let run = app
        .register(json!({
            "id": id, "owner_uid": 7, "messages": messages, "privacy_level": level,
            "tools": [{"name": "read_page", "effect": "read"}],
        }))
        .await;
    (id, run["turn"]["digest"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_tokens_reads_and_decisions_show_arguments_and_the_transcript_only_as_the_runs_privacy_level_allows()
 {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    app.user(7, false, false, false).await;
    let token = signer.token(7);
    for level in ["full", "redacted", "metadata", "none"] {
        let (id, digest) = secret_run(&app, level).await;
        let path = format!("/v1/runs/{id}");
        let by_token = app.call(Method::GET, &path, Some(&token), None).await;
        assert_eq!(
            by_token.status,
            StatusCode::OK,
            "{level}: {:?}",
            by_token.body
        );
        let call = &by_token.body["turn"]["pending_calls"][0];
        assert_eq!(call["name"], "read_page", "{level}");
        match level {
            "full" => assert!(call["arguments"].as_str().unwrap().contains(SECRET)),
            "redacted" => {
                let shown = call["arguments"].as_str().unwrap();
                assert!(
                    !shown.contains(SECRET) && !shown.contains("ann@example.com"),
                    "{shown}"
                );
            }
            _ => assert!(call.get("arguments").is_none(), "{level}: {call}"),
        }
        // The client's own key still reads the run whole.
        let by_key = app.get(&path).await;
        let arguments = by_key.body["turn"]["pending_calls"][0]["arguments"].as_str();
        assert!(arguments.unwrap().contains(SECRET), "{level}");

        // The decision's own answer shows the model input as the model-input read does; its results stay.
        let decided = post_decision(&app, id, &token, deny(&digest)).await;
        assert_eq!(
            decided.status,
            StatusCode::OK,
            "{level}: {:?}",
            decided.body
        );
        let denial = decided.body["results"][0]["content"].as_str().unwrap();
        assert!(denial.contains("approval_denied"), "{denial}");
        let answered = &decided.body["model_input"];
        match level {
            "full" => assert!(answered.to_string().contains(SECRET)),
            "redacted" => {
                let text = answered.to_string();
                assert!(
                    !text.contains(SECRET) && !text.contains("ann@example.com"),
                    "{text}"
                );
                assert_eq!(answered["format"], "openai-chat", "{text}");
            }
            _ => assert!(decided.body.get("model_input").is_none(), "{level}"),
        }
        let again = post_decision(&app, id, &token, deny(&digest)).await;
        assert_eq!(
            again.bytes, decided.bytes,
            "{level}: a replay is byte-identical"
        );
        let input_path = format!("/v1/runs/{id}/model-input");
        let input = app.call(Method::GET, &input_path, Some(&token), None).await;
        match level {
            "full" => {
                assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
                assert!(input.body.to_string().contains(SECRET));
                // Whole means the stored text as it is, byte for byte as the key reads it (§14), not a re-serialized
                // tree.
                let by_key = app.get(&input_path).await;
                assert_eq!(
                    input.bytes, by_key.bytes,
                    "a token at full reads the same bytes"
                );
            }
            "redacted" => {
                assert_eq!(input.status, StatusCode::OK, "{:?}", input.body);
                let text = input.body.to_string();
                assert!(
                    !text.contains(SECRET) && !text.contains("ann@example.com"),
                    "{text}"
                );
                assert_eq!(input.body["format"], "openai-chat", "{text}");
                assert!(text.contains("approval_denied"), "{text}");
            }
            _ => assert_problem(&input, StatusCode::FORBIDDEN, "transcript_not_shown"),
        }
        let by_key = app.get(&input_path).await;
        assert!(by_key.body.to_string().contains(SECRET), "{level}");
    }
}

/// Posts a decision on run `id` with a decision token (or any bearer credential).
/// At privacy level `full` a token reads the model input whole: the text the loop registered, member order and
/// number forms included, exactly as the client's key reads it (§14), never a tree parsed and written again.
#[tokio::test]
async fn a_token_at_full_reads_the_model_input_as_the_bytes_the_loop_registered() {
    let (_database, pool) = TestDatabase::create().await;
    let (app, signer) = setup(pool).await;
    app.user(7, false, false, false).await;
    let token = signer.token(7);
    let id = Uuid::new_v4();
    let user = r#"{"role":"user","content":"Set the price to 1.50.","name":"ann"}"#;
    let body = format!(
        r#"{{"id":"{id}","owner_uid":7,"privacy_level":"full","tools":[{{"name":"read_page","effect":"read"}}],"messages":[{user},{{"role":"assistant","content":null,"tool_calls":[{{"type":"function","id":"call_1","function":{{"name":"read_page","arguments":"{{}}"}}}}]}}]}}"#
    );
    let registered = app
        .send_bytes(Method::POST, "/v1/runs", Some("application/json"), body)
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{:?}",
        registered.body
    );
    let digest = registered.body["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let decided = post_decision(&app, id, &token, deny(&digest)).await;
    assert_eq!(decided.status, StatusCode::OK, "{:?}", decided.body);
    assert!(String::from_utf8_lossy(&decided.bytes).contains(user));

    let path = format!("/v1/runs/{id}/model-input");
    let by_token = app.call(Method::GET, &path, Some(&token), None).await;
    assert_eq!(by_token.status, StatusCode::OK, "{:?}", by_token.body);
    assert!(
        String::from_utf8_lossy(&by_token.bytes).contains(user),
        "the registered message, byte for byte: {}",
        String::from_utf8_lossy(&by_token.bytes)
    );
    assert_eq!(by_token.bytes, app.get(&path).await.bytes);
}

async fn post_decision(app: &TestApp, id: Uuid, token: &str, body: Value) -> support::Answer {
    app.call(
        Method::POST,
        &format!("/v1/runs/{id}/decision"),
        Some(token),
        Some(body),
    )
    .await
}
