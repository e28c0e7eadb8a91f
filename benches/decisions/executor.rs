//! The no-op tool executor of the approve phases, and the TOOLS_CONFIG file that points the service at it.

use std::path::Path;

use axum::Router;
use axum::routing::post;

use crate::transcript::{READ_TOOL, WRITE_TOOL};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The content of every answer of the no-op executor (and so the result the naive approval floor stores).
pub const OK_CONTENT: &str = "ok";

/// Serves `POST /tools/{tool}` with `{"content":"ok","is_error":false}` on a free loopback port; returns the port.
/// It runs on the harness's runtime, so its (small) CPU cost is counted as the harness's.
pub async fn start() -> Result<u16, Error> {
    let app = Router::new().route(
        "/tools/{tool}",
        post(|| async {
            (
                [("content-type", "application/json")],
                r#"{"content":"ok","is_error":false}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(port)
}

/// Writes the TOOLS_CONFIG file (see src/executor.rs) naming the executor for both tools of the synthetic runs.
pub fn write_config(path: &Path, port: u16) -> Result<(), Error> {
    let mut text = String::new();
    for (tool, effect) in [(WRITE_TOOL, "write"), (READ_TOOL, "read")] {
        text.push_str(&format!(
            "[tools.{tool}]\nurl = \"http://127.0.0.1:{port}/tools/{tool}\"\neffect = \"{effect}\"\ntimeout_ms = 5000\n\n"
        ));
    }
    std::fs::write(path, text)?;
    Ok(())
}
