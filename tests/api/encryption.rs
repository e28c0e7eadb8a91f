//! Encryption at rest (docs/design.md §11): with ENCRYPTION_KEYS nothing of a transcript, arguments or results is
//! readable in a dump, answers do not change, a moved or flipped ciphertext is `undecryptable`, and `keys rotate`
//! moves every value under the new key while decisions go on.

use std::collections::HashMap;
use std::time::Duration;

use approval_resume::application::Wiring;
use approval_resume::executor::{Executors, ToolExecutor};
use approval_resume::sealing::Sealer;
use approval_resume::storage::Database;
use approval_resume::vocabulary::{Effect, PrivacyLevel};
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDatabase;
use crate::support::{self, Options, TestApp, assert_problem, call};

pub const OLD_KEYS: &str = "old:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const NEW_KEY: &str = "new:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";
pub const OTHER_KEY: &str = "old:ZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmY=";

const CANARY_MESSAGE: &str = "CANARYmsg4f1c9e";
const CANARY_ARGUMENT: &str = "CANARYarg77b2d0";
const CANARY_RESULT: &str = "CANARYres3a9e51";
const CANARY_EDIT: &str = "CANARYedit90c2f7";
const OWNER: i64 = 7;

/// The same app over the same database, with these keys (or none).
pub fn with_keys(app: &TestApp, keys: &str) -> TestApp {
    let pool = Database::direct(app.pool.clone()).with_sealer(Sealer::parse(keys).unwrap());
    app.built(
        app.pool.clone(),
        Wiring {
            pool,
            ..app.wiring()
        },
    )
}

/// An executor on loopback whose every result holds the result canary.
async fn canary_executor() -> String {
    let app = axum::Router::new().route(
        "/",
        post(|| async {
            axum::Json(
                json!({"content": format!("sent, receipt {CANARY_RESULT}"), "is_error": false}),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

async fn app_with_executor(pool: PgPool, url: &str) -> TestApp {
    let executor = |effect| ToolExecutor {
        url: url.to_owned(),
        timeout: Duration::from_secs(5),
        effect,
        secret: None,
        enabled: true,
        max_content_chars: 1000,
    };
    let tools: HashMap<String, ToolExecutor> = [
        ("send_mail".to_owned(), executor(Effect::Write)),
        ("lookup".to_owned(), executor(Effect::Read)),
    ]
    .into();
    support::app_with(
        pool,
        Options {
            executors: Executors::from_tools(tools),
            privacy_floor: PrivacyLevel::Full,
            ..Options::default()
        },
    )
    .await
}

fn canary_run(id: Uuid, privacy_level: &str) -> Value {
    json!({
        "id": id,
        "owner_uid": OWNER,
        "privacy_level": privacy_level,
        "messages": [
            {"role": "system", "content": "You send mail."},
            {"role": "user", "content": format!("Mail the secret {CANARY_MESSAGE} to Bob.")},
            {"role": "assistant", "content": null, "tool_calls": [
                call("call_1", "send_mail", &format!(r#"{{"to": "bob", "body": "{CANARY_ARGUMENT}"}}"#)),
                call("call_2", "lookup", &format!(r#"{{"q": "{CANARY_ARGUMENT}"}}"#)),
            ]},
        ],
        "tools": [{"name": "send_mail", "effect": "write"}, {"name": "lookup", "effect": "read"}],
    })
}

/// Registrations, denials, approvals with executor results at `full` and `redacted`, a second turn, the inbox:
/// every answer, labelled, with times masked (they differ between two runs of the scenario, nothing else may).
async fn scenario(app: &TestApp) -> Vec<(String, String)> {
    app.user(OWNER, false, false, false).await;
    let mut answers = Vec::new();
    let mut keep = |label: String, answer: support::Answer| {
        assert!(answer.status.is_success(), "{label}: {}", answer.body);
        let text = String::from_utf8(answer.bytes).unwrap();
        let times = regex::Regex::new(r#""\d{4}-\d\d-\d\dT[^"]*""#).unwrap();
        answers.push((label, times.replace_all(&text, "\"<time>\"").into_owned()));
    };
    for (n, (level, approved)) in [
        ("full", true),
        ("full", false),
        ("redacted", true),
        ("redacted", false),
    ]
    .into_iter()
    .enumerate()
    {
        let id = Uuid::from_u128(0x5eed_0000 + n as u128);
        let registered = app.post("/v1/runs", canary_run(id, level)).await;
        let digest = registered.body["turn"]["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        keep(format!("register {n}"), registered);
        keep(
            format!("inbox {n}"),
            app.get(&format!("/v1/approvals?acting_uid={OWNER}")).await,
        );
        keep(
            format!("decide {n}"),
            app.decide(id, approved, Some(OWNER), &digest).await,
        );
        keep(
            format!("model input {n}"),
            app.get(&format!("/v1/runs/{id}/model-input")).await,
        );
        keep(
            format!("events {n}"),
            app.get(&format!("/v1/runs/{id}/events")).await,
        );
        keep(format!("run {n}"), app.get(&format!("/v1/runs/{id}")).await);
        let next = app
            .post(
                &format!("/v1/runs/{id}/turns"),
                json!({"messages": [
                    {"role": "assistant", "content": format!("Done; {CANARY_MESSAGE} again?")},
                    {"role": "user", "content": "yes"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        call("call_3", "send_mail", &format!(r#"{{"body": "{CANARY_ARGUMENT}"}}"#)),
                    ]},
                ]}),
            )
            .await;
        let digest = next.body["turn"]["digest"].as_str().unwrap().to_owned();
        keep(format!("turn {n}"), next);
        keep(
            format!("decide turn 1 of {n}"),
            app.decide(id, approved, Some(OWNER), &digest).await,
        );
        keep(
            format!("model input turn 1 of {n}"),
            app.get(&format!("/v1/runs/{id}/model-input")).await,
        );
        keep(
            format!("events turn 1 of {n}"),
            app.get(&format!("/v1/runs/{id}/events")).await,
        );
    }
    // A verdict per call: one call approved with edited arguments, payload like the proposed ones, one denied.
    let id = Uuid::from_u128(0x5eed_0100);
    let registered = app.post("/v1/runs", canary_run(id, "full")).await;
    let digest = registered.body["turn"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    keep("register per call".into(), registered);
    keep(
        "decide per call".into(),
        app.post(
            &format!("/v1/runs/{id}/decision"),
            json!({"decider_uid": OWNER, "turn_digest": digest, "calls": [
                {"call_id": "call_1", "approved": true,
                 "arguments": format!(r#"{{"to": "bob", "body": "{CANARY_EDIT}"}}"#)},
                {"call_id": "call_2", "approved": false},
            ]}),
        )
        .await,
    );
    keep(
        "model input per call".into(),
        app.get(&format!("/v1/runs/{id}/model-input")).await,
    );
    keep(
        "events per call".into(),
        app.get(&format!("/v1/runs/{id}/events")).await,
    );
    answers
}

pub async fn pg_dump(database: &TestDatabase) -> String {
    let output = tokio::process::Command::new("pg_dump")
        .arg(format!("--dbname={}", database.url))
        .output()
        .await
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn with_keys_a_dump_holds_no_canary_and_every_answer_is_the_one_without_keys() {
    let executor = canary_executor().await;
    let (clear_database, pool) = TestDatabase::create().await;
    let clear = scenario(&app_with_executor(pool, &executor).await).await;
    let (sealed_database, pool) = TestDatabase::create().await;
    let base = app_with_executor(pool, &executor).await;
    let sealed = scenario(&with_keys(&base, OLD_KEYS)).await;

    assert_eq!(clear.len(), sealed.len());
    for ((label, without), (_, with)) in clear.iter().zip(&sealed) {
        assert_eq!(without, with, "{label}");
    }
    // The scenario did store every canary: the dump without keys shows each of them.
    let clear_dump = pg_dump(&clear_database).await;
    let sealed_dump = pg_dump(&sealed_database).await;
    for canary in [CANARY_MESSAGE, CANARY_ARGUMENT, CANARY_RESULT, CANARY_EDIT] {
        assert!(clear_dump.contains(canary), "the clear dump lacks {canary}");
        assert!(
            !sealed_dump.contains(canary),
            "the dump with keys shows {canary}"
        );
    }
    // And what the answers showed came from sealed rows.
    assert!(clear.iter().any(|(_, text)| text.contains(CANARY_RESULT)));
    let metrics = support::metrics(&with_keys(&base, OLD_KEYS)).await;
    assert!(metrics.contains("\nencryption_enabled 1\n"), "{metrics}");
    assert!(
        support::metrics(&base)
            .await
            .contains("\nencryption_enabled 0\n")
    );
}

/// Two runs of the owner, each denied, in an app with keys; their ids.
async fn denied_runs(app: &TestApp, count: usize) -> Vec<Uuid> {
    app.user(OWNER, false, false, false).await;
    let mut ids = Vec::new();
    for _ in 0..count {
        let id = Uuid::new_v4();
        let run = app.register(support::run_body(id, OWNER)).await;
        let digest = run["turn"]["digest"].as_str().unwrap();
        let answer = app.decide(id, false, Some(OWNER), digest).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        ids.push(id);
    }
    ids
}

async fn model_input(app: &TestApp, id: Uuid) -> support::Answer {
    app.get(&format!("/v1/runs/{id}/model-input")).await
}

#[tokio::test]
async fn a_ciphertext_moved_to_another_row_or_column_or_flipped_is_undecryptable_not_another_runs_text()
 {
    let (_database, pool) = TestDatabase::create().await;
    let app = with_keys(&support::app(pool.clone()).await, OLD_KEYS);
    let ids = denied_runs(&app, 5).await;
    for id in &ids {
        assert_eq!(model_input(&app, *id).await.status, StatusCode::OK);
    }
    let execute = |statement: &'static str, a: Uuid, b: Uuid| {
        let pool = pool.clone();
        async move {
            let done = sqlx::query(statement)
                .bind(a)
                .bind(b)
                .execute(&pool)
                .await
                .unwrap();
            assert!(done.rows_affected() >= 1, "{statement}");
        }
    };
    // Another run's transcript.
    execute(
        "update runs set messages_sealed = (select messages_sealed from runs where id = $1) where id = $2",
        ids[0],
        ids[1],
    )
    .await;
    // Another call's result, of the same run.
    execute(
        "update turn_calls set content_sealed =
             (select content_sealed from turn_calls where run_id = $1 and position = 1)
         where run_id = $2 and position = 0",
        ids[2],
        ids[2],
    )
    .await;
    // The same call's arguments moved into its result column.
    execute(
        "update turn_calls set content_sealed = arguments_sealed where run_id = $1 and position = 0 and $2 = $2",
        ids[3],
        ids[3],
    )
    .await;
    // One flipped byte of a transcript.
    execute(
        "update runs set messages_sealed = set_byte(messages_sealed, length(messages_sealed) - 1,
                                                    get_byte(messages_sealed, length(messages_sealed) - 1) # 1)
         where id = $1 and $2 = $2",
        ids[4],
        ids[4],
    )
    .await;
    for id in &ids[1..] {
        let answer = model_input(&app, *id).await;
        assert_problem(&answer, StatusCode::INTERNAL_SERVER_ERROR, "undecryptable");
        assert!(
            !String::from_utf8_lossy(&answer.bytes).contains("page"),
            "{}",
            answer.body
        );
    }
    // Untouched, the first still answers; under a key of the same id but other bytes it does not.
    assert_eq!(model_input(&app, ids[0]).await.status, StatusCode::OK);
    let other = with_keys(&app, OTHER_KEY);
    assert_problem(
        &model_input(&other, ids[0]).await,
        StatusCode::INTERNAL_SERVER_ERROR,
        "undecryptable",
    );
    // And without the key it was sealed under: the same.
    let without = with_keys(&app, NEW_KEY);
    assert_problem(
        &model_input(&without, ids[0]).await,
        StatusCode::INTERNAL_SERVER_ERROR,
        "undecryptable",
    );
}

#[tokio::test]
async fn rows_written_in_clear_before_keys_were_set_keep_working() {
    let (_database, pool) = TestDatabase::create().await;
    let clear = support::app(pool).await;
    let ids = denied_runs(&clear, 2).await;
    let sealed = with_keys(&clear, OLD_KEYS);
    for id in ids {
        let before = model_input(&clear, id).await;
        let after = model_input(&sealed, id).await;
        assert_eq!(after.status, StatusCode::OK);
        assert_eq!(before.bytes, after.bytes);
    }
}

/// `approval-resume ARGS…` against the database with `ENCRYPTION_KEYS`, as an operator runs it; its standard output.
pub async fn command(database: &TestDatabase, keys: &str, args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_approval-resume"))
        .args(args)
        .env("DATABASE_URL", &database.url)
        .env("ENCRYPTION_KEYS", keys)
        .env("LOG_LEVEL", "warn")
        .output()
        .await
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `approval-resume keys …` against the database, as an operator runs it.
async fn keys_command(database: &TestDatabase, keys: &str, args: &[&str]) -> String {
    let args: Vec<&str> = std::iter::once("keys")
        .chain(args.iter().copied())
        .collect();
    command(database, keys, &args).await
}

#[tokio::test]
async fn keys_rotate_moves_every_value_under_the_new_key_while_decisions_go_on() {
    let (database, pool) = TestDatabase::create().await;
    let plain = support::app(pool).await;
    // Rows in clear, then rows under the old key.
    let mut ids = denied_runs(&plain, 20).await;
    ids.extend(denied_runs(&with_keys(&plain, OLD_KEYS), 40).await);
    let before = keys_command(&database, OLD_KEYS, &["status"]).await;
    assert!(
        before.contains("(clear)") && before.contains(" old "),
        "{before}"
    );

    let both = format!("{NEW_KEY},{OLD_KEYS}");
    let serving = with_keys(&plain, &both);
    let rotation = {
        let database_url = database.url.clone();
        let both = both.clone();
        tokio::spawn(async move {
            tokio::process::Command::new(env!("CARGO_BIN_EXE_approval-resume"))
                .args(["keys", "rotate", "--batch-size", "7"])
                .env("DATABASE_URL", database_url)
                .env("ENCRYPTION_KEYS", both)
                .env("LOG_LEVEL", "warn")
                .output()
                .await
                .expect("the binary runs")
        })
    };
    // Decisions while it runs: every one succeeds.
    let mut during = 0;
    while !rotation.is_finished() {
        ids.extend(denied_runs(&serving, 1).await);
        during += 1;
    }
    let output = rotation.await.unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(printed.contains("re-encrypted"), "{printed}");
    println!("{during} runs registered and denied while keys rotate ran");

    let after = keys_command(&database, &both, &["status"]).await;
    for line in after.lines().skip(1) {
        assert!(
            line.contains(" new "),
            "a value not under the new key: {line}\n{after}"
        );
    }
    // The old key removed, every run still answers.
    let new_only = with_keys(&plain, NEW_KEY);
    for id in ids {
        assert_eq!(
            model_input(&new_only, id).await.status,
            StatusCode::OK,
            "{id}"
        );
    }
}
