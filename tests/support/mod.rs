//! What every test binary shares, included once by each (`mod support;`): here the harness for tests of the real
//! binary (a database of the test's own, the `clients add` subcommand, the served binary on a free port, and
//! authenticated JSON calls); in `app` the service in-process for the API tests, built by `Application::build`; in
//! `cluster`, `load`, `consistency` and `observed` a private Postgres cluster, a load of decisions, the checks of
//! what it left, and the statements a cluster saw.

#![allow(dead_code)] // Each test binary uses the part of the harness it needs.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use approval_resume::config::Cli;
use clap::CommandFactory;
use serde_json::Value;
use tokio::process::{Child, Command};

pub mod app;
pub mod cluster;
pub mod consistency;
pub mod database;
pub mod executor;
pub mod load;
pub mod observed;
pub mod pgbouncer;

pub use database::TestDatabase;

pub const BINARY: &str = env!("CARGO_BIN_EXE_approval-resume");

/// Every setting the binary reads from the environment, from its own command-line definition. The tests set what
/// they need and clear the rest, so a variable exported in the developer's shell cannot change what they test.
pub fn settings() -> Vec<String> {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| arg.get_env())
        .map(|env| env.to_string_lossy().into_owned())
        .collect()
}

/// The grace period the served binary gets; it must stop well within it when nothing is in flight.
pub const GRACE_SECS: u64 = 5;

/// A command of the binary with a clean environment but for `DATABASE_URL`: none of its settings, and none of
/// mimalloc's variables (which it reads in any letter case), so that it runs as shipped.
pub fn binary(database: &TestDatabase) -> Command {
    let mut command = Command::new(BINARY);
    for setting in settings() {
        command.env_remove(setting);
    }
    for (name, _) in std::env::vars_os() {
        if name
            .to_string_lossy()
            .to_ascii_uppercase()
            .starts_with("MIMALLOC_")
        {
            command.env_remove(name);
        }
    }
    command
        .env("DATABASE_URL", &database.url)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `approval-resume clients add e2e --scope …` and returns the key it prints, once, on standard output.
pub async fn add_client(database: &TestDatabase, scopes: &[&str]) -> String {
    let mut command = binary(database);
    command.args(["clients", "add", "e2e"]);
    for scope in scopes {
        command.args(["--scope", scope]);
    }
    let output = command.output().await.expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "clients add failed: {}\n{stderr}",
        output.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "clients add prints the key alone on stdout: {stdout:?}"
    );
    let key = lines[0].trim().to_owned();
    assert!(key.starts_with("ar_"), "a key looks like ar_…: {key:?}");
    key
}

/// A free port on the loopback interface: bound to port 0, then released for the service to take.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The served binary. Dropping it kills the process if it still runs.
pub struct Service {
    child: Child,
    base: String,
    log_path: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Service {
    pub async fn start(database: &TestDatabase) -> Self {
        Self::start_with(database, &[]).await
    }

    /// Starts `serve` with extra settings, and waits until it is ready.
    pub async fn start_with(database: &TestDatabase, settings: &[(&str, &str)]) -> Self {
        let log_dir = tempfile::tempdir().expect("a temporary directory");
        let log_path = log_dir.path().join("service.log");
        let log = std::fs::File::create(&log_path).expect("a log file");
        let port = free_port();
        let mut command = binary(database);
        command
            .arg("serve")
            .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .env("LOG_FORMAT", "json")
            .env("SHUTDOWN_GRACE_SECS", GRACE_SECS.to_string())
            .stdout(Stdio::null())
            .stderr(log);
        for (name, value) in settings {
            command.env(name, value);
        }
        let child = command.spawn().expect("the binary starts");
        let mut service = Service {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log_path,
            _log_dir: log_dir,
        };
        service.wait_until_ready().await;
        service
    }

    /// Kills the process at once (SIGKILL), as a crash would: nothing of it runs afterwards.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Polls `/readyz` for at most 20 seconds.
    pub async fn wait_until_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be polled") {
                panic!(
                    "the service exited before it was ready: {status}\n{}",
                    self.log()
                );
            }
            let ready = client
                .get(format!("{}/readyz", self.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|answer| answer.status().is_success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the service was not ready within 20 s\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process's resident memory now (`VmRSS`), in KiB.
    pub fn resident_kib(&self) -> u64 {
        let pid = self.child.id().expect("the service still runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .expect("a VmRSS line")
    }

    /// Sends SIGTERM and waits for the exit, at most `within`.
    pub async fn terminate(&mut self, within: Duration) -> ExitStatus {
        let pid = self.child.id().expect("the service still runs");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid} failed: {sent}");
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("the exit status"),
            Err(_) => panic!(
                "the service did not stop within {within:?} of SIGTERM\n{}",
                self.log()
            ),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.start_kill();
        }
    }
}

/// An authenticated JSON request; answers the status and the parsed body.
pub async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    key: &str,
    body: Option<Value>,
) -> (reqwest::StatusCode, Value) {
    let mut request = client.request(method, url).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.expect("the service answers");
    let status = answer.status();
    let text = answer.text().await.expect("an answer body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}
