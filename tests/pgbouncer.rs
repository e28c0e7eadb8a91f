//! The service behind PgBouncer in transaction pooling mode (docs/design.md §12), with a PgBouncer of the test's own in
//! front of the shared server: every route and subcommand of the real binary works through it under concurrent
//! load (client connections outnumber PgBouncer's server connections, so they share them), and an error of the
//! pooler is answered 503 with Retry-After. A plain sqlx pool through the same PgBouncer fails as the issue
//! reported, which is what `DATABASE_PGBOUNCER` is for.

mod support;
use support::load;

use std::process::Stdio;
use std::time::Duration;

use approval_resume::storage::{self, Database, sql};
use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::postgres::PgPoolOptions;

use load::{Api, OWNERS, Target};
use support::executor::LoopbackExecutor;
use support::pgbouncer::PgBouncer;
use support::{BINARY, Service, TestDatabase, call, settings};

/// Runs a subcommand of the binary with `env` (and nothing else of the developer's environment).
async fn subcommand(env: &[(&str, String)], args: &[&str]) -> (bool, String, String) {
    let mut command = tokio::process::Command::new(BINARY);
    for setting in settings() {
        command.env_remove(setting);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("the binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Sends a PgBouncer admin console command (`PAUSE db`, `RESUME db`) with psql.
fn admin(bouncer: &PgBouncer, command: &str) {
    let output = std::process::Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &bouncer.port.to_string(),
            "-U",
            "postgres",
            "-d",
            "pgbouncer",
            "-c",
            command,
        ])
        .output()
        .expect("psql runs");
    assert!(
        output.status.success(),
        "{command}: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        bouncer.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_and_subcommand_works_through_pgbouncer_in_transaction_mode_and_a_pooler_error_is_a_503()
 {
    let Some(bouncer) = PgBouncer::start_if_installed("127.0.0.1", 5432) else {
        return;
    };
    let database = TestDatabase::new();
    let executor = LoopbackExecutor::start().await;
    let env: Vec<(&str, String)> = vec![
        ("DATABASE_URL", bouncer.url(&database.name)),
        ("DATABASE_MIGRATION_URL", database.url.clone()),
        ("DATABASE_PGBOUNCER", "true".to_owned()),
        ("DATABASE_POOL_SIZE", "12".to_owned()),
        ("TOOLS_CONFIG", executor.tools_config()),
    ];

    // Subcommands: the migrations over the direct URL, everything else through PgBouncer.
    let (ok, _, stderr) = subcommand(&env, &["migrate"]).await;
    assert!(ok, "migrate: {stderr}");
    let scopes = [
        "users:write",
        "runs:write",
        "runs:read",
        "decisions:write",
        "approvals:read",
        "metrics:read",
    ];
    let mut add = vec!["clients", "add", "e2e"];
    for scope in &scopes {
        add.extend(["--scope", scope]);
    }
    let (ok, key, stderr) = subcommand(&env, &add).await;
    assert!(ok, "clients add: {stderr}");
    let key = key.trim().to_owned();
    let (ok, _, stderr) =
        subcommand(&env, &["clients", "add", "spare", "--scope", "runs:read"]).await;
    assert!(ok, "clients add spare: {stderr}");

    let settings: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let service = Service::start_with(&database, &settings).await;
    let client = reqwest::Client::new();
    let api = Api::new(service.url(""), key.clone(), Duration::from_secs(30));
    let request = |method: reqwest::Method, path: String, body: Option<Value>| {
        let (client, url, key) = (client.clone(), service.url(&path), key.clone());
        async move { call(&client, method, url, &key, body).await }
    };

    for uid in 1..=OWNERS {
        let body = json!({"username": format!("u{uid}"), "is_admin": false, "can_approve_others": false, "disabled": false});
        let (status, body) =
            request(reqwest::Method::PUT, format!("/v1/users/{uid}"), Some(body)).await;
        assert_eq!(status, 200, "{body}");
    }
    // Registrations and decisions 16 at a time over 12 client connections and 3 server connections.
    let runs: Vec<Target> = api.seed(60, 16).await;
    let decided = join_all(runs.iter().enumerate().map(|(i, run)| {
        let api = api.clone();
        async move { api.decide(run, i % 3 == 0).await }
    }))
    .await;
    let failed: Vec<_> = decided
        .iter()
        .filter(|answer| answer.status != Some(200))
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{}", service.log());
    // A client retrying the same decision gets the same answer, and the approved calls ran once each.
    for (i, run) in runs.iter().enumerate().take(6) {
        assert_eq!(api.decide(run, i % 3 == 0).await.status, Some(200));
    }
    let approved = runs.iter().step_by(3).count();
    let calls = executor.calls();
    assert_eq!(calls.len(), 2 * approved, "{calls:?}");
    assert!(calls.values().all(|&n| n == 1), "{calls:?}");

    let (denied, approved) = (&runs[1], &runs[0]);
    for path in [
        format!("/v1/runs/{}", denied.id),
        format!("/v1/runs/{}/model-input", denied.id),
        format!("/v1/runs/{}/events", approved.id),
        format!("/v1/approvals?acting_uid={}", runs[2].owner),
    ] {
        let (status, body) = request(reqwest::Method::GET, path.clone(), None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let next_turn = json!({"messages": [
        {"role": "assistant", "content": "Should I propose it again?"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function",
            "function": {"name": "update_page", "arguments": "{\"page\": 12}"}}]},
    ]});
    let path = format!("/v1/runs/{}/turns", denied.id);
    let (status, body) = request(reqwest::Method::POST, path, Some(next_turn)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "waiting_for_approval");
    // A run in a provider's own format (docs/design.md §14), its fixture's bytes sent as they are: denied, continued
    // with a second turn, and its model input read while that turn waits, the registered messages byte for byte
    // throughout.
    let fixture = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/native/anthropic.json"
    ))
    .unwrap();
    let native = uuid::Uuid::new_v4();
    let send = |path: String, text: String| {
        let (client, url, key) = (client.clone(), service.url(&path), key.clone());
        async move {
            let answer = client
                .post(url)
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(text)
                .send()
                .await
                .expect("an answer");
            (answer.status().as_u16(), answer.text().await.unwrap())
        }
    };
    let (status, run) = send(
        "/v1/runs".into(),
        format!("{{\"id\":\"{native}\",\"owner_uid\":1,{}", &fixture[1..]),
    )
    .await;
    assert_eq!(status, 201, "{run}");
    let digest = serde_json::from_str::<Value>(&run).unwrap()["turn"]["digest"].clone();
    let deny = json!({"approved": false, "decider_uid": 1, "turn_digest": digest});
    let (status, answer) = send(format!("/v1/runs/{native}/decision"), deny.to_string()).await;
    assert_eq!(status, 200, "{answer}");
    let messages = fixture.split_once("\"messages\":").unwrap().1;
    let messages = &messages[..messages.find("],\"tools\"").unwrap()];
    assert!(answer.contains(messages), "{answer}");
    let turn = r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"read_page","input":{"page":1.50}}]}]}"#;
    let (status, body) = send(format!("/v1/runs/{native}/turns"), turn.into()).await;
    assert_eq!(status, 200, "{body}");
    let (status, waiting) = request(
        reqwest::Method::GET,
        format!("/v1/runs/{native}/model-input"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{waiting}");
    let model_input = serde_json::from_str::<Value>(&answer).unwrap()["model_input"].clone();
    assert_eq!(waiting, model_input);

    let (status, body) = request(
        reqwest::Method::POST,
        format!("/v1/runs/{}/cancel", denied.id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(
        reqwest::Method::POST,
        format!("/v1/runs/{}/complete", approved.id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for path in ["/readyz", "/metrics"] {
        let answer = client
            .get(service.url(path))
            .bearer_auth(&key)
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), 200, "{path}");
    }

    // An error of the pooler: a paused database makes PgBouncer give up on the statement (`query_wait_timeout`).
    admin(&bouncer, &format!("PAUSE {}", database.name));
    let answer = client
        .get(service.url(&format!("/v1/runs/{}", denied.id)))
        .bearer_auth(&key)
        .send()
        .await
        .expect("an answer");
    let status = answer.status();
    let retry_after = answer.headers().contains_key("retry-after");
    let body = answer.text().await.unwrap_or_default();
    admin(&bouncer, &format!("RESUME {}", database.name));
    assert_eq!(status, 503, "{body}\n{}", service.log());
    assert!(retry_after, "{body}");
    let mut served_again = false;
    for _ in 0..50 {
        let (status, _) = request(
            reqwest::Method::GET,
            format!("/v1/runs/{}", denied.id),
            None,
        )
        .await;
        if status == 200 {
            served_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served_again, "{}", service.log());

    let (ok, stdout, stderr) = subcommand(&env, &["clients", "list"]).await;
    assert!(
        ok && stdout.contains("e2e") && stdout.contains("spare"),
        "{stdout}{stderr}"
    );
    let (ok, stdout, stderr) = subcommand(&env, &["clients", "revoke", "spare"]).await;
    assert!(ok, "{stdout}{stderr}");
    let (ok, stdout, stderr) = subcommand(&env, &["purge", "--older-than-days", "1"]).await;
    assert!(ok && stdout.contains("purged"), "{stdout}{stderr}");

    let log = service.log();
    assert!(!log.contains("prepared statement"), "{log}");
    assert!(!log.contains("\"status\":500"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_sqlx_pool_through_pgbouncer_collides_on_named_statements_and_the_database_handle_does_not()
 {
    let Some(bouncer) = PgBouncer::start_if_installed("127.0.0.1", 5432) else {
        return;
    };
    let (database, _direct) = TestDatabase::create().await;
    let through = bouncer.url(&database.name);

    // As the issue found: sqlx's named, cached statements meet another client's of the same name. (Without
    // `extra_float_digits`, a startup parameter PgBouncer refuses unless told to ignore it.)
    let plain = PgPoolOptions::new()
        .max_connections(12)
        .connect_with(
            through
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
                .extra_float_digits(None),
        )
        .await
        .expect("PgBouncer accepts sqlx's connections");
    let answers = join_all((0..200).map(|i| {
        let plain = plain.clone();
        async move {
            sqlx::query_scalar::<_, i32>("select $1::int4 + 1")
                .bind(i)
                .fetch_one(&plain)
                .await
        }
    }))
    .await;
    let collided = answers
        .iter()
        .filter_map(|answer| answer.as_ref().err())
        .map(ToString::to_string)
        .find(|error| error.contains("prepared statement"));
    assert!(collided.is_some(), "no collision: {:?}", &answers[..3]);
    plain.close().await;

    // Unnamed statements alone are not enough: outside a transaction, sqlx's Parse/Describe/Sync ends in an idle
    // ReadyForQuery, PgBouncer hands the server connection back, and the Bind/Execute that follows finds no statement.
    sql::use_named_statements(false);
    let pool = PgPoolOptions::new()
        .max_connections(12)
        .connect_with(
            through
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
                .statement_cache_capacity(0)
                .extra_float_digits(None),
        )
        .await
        .expect("PgBouncer accepts the connections");
    let outside = sql::query_scalar::<i32>("select $1::int4 + 1")
        .bind(1)
        .fetch_one(&pool)
        .await
        .expect_err(
            "an unnamed statement outside a transaction is split across server connections",
        );
    assert!(
        outside
            .to_string()
            .contains("unnamed prepared statement does not exist"),
        "{outside}"
    );

    // The same load, and transactions, through `Database` configured as DATABASE_PGBOUNCER=true configures it.
    let handle = Database::behind_pooler(pool, &[("statement_timeout", "2000".to_owned())]);
    let answers = join_all((0..200).map(|i| {
        let handle = handle.clone();
        async move {
            if i % 2 == 0 {
                let ready = storage::is_ready(&handle)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<i64, String>(i64::from(ready))
            } else {
                let mut tx = handle.begin().await.map_err(|e| e.to_string())?;
                let timeout: String =
                    sql::query_scalar("select current_setting('statement_timeout')")
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(|e| e.to_string())?;
                tx.commit().await.map_err(|e| e.to_string())?;
                assert_eq!(timeout, "2s", "each transaction carries the timeout");
                Ok(i)
            }
        }
    }))
    .await;
    let failed: Vec<&String> = answers
        .iter()
        .filter_map(|answer| answer.as_ref().err())
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{}", bouncer.log());
    assert!(
        answers.iter().step_by(2).all(|answer| answer == &Ok(1)),
        "every migration is applied"
    );
}
