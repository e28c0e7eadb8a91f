//! End-to-end tests of the real binary on a real port: `clients add`, `serve`, a denial by the run's owner over
//! HTTP, a graceful stop on SIGTERM, start-up refusing invalid settings, and `migrate` and `clients list|revoke`.
//! One more test keeps README.md's tables of settings and scopes in step with the code, and one checks the
//! allocator's options the binary sets as it loads.
//!
//! Each test works in a database of its own, created by the binary itself (it creates a missing database) on the
//! server `DATABASE_URL` names, and dropped at the end.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use approval_resume::config::Cli;
use approval_resume::domain::scopes::Scope;
use clap::CommandFactory;
use serde_json::{Value, json};
use uuid::Uuid;

mod support;

use support::*;

#[tokio::test]
async fn the_served_binary_tells_the_model_that_the_owner_declined_and_stops_cleanly_on_sigterm() {
    let database = TestDatabase::new();
    let key = add_client(
        &database,
        &["users:write", "runs:write", "runs:read", "decisions:write"],
    )
    .await;
    let mut service = Service::start(&database).await;
    let client = reqwest::Client::new();

    let (status, user) = call(
        &client,
        reqwest::Method::PUT,
        service.url("/v1/users/7"),
        &key,
        Some(json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false})),
    )
    .await;
    assert_eq!(status, 200, "{user}");
    assert_eq!(user["uid"], 7);

    // A marker in the arguments, which must never reach the logs.
    let marker = format!("e2e-secret-{}", Uuid::new_v4().simple());
    let arguments = json!({"page": 12, "description": marker}).to_string();
    let run_id = Uuid::new_v4();
    let (status, run) = call(
        &client,
        reqwest::Method::POST,
        service.url("/v1/runs"),
        &key,
        Some(json!({
            "id": run_id,
            "owner_uid": 7,
            "messages": [
                {"role": "system", "content": "You edit page metadata."},
                {"role": "user", "content": "Write a meta description for page 12."},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "update_page_metadata", "arguments": arguments}
                }]}
            ],
            "tools": [{"name": "update_page_metadata", "effect": "write"}]
        })),
    )
    .await;
    assert_eq!(status, 201, "{run}");

    let (status, run) = call(
        &client,
        reqwest::Method::GET,
        service.url(&format!("/v1/runs/{run_id}")),
        &key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "waiting_for_approval");
    assert_eq!(
        run["turn"]["pending_calls"][0]["name"],
        "update_page_metadata"
    );
    let digest = run["turn"]["digest"]
        .as_str()
        .expect("the run has a turn digest")
        .to_owned();

    let (status, decided) = call(
        &client,
        reqwest::Method::POST,
        service.url(&format!("/v1/runs/{run_id}/decision")),
        &key,
        Some(json!({"approved": false, "decider_uid": 7, "turn_digest": digest})),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["status"], "resumed");
    assert_eq!(decided["decision"]["decided_by"], "run_owner");
    let result = &decided["results"][0];
    assert_eq!(result["call_id"], "call_1");
    assert_eq!(result["outcome"], "denied");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"],
        "Error: approval_denied (decided_by: run_owner). The approval for tool \"update_page_metadata\" was \
         declined by the user who started this run, the person you are talking to. Nothing was executed. Tell \
         them that they declined the approval themselves, not the system or an operator, and ask whether the \
         change should be proposed again."
    );

    let answer = client
        .get(service.url("/openapi.yaml"))
        .send()
        .await
        .expect("the service answers");
    assert_eq!(answer.status(), 200);
    let served = answer.text().await.expect("the document");
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml"))
            .expect("openapi.yaml is in the repository");
    assert_eq!(
        served, committed,
        "the served spec is the committed openapi.yaml"
    );
    assert!(served.contains("openapi:"), "an OpenAPI document");

    drop(client);
    let status = service.terminate(Duration::from_secs(GRACE_SECS + 5)).await;
    let log = service.log();
    assert_eq!(
        status.code(),
        Some(0),
        "exit after SIGTERM: {status}\n{log}"
    );
    assert!(
        log.lines()
            .all(|line| serde_json::from_str::<Value>(line).is_ok()),
        "LOG_FORMAT=json writes JSON lines:\n{log}"
    );
    assert!(
        !log.contains(&marker),
        "logs never contain tool arguments:\n{log}"
    );
}

/// The `allocator options in effect` line of a service's JSON log: `(arena_eager_commit, purge_delay_ms)`.
fn allocator_options(log: &str) -> (i64, i64) {
    let line = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("allocator options in effect"))
        })
        .unwrap_or_else(|| panic!("no allocator line in the log:\n{log}"));
    let number = |field: &str| {
        line[field]
            .as_i64()
            .unwrap_or_else(|| panic!("{field} in {line}"))
    };
    (number("arena_eager_commit"), number("purge_delay_ms"))
}

#[tokio::test]
async fn the_binary_commits_memory_as_used_and_gives_it_back_at_once_unless_the_environment_says_otherwise()
 {
    let database = TestDatabase::new();
    let service = Service::start(&database).await;
    assert_eq!(
        allocator_options(&service.log()),
        (0, 0),
        "the binary's own settings (src/allocator.rs)"
    );
    drop(service);

    // mimalloc reads the variable in any letter case; the option it does not name keeps the binary's setting.
    let service = Service::start_with(&database, &[("Mimalloc_Purge_Delay", "250")]).await;
    assert_eq!(allocator_options(&service.log()), (0, 250));
    drop(service);
    let service = Service::start_with(&database, &[("MIMALLOC_ARENA_EAGER_COMMIT", "1")]).await;
    assert_eq!(allocator_options(&service.log()), (1, 0));
}

/// The resident memory of a served binary after the same few hundred requests, in KiB.
async fn resident_after_requests(database: &TestDatabase, settings: &[(&str, &str)]) -> u64 {
    let service = Service::start_with(database, settings).await;
    let client = reqwest::Client::new();
    for _ in 0..300 {
        let answer = client
            .get(service.url("/readyz"))
            .send()
            .await
            .expect("the service answers");
        assert_eq!(answer.status(), 200);
    }
    service.resident_kib()
}

#[tokio::test]
async fn the_allocator_options_take_effect_before_the_first_arena_is_committed() {
    // Set any later (in `main`, say), the options would find mimalloc's first arena already reserved and committed
    // whole; the process would then hold as much as with that arena setting named in the environment.
    let database = TestDatabase::new();
    let shipped = resident_after_requests(&database, &[]).await;
    let eager = resident_after_requests(&database, &[("MIMALLOC_ARENA_EAGER_COMMIT", "2")]).await;
    eprintln!(
        "resident after 300 requests: as shipped {shipped} KiB, arena committed eagerly {eager} KiB"
    );
    assert!(
        shipped + 4 * 1024 < eager,
        "as shipped {shipped} KiB resident, with the arena committed eagerly {eager} KiB"
    );
}

/// Starts `serve` with one extra setting and expects it to refuse: exit code 2 and the variable named on stderr.
async fn assert_start_refused(setting: &str, value: &str) {
    let database = TestDatabase::new();
    let mut command = binary(&database);
    command
        .arg("serve")
        .env("LISTEN_ADDR", format!("127.0.0.1:{}", free_port()))
        .env(setting, value);
    let output = tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("an invalid setting stops the start at once")
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{setting}={value}: {}\n{stderr}",
        output.status
    );
    assert!(
        stderr.contains(setting),
        "the message names {setting}: {stderr}"
    );
}

#[tokio::test]
async fn an_unknown_privacy_level_stops_the_start_with_exit_code_2_naming_the_variable() {
    assert_start_refused("PRIVACY_LEVEL", "secret").await;
}

#[tokio::test]
async fn a_statement_timeout_not_below_the_request_timeout_stops_the_start_naming_the_variable() {
    assert_start_refused("DATABASE_STATEMENT_TIMEOUT_MS", "40000").await;
}

/// Runs the binary with `args` against `database`; answers its exit status, stdout and stderr.
async fn run(database: &TestDatabase, args: &[&str]) -> (ExitStatus, String, String) {
    let output = binary(database)
        .args(args)
        .output()
        .await
        .expect("the binary runs");
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn clients_are_listed_without_their_keys_and_a_revoked_client_is_shown_revoked() {
    let database = TestDatabase::new();
    let (status, stdout, stderr) = run(&database, &["migrate"]).await;
    assert!(status.success(), "migrate: {status}\n{stderr}");
    assert_eq!(stdout.trim(), "migrations applied");

    let key = add_client(&database, &["runs:read", "decisions:anonymous"]).await;
    let (status, listed, stderr) = run(&database, &["clients", "list"]).await;
    assert!(status.success(), "clients list: {status}\n{stderr}");
    let row = listed
        .lines()
        .find(|line| line.starts_with("e2e "))
        .unwrap_or_else(|| panic!("the client is listed: {listed}"));
    assert!(row.contains("active"), "{row}");
    assert!(row.contains("decisions:anonymous runs:read"), "{row}");
    assert!(
        !listed.contains(&key) && !listed.contains(&key[3..11]),
        "no part of the key is listed: {listed}"
    );

    let (status, stdout, stderr) = run(&database, &["clients", "revoke", "e2e"]).await;
    assert!(status.success(), "clients revoke: {status}\n{stderr}");
    assert_eq!(stdout.trim(), "revoked e2e");
    let (_, listed, _) = run(&database, &["clients", "list"]).await;
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("e2e ") && line.contains("revoked")),
        "{listed}"
    );

    let (status, _, stderr) = run(&database, &["clients", "revoke", "e2e"]).await;
    assert_eq!(status.code(), Some(1), "revoking twice fails: {stderr}");
    assert!(stderr.contains("e2e"), "{stderr}");
}

#[tokio::test]
async fn clients_token_key_add_refuses_a_client_that_may_not_decide() {
    let database = TestDatabase::new();
    add_client(&database, &["runs:read"]).await;
    let (status, _, stderr) = run(
        &database,
        &["clients", "add", "decider", "--scope", "decisions:write"],
    )
    .await;
    assert!(status.success(), "clients add: {status}\n{stderr}");
    let public_key =
        std::env::temp_dir().join(format!("token-key-{}.b64", Uuid::new_v4().simple()));
    std::fs::write(&public_key, "Gb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=").unwrap();
    let public_key = public_key.to_str().unwrap();
    let add = |client: &'static str| {
        let args = [
            "clients",
            "token-key",
            "add",
            client,
            "--kid",
            "k1",
            "--public-key",
            public_key,
        ];
        let database = &database;
        async move { run(database, &args).await }
    };

    let (status, _, stderr) = add("e2e").await;
    assert_eq!(status.code(), Some(1), "a runs:read client: {stderr}");
    assert!(stderr.contains("decisions:write"), "{stderr}");
    let (status, stdout, stderr) = add("decider").await;
    assert!(
        status.success(),
        "a decisions:write client: {status}\n{stderr}"
    );
    assert_eq!(stdout.trim(), "added token key k1 to decider");
    let (_, listed, _) = run(&database, &["clients", "token-key", "list"]).await;
    let clients: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(clients, ["decider"], "{listed}");
}

#[test]
fn the_configuration_document_lists_every_setting_with_its_flag_and_default_and_every_scope() {
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .expect("docs/configuration.md is in the repository");
    let row = |name: &str| {
        readme
            .lines()
            .find(|line| line.starts_with(&format!("| `{name}` |")))
            .map(str::to_owned)
    };
    let command = Cli::command();
    let mut undocumented = Vec::new();
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env() else { continue };
        let env = env.to_string_lossy();
        let Some(line) = row(&env) else {
            undocumented.push(format!("{env}: no row"));
            continue;
        };
        if let Some(long) = arg.get_long()
            && !line.contains(&format!("`--{long}`"))
        {
            undocumented.push(format!("{env}: flag --{long}"));
        }
        for default in arg.get_default_values() {
            let default = default.to_string_lossy();
            if !line.contains(&format!("`{default}`")) {
                undocumented.push(format!("{env}: default {default}"));
            }
        }
    }
    for scope in Scope::ALL {
        if row(scope.as_str()).is_none() {
            undocumented.push(format!("scope {}: no row", scope.as_str()));
        }
    }
    assert!(
        undocumented.is_empty(),
        "docs/configuration.md is out of step with the code: {undocumented:#?}"
    );
}

#[tokio::test]
async fn watch_follows_the_feed_over_http_with_only_a_key_and_prints_a_json_line_per_event() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let database = TestDatabase::new();
    let key = add_client(&database, &["users:write", "runs:write", "events:read"]).await;
    let service = Service::start(&database).await;
    let mut watch = binary(&database);
    watch
        .args(["watch", "--url", &service.url(""), "--wait", "2"])
        .env("APPROVAL_RESUME_KEY", &key)
        // Nothing it could reach: the watcher needs no database.
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut watch = watch.spawn().expect("watch starts");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();

    let client = reqwest::Client::new();
    let user = json!({"username": "ada", "is_admin": false, "can_approve_others": false, "disabled": false});
    let (status, _) = call(
        &client,
        reqwest::Method::PUT,
        service.url("/v1/users/7"),
        &key,
        Some(user),
    )
    .await;
    assert_eq!(status, 200);
    let run_id = Uuid::new_v4();
    let body = json!({
        "id": run_id, "owner_uid": 7,
        "messages": [{"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_page", "arguments": "{}"}}]}],
    });
    let (status, _) = call(
        &client,
        reqwest::Method::POST,
        service.url("/v1/runs"),
        &key,
        Some(body),
    )
    .await;
    assert_eq!(status, 201);

    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("watch prints the event in time")
        .unwrap()
        .expect("a line");
    let event: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(event["type"], "run.waiting");
    assert_eq!(event["data"]["run_id"], run_id.to_string());

    // Its reader goes away, as `head` does once it has its lines: the next event ends it quietly, not in a panic.
    drop(lines);
    let body = json!({
        "id": Uuid::new_v4(), "owner_uid": 7,
        "messages": [{"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_page", "arguments": "{}"}}]}],
    });
    let (status, _) = call(
        &client,
        reqwest::Method::POST,
        service.url("/v1/runs"),
        &key,
        Some(body),
    )
    .await;
    assert_eq!(status, 201);
    let ended = tokio::time::timeout(Duration::from_secs(20), watch.wait())
        .await
        .expect("watch ends once its output is closed")
        .unwrap();
    assert!(ended.success(), "a closed pipe ends watch with 0: {ended}");
}

#[tokio::test]
async fn watch_names_why_the_feed_is_unreachable() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let nobody = format!("http://127.0.0.1:{}", free_port());
    let mut watch = binary(&TestDatabase::new());
    watch
        .args(["watch", "--url", &nobody, "--key", "ar_unused"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut watch = watch.spawn().expect("watch starts");
    let mut lines = BufReader::new(watch.stderr.take().unwrap()).lines();
    let said = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("unreachable") {
                return line;
            }
        }
        panic!("watch stopped without saying the feed is unreachable");
    })
    .await
    .expect("watch says so in time");
    assert!(
        said.contains("Connection refused"),
        "the cause, not only reqwest's words: {said}"
    );
    let _ = watch.start_kill();
}

#[tokio::test]
async fn a_setting_before_the_subcommand_is_refused_and_after_it_names_the_database_used() {
    // DATABASE_URL names one database; --database-url another.
    let environment = TestDatabase::new();
    let named = TestDatabase::new();
    for database in [&environment, &named] {
        let (status, _, stderr) = run(database, &["migrate"]).await;
        assert!(status.success(), "migrate: {stderr}");
    }
    let before = [
        "--database-url",
        &named.url,
        "clients",
        "add",
        "ops",
        "--scope",
        "runs:read",
    ];
    let (status, stdout, stderr) = run(&environment, &before).await;
    assert_eq!(status.code(), Some(2), "refused as a usage error: {stderr}");
    assert!(stdout.is_empty(), "no key printed: {stdout}");
    assert!(
        stderr.contains("--database-url given before the subcommand `clients add`"),
        "{stderr}"
    );
    for database in [&environment, &named] {
        let (_, listed, _) = run(database, &["clients", "list"]).await;
        assert!(
            !listed.lines().any(|line| line.starts_with("ops ")),
            "nothing written: {listed}"
        );
    }

    let after = [
        "clients",
        "add",
        "ops",
        "--scope",
        "runs:read",
        "--database-url",
        &named.url,
    ];
    let (status, _, stderr) = run(&environment, &after).await;
    assert!(status.success(), "{stderr}");
    let (_, listed, _) = run(&named, &["clients", "list"]).await;
    assert!(
        listed.lines().any(|line| line.starts_with("ops ")),
        "{listed}"
    );
    let (_, listed, _) = run(&environment, &["clients", "list"]).await;
    assert!(
        !listed.lines().any(|line| line.starts_with("ops ")),
        "{listed}"
    );
}

#[tokio::test]
async fn webhooks_add_prints_the_secret_once_and_list_never_shows_it() {
    let database = TestDatabase::new();
    let (status, stdout, stderr) = run(
        &database,
        &[
            "webhooks",
            "add",
            "--url",
            "http://127.0.0.1:9/a",
            "--event",
            "run.resumed",
            "--tenant",
            "acme",
            // A URL's host is resolved when it is added (docs/design.md §10) and this machine has no DNS: a loopback
            // receiver, let through as tests do. Nothing is delivered: no service runs.
            "--webhook-allow-private-addresses",
            "true",
        ],
    )
    .await;
    assert!(status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "the secret alone on stdout: {stdout:?}");
    let secret = lines[0];
    assert!(secret.starts_with("whsec_"), "{secret}");

    let (status, listed, _) = run(&database, &["webhooks", "list", "--tenant", "acme"]).await;
    assert!(status.success());
    assert!(
        listed.contains("http://127.0.0.1:9/a") && listed.contains("run.resumed"),
        "{listed}"
    );
    assert!(
        !listed.contains(secret) && !listed.contains("whsec_"),
        "{listed}"
    );
    let id = listed
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();

    let (status, _, stderr) = run(
        &database,
        &["webhooks", "add", "--url", "ftp://x/", "--tenant", "acme"],
    )
    .await;
    assert!(
        !status.success() && stderr.contains("http or https"),
        "{stderr}"
    );
    let (status, _, _) = run(&database, &["webhooks", "remove", &id]).await;
    assert!(status.success());
    let (_, listed, _) = run(&database, &["webhooks", "list"]).await;
    assert_eq!(
        listed.lines().count(),
        1,
        "only the header is left: {listed}"
    );
}
