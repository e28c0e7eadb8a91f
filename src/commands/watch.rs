//! `approval-resume watch`: follows the feed (`GET /v1/events`) over HTTP with a key, printing each event as a JSON
//! line, until Ctrl-C or until its reader goes away (`watch | head`). It needs no access to the service's database.

use std::io::{self, Write};
use std::time::Duration;

use serde_json::Value;

use super::CommandError;
use crate::config::WatchArgs;

pub async fn run(args: WatchArgs) -> Result<(), CommandError> {
    match follow(args).await {
        // The reader of standard output (or error) went away, as `head` does once it has its lines: what was asked
        // for was printed, so this is an end, not a failure.
        Err(Ended::Closed) => Ok(()),
        Err(Ended::Failed(error)) => Err(error),
        Ok(()) => Ok(()),
    }
}

/// Why following stopped before Ctrl-C.
enum Ended {
    /// Standard output or error was closed by its reader.
    Closed,
    Failed(CommandError),
}

impl From<CommandError> for Ended {
    fn from(error: CommandError) -> Self {
        Ended::Failed(error)
    }
}

async fn follow(args: WatchArgs) -> Result<(), Ended> {
    let http = |error: reqwest::Error| CommandError::Http(with_causes(&error.without_url()));
    let client = reqwest::Client::builder()
        // Each poll waits up to `wait` seconds on the service; give it a margin.
        .timeout(Duration::from_secs(args.wait + 10))
        .build()
        .map_err(http)?;
    let url = format!("{}/v1/events", args.url.trim_end_matches('/'));
    let mut after = args.after;
    say(&mut io::stderr(), &format!("following {url}; Ctrl-C stops"))?;
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
                let status = response.status();
                say(
                    &mut io::stderr(),
                    &format!("the feed answered {status}; asking again in a second"),
                )?;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(error) => {
                let cause = with_causes(&error.without_url());
                say(
                    &mut io::stderr(),
                    &format!("the feed is unreachable ({cause}); asking again in a second"),
                )?;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let status = response.status();
        let body: Value = response.json().await.map_err(http)?;
        if !status.is_success() {
            let detail = body["detail"].as_str().unwrap_or("");
            return Err(CommandError::Http(format!("the feed answered {status}: {detail}")).into());
        }
        let mut out = io::stdout().lock();
        for event in body["events"].as_array().into_iter().flatten() {
            say(&mut out, &event.to_string())?;
        }
        after = body["next_cursor"].as_str().map(str::to_owned);
    }
}

/// Writes one line; a closed pipe ends the command quietly, where `println!` would panic.
fn say(out: &mut impl Write, line: &str) -> Result<(), Ended> {
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Err(Ended::Closed),
        Err(error) => Err(CommandError::Http(format!("cannot write: {error}")).into()),
    }
}

/// An error with every cause below it, `error sending request: client error (Connect): tcp connect error:
/// Connection refused (os error 111)`: reqwest's own text names none of them, and the cause (refused, a name that
/// does not resolve, a certificate) is what the operator acts on. A cause whose text its parent already holds is
/// skipped.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn chain(texts: &[&'static str]) -> Layer {
        texts
            .iter()
            .rev()
            .fold(None, |source, text| {
                Some(Layer {
                    text,
                    source: source.map(Box::new),
                })
            })
            .expect("one layer at least")
    }

    #[test]
    fn an_error_is_told_with_every_cause_below_it_once() {
        let error = chain(&[
            "error sending request",
            "tcp connect error",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            with_causes(&error),
            "error sending request: tcp connect error: Connection refused (os error 111)"
        );
        let repeated = chain(&["dns error: no such host", "no such host"]);
        assert_eq!(with_causes(&repeated), "dns error: no such host");
    }

    /// A writer whose reader has gone away.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_ends_the_output_quietly() {
        assert!(matches!(say(&mut ClosedPipe, "{}"), Err(Ended::Closed)));
        let mut written = Vec::new();
        assert!(say(&mut written, "{}").is_ok());
        assert_eq!(written, b"{}\n");
    }
}
