//! Commit-to-consumer latency: while the open-loop deny phase runs, a feed reader long-polls `GET /v1/events` and
//! a webhook receiver on loopback takes every event. Each arrival is measured against the event's `timestamp`
//! (when its transaction began, on the same machine's clock: an upper bound of commit to consumer, as it also
//! holds the transaction itself) and against the arrival of the decision's answer at the driver (a lower bound).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use uuid::Uuid;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Lags = Arc<Mutex<Vec<Arrival>>>;

/// One `run.resumed` event as a consumer got it.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    run_id: Uuid,
    at: Instant,
    /// How long after its transaction began it arrived.
    since_start: Duration,
}

fn arrival_of(event: &Value) -> Option<Arrival> {
    let timestamp = event["timestamp"].as_str()?;
    let began = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    let since_start = (chrono::Utc::now() - began.with_timezone(&chrono::Utc))
        .to_std()
        .ok()?;
    Some(Arrival {
        run_id: event["data"]["run_id"].as_str()?.parse().ok()?,
        at: Instant::now(),
        since_start,
    })
}

/// A feed reader and a webhook receiver, collecting the lag of each `run.resumed` event.
pub struct Consumers {
    pub feed: Lags,
    pub webhook: Lags,
    stop: tokio::sync::watch::Sender<bool>,
    /// Where the receiver's subscription is removed once the consumers stop.
    subscription: String,
    key: String,
    client: reqwest::Client,
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
                    && let Some(arrival) = arrival_of(&event)
                {
                    received.lock().unwrap().push(arrival);
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
        let created: Value = created.json().await?;
        let subscription = format!(
            "{base_url}/v1/webhooks/{}",
            created["id"].as_str().ok_or("the subscription has no id")?
        );

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
        let (unsubscriber, unsubscriber_key) = (client.clone(), key.clone());
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
                        && let Some(arrival) = arrival_of(event)
                    {
                        read.lock().unwrap().push(arrival);
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
            subscription,
            key: unsubscriber_key,
            client: unsubscriber,
        })
    }

    /// Waits `grace` for the last events to arrive, then stops both consumers and removes the receiver's
    /// subscription: left behind, it would have the service deliver every later phase's events to a receiver that is
    /// gone, retrying each, and charge that work to the decisions those phases measure.
    pub async fn stop(self, grace: Duration) -> Result<(Vec<Arrival>, Vec<Arrival>), Error> {
        tokio::time::sleep(grace).await;
        let _ = self.stop.send(true);
        let removed = self
            .client
            .delete(&self.subscription)
            .bearer_auth(&self.key)
            .send()
            .await?;
        if removed.status() != 204 {
            return Err(format!("removing the subscription answered {}", removed.status()).into());
        }
        let take = |lags: &Lags| lags.lock().unwrap().clone();
        Ok((take(&self.feed), take(&self.webhook)))
    }
}

/// The markdown table of both consumers' lags, from the transaction's start and from the decision's answer.
pub fn report(
    decided: usize,
    feed: &[Arrival],
    webhook: &[Arrival],
    answered: &HashMap<Uuid, Instant>,
) -> String {
    let quantiles = |mut lags: Vec<Duration>| -> String {
        if lags.is_empty() {
            return "- | - | -".into();
        }
        lags.sort();
        let at = |q: f64| {
            let index = ((lags.len() as f64 * q).ceil() as usize).clamp(1, lags.len()) - 1;
            format!("{:.1}", lags[index].as_secs_f64() * 1000.0)
        };
        format!("{} | {} | {}", at(0.5), at(0.99), at(1.0))
    };
    let row = |name: &str, arrivals: &[Arrival]| {
        let from_start = arrivals.iter().map(|a| a.since_start).collect();
        let from_answer: Vec<Duration> = arrivals
            .iter()
            .filter_map(|a| Some(a.at.saturating_duration_since(*answered.get(&a.run_id)?)))
            .collect();
        format!(
            "| {name} | {} of {decided} | {} | {} |\n",
            arrivals.len(),
            quantiles(from_start),
            quantiles(from_answer)
        )
    };
    format!(
        "| consumer | events received | from the transaction's start: p50 ms | p99 ms | max ms | from the answer: p50 ms | p99 ms | max ms |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n{}{}",
        row("feed (long poll, wait=5)", feed),
        row("webhook (loopback receiver)", webhook)
    )
}
