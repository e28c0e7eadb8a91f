//! A tool executor on a loopback port that answers every call `{"content": "<tool> done"}` and counts the calls
//! by idempotency key, and a `TOOLS_CONFIG` file naming it for the two tools of the fault load's runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

/// Calls received, by `Idempotency-Key`.
type Calls = Arc<Mutex<HashMap<String, usize>>>;

pub struct LoopbackExecutor {
    calls: Calls,
    /// Holds the TOOLS_CONFIG file.
    dir: tempfile::TempDir,
}

impl LoopbackExecutor {
    pub async fn start() -> LoopbackExecutor {
        let calls: Calls = Arc::default();
        let app = axum::Router::new()
            .route("/{tool}", post(answer))
            .with_state(Arc::clone(&calls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = ["update_page", "read_page"]
            .iter()
            .map(|tool| format!("[tools.{tool}]\nurl = \"{base}/{tool}\"\neffect = \"write\"\n"))
            .collect::<String>();
        std::fs::write(dir.path().join("tools.toml"), config).expect("TOOLS_CONFIG is writable");
        LoopbackExecutor { calls, dir }
    }

    /// The TOOLS_CONFIG path to give the service.
    pub fn tools_config(&self) -> String {
        self.dir.path().join("tools.toml").display().to_string()
    }

    /// How many times each call (by idempotency key) was received.
    pub fn calls(&self) -> HashMap<String, usize> {
        self.calls.lock().unwrap().clone()
    }
}

async fn answer(
    State(calls): State<Calls>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let key = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    *calls.lock().unwrap().entry(key).or_default() += 1;
    Json(
        json!({"content": format!("{} done", body["tool"].as_str().unwrap_or("")), "is_error": false}),
    )
}
