//! Commit-to-consumer latency: while the open-loop deny phase runs, a feed reader long-polls `GET /v1/events` and
//! a webhook receiver on loopback takes every event. Each arrival is measured against the event's `timestamp`
//! (when its transaction began, on the same machine's clock), so the figure is an upper bound of commit to
//! consumer: it also holds the transaction itself, a few milliseconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;
type Lags = Arc<Mutex<Vec<Duration>>>;

/// How long after its transaction began an event arrived.
fn lag_of(event: &Value) -> Option<Duration> {
    let timestamp = event["timestamp"].as_str()?;
    let began = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    (chrono::Utc::now() - began.with_timezone(&chrono::Utc))
        .to_std()
        .ok()
}

/// A feed reader and a webhook receiver, collecting the lag of each `run.resumed` event.
pub struct Consumers {
    pub feed: Lags,
    pub webhook: Lags,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Consumers {
    /// Subscribes a receiver on loopback (the service must run with WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true) and
    /// starts following the feed from its current end.
    pub async fn start(base_url: &str, key: &str) -> Result<Consumers, Error> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let webhook: Lags = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let received = Arc::clone(&webhook);
        let router = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let received = Arc::clone(&received);
            async move {
                if let Ok(event) = serde_json::from_slice::<Value>(&body)
                    && event["type"] == "run.resumed"
                    && let Some(lag) = lag_of(&event)
                {
                    received.lock().unwrap().push(lag);
                }
                axum::http::StatusCode::NO_CONTENT
            }
        });
        let mut until = stopped.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = until.changed().await;
                })
                .await;
        });
        let client = reqwest::Client::new();
        let created = client
            .post(format!("{base_url}/v1/webhooks"))
            .bearer_auth(key)
            .json(&json!({"url": url, "event_types": ["run.resumed"]}))
            .send()
            .await?;
        if created.status() != 201 {
            return Err(format!("subscribing answered {}", created.status()).into());
        }

        // The end of the feed so far, so that only the phase's events are measured (`&after=…` once known).
        let mut after = String::new();
        loop {
            let page: Value = client
                .get(format!("{base_url}/v1/events?limit=1000{after}"))
                .bearer_auth(key)
                .send()
                .await?
                .json()
                .await?;
            let done = page["events"].as_array().is_none_or(Vec::is_empty);
            if let Some(next) = page["next_cursor"].as_str() {
                after = format!("&after={next}");
            }
            if done {
                break;
            }
        }
        let feed: Lags = Arc::default();
        let read = Arc::clone(&feed);
        let (base_url, key) = (base_url.to_owned(), key.to_owned());
        let mut until = stopped;
        tokio::spawn(async move {
            loop {
                let request = client
                    .get(format!("{base_url}/v1/events?limit=1000&wait=5{after}"))
                    .bearer_auth(&key)
                    .send();
                let answer = tokio::select! {
                    answer = request => answer,
                    _ = until.changed() => return,
                };
                let Ok(Ok(page)) = (match answer {
                    Ok(answer) => Ok(answer.json::<Value>().await),
                    Err(error) => Err(error),
                }) else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                for event in page["events"].as_array().into_iter().flatten() {
                    if event["type"] == "run.resumed"
                        && let Some(lag) = lag_of(event)
                    {
                        read.lock().unwrap().push(lag);
                    }
                }
                if let Some(next) = page["next_cursor"].as_str() {
                    after = format!("&after={next}");
                }
            }
        });
        Ok(Consumers {
            feed,
            webhook,
            stop,
        })
    }

    /// Waits `grace` for the last events to arrive, then stops both consumers.
    pub async fn stop(self, grace: Duration) -> (Vec<Duration>, Vec<Duration>) {
        tokio::time::sleep(grace).await;
        let _ = self.stop.send(true);
        let take = |lags: &Lags| {
            let mut lags = lags.lock().unwrap().clone();
            lags.sort();
            lags
        };
        (take(&self.feed), take(&self.webhook))
    }
}

/// The markdown table of both consumers' lags.
pub fn report(decided: usize, feed: &[Duration], webhook: &[Duration]) -> String {
    let quantile = |lags: &[Duration], q: f64| -> String {
        if lags.is_empty() {
            return "-".into();
        }
        let index = ((lags.len() as f64 * q).ceil() as usize).clamp(1, lags.len()) - 1;
        format!("{:.1}", lags[index].as_secs_f64() * 1000.0)
    };
    let row = |name: &str, lags: &[Duration]| {
        format!(
            "| {name} | {} of {decided} | {} | {} | {} |\n",
            lags.len(),
            quantile(lags, 0.5),
            quantile(lags, 0.99),
            quantile(lags, 1.0)
        )
    };
    format!(
        "| consumer | events received | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n{}{}",
        row("feed (long poll, wait=5)", feed),
        row("webhook (loopback receiver)", webhook)
    )
}
