//! `approval-resume watch`: follows the feed (`GET /v1/events`) over HTTP with a key, printing each event as a JSON
//! line, until Ctrl-C. It needs no access to the service's database.

use std::time::Duration;

use serde_json::Value;

use super::CommandError;
use crate::config::WatchArgs;

pub async fn run(args: WatchArgs) -> Result<(), CommandError> {
    let http = |error: reqwest::Error| CommandError::Http(error.without_url().to_string());
    let client = reqwest::Client::builder()
        // Each poll waits up to `wait` seconds on the service; give it a margin.
        .timeout(Duration::from_secs(args.wait + 10))
        .build()
        .map_err(http)?;
    let url = format!("{}/v1/events", args.url.trim_end_matches('/'));
    let mut after = args.after;
    eprintln!("following {url}; Ctrl-C stops");
    loop {
        let mut query: Vec<(&str, String)> = vec![("wait", args.wait.to_string())];
        if let Some(cursor) = &after {
            query.push(("after", cursor.clone()));
        }
        let request = client
            .get(&url)
            .bearer_auth(args.key.expose())
            .query(&query)
            .send();
        let response = tokio::select! {
            response = request => response,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        // The service restarting or briefly unavailable is waited out; a refusal (a bad key, a bad cursor) is not.
        let response = match response {
            Ok(response) if !response.status().is_server_error() => response,
            Ok(response) => {
                eprintln!(
                    "the feed answered {}; asking again in a second",
                    response.status()
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(error) => {
                eprintln!(
                    "the feed is unreachable ({}); asking again in a second",
                    http(error)
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let status = response.status();
        let body: Value = response.json().await.map_err(http)?;
        if !status.is_success() {
            let detail = body["detail"].as_str().unwrap_or("");
            return Err(CommandError::Http(format!(
                "the feed answered {status}: {detail}"
            )));
        }
        for event in body["events"].as_array().into_iter().flatten() {
            println!("{event}");
        }
        after = body["next_cursor"].as_str().map(str::to_owned);
    }
}
