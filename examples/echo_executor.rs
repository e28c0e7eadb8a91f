//! A tool executor to try the approve path with: it answers every call with what it was asked to do.
//!
//! Run it with `cargo run --example echo_executor` (it listens on 127.0.0.1:9000, or the address given as the
//! first argument; with port 0 it takes a free port, which the line it prints names), point a tool at
//! `http://127.0.0.1:9000/tools/{tool}` in TOOLS_CONFIG, and approve a turn.
//! It refuses calls for tools named `fail_*` with `is_error: true`, to show how a tool's own error reads.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

/// What the service sends for each approved call.
#[derive(Debug, Deserialize)]
struct Call {
    run_id: String,
    call_id: String,
    tool: String,
    arguments: Value,
    owner_uid: i64,
}

/// Idempotency keys already answered: a repeat with a known key is answered without acting again.
type Seen = Arc<Mutex<HashSet<String>>>;

async fn execute(
    State(seen): State<Seen>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    Json(call): Json<Call>,
) -> Result<Json<Value>, StatusCode> {
    let key = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .ok_or(StatusCode::BAD_REQUEST)?
        .to_owned();
    if key != format!("{}:{}", call.run_id, call.call_id) || tool != call.tool {
        return Err(StatusCode::BAD_REQUEST);
    }
    let repeated = !seen
        .lock()
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?
        .insert(key);
    let fields = call
        .arguments
        .as_object()
        .map(|object| object.len())
        .unwrap_or(0);
    let done = if repeated { "already done" } else { "done" };
    Ok(Json(json!({
        "content": format!("{} {done} for user {} with {fields} argument(s).", call.tool, call.owner_uid),
        "is_error": call.tool.starts_with("fail_"),
    })))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".to_owned());
    let app = Router::new()
        .route("/tools/{tool}", post(execute))
        .with_state(Seen::default());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    // The bound address, not the one asked for: given port 0, the kernel picks a free port, which a script that
    // starts the executor (tests/clients/run.sh) reads from this line.
    let address = listener.local_addr()?;
    eprintln!("echo executor listening on http://{address}/tools/{{tool}}");
    axum::serve(listener, app).await
}
