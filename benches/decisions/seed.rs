//! Seeding through the API (never measured): backend users, and suspended runs of a chosen shape.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use uuid::Uuid;

use crate::transcript;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Owners of the seeded runs are spread over this many backend users (uid 1..=OWNERS).
pub const OWNERS: i64 = 100;

/// A run waiting for a decision.
#[derive(Debug, Clone)]
pub struct Target {
    pub id: Uuid,
    pub owner: i64,
    pub digest: String,
}

/// What a seeded run looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub messages: usize,
    pub calls: usize,
}

impl Shape {
    /// The shape of the main phases: a short chat and one pending write call.
    pub const TYPICAL: Shape = Shape {
        messages: 10,
        calls: 1,
    };
}

/// The registration's `messages` member of a run of `shape`.
pub fn members(shape: Shape) -> Result<String, Error> {
    let messages =
        serde_json::to_string(&transcript::transcript(shape.messages, shape.calls, "r"))?;
    Ok(format!("\"messages\":{messages}"))
}

/// The API as the harness's seeding sees it.
#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base_url: String,
    pub key: String,
}

impl Api {
    pub fn new(base_url: &str, key: &str) -> Api {
        Api {
            client: reqwest::Client::new(),
            base_url: base_url.to_owned(),
            key: key.to_owned(),
        }
    }

    /// Owners 1..=OWNERS, none of them admin: each decides only their own runs.
    pub async fn put_users(&self) -> Result<(), Error> {
        for uid in 1..=OWNERS {
            let response = self
                .client
                .put(format!("{}/v1/users/{uid}", self.base_url))
                .bearer_auth(&self.key)
                .json(&json!({"username": format!("user{uid}"), "is_admin": false,
                              "can_approve_others": false, "disabled": false}))
                .send()
                .await?;
            if !response.status().is_success() {
                return Err(format!("PUT /v1/users/{uid}: {}", response.status()).into());
            }
        }
        Ok(())
    }

    /// Registers `count` runs of `shape` with `concurrency` requests in flight; returns them in order.
    pub async fn register_runs(
        &self,
        count: usize,
        shape: Shape,
        concurrency: usize,
    ) -> Result<Vec<Target>, Error> {
        // Call ids need only be unique within a run, so every run of a shape carries the same transcript: the
        // body is serialized once and only the id and owner change.
        self.register_members(count, &members(shape)?, concurrency)
            .await
    }

    /// Registers `count` runs whose bodies hold `members` (the text of every member but `id`, `owner_uid` and
    /// `tools`, e.g. a native format's), with `concurrency` requests in flight; returns them in order.
    pub async fn register_members(
        &self,
        count: usize,
        members: &str,
        concurrency: usize,
    ) -> Result<Vec<Target>, Error> {
        let timed = self.register_timed(count, members, concurrency).await?;
        Ok(timed.into_iter().map(|(target, _)| target).collect())
    }

    /// `register_members`, with each registration's latency beside its run (the `registration` phase measures them).
    pub async fn register_timed(
        &self,
        count: usize,
        members: &str,
        concurrency: usize,
    ) -> Result<Vec<(Target, Duration)>, Error> {
        let shared: Arc<str> =
            format!("{members},\"tools\":{}}}", transcript::declared_tools()).into();
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..concurrency.max(1) {
            let api = self.clone();
            let shared = Arc::clone(&shared);
            let next = Arc::clone(&next);
            tasks.push(tokio::spawn(async move {
                let mut made = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return Ok::<_, Error>(made);
                    }
                    let id = Uuid::new_v4();
                    let owner = (i as i64 % OWNERS) + 1;
                    let body = format!("{{\"id\":\"{id}\",\"owner_uid\":{owner},{shared}");
                    let sent = Instant::now();
                    let digest = api.register(body).await?;
                    made.push((i, (Target { id, owner, digest }, sent.elapsed())));
                }
            }));
        }
        let mut all = Vec::with_capacity(count);
        for task in tasks {
            all.extend(task.await??);
        }
        all.sort_by_key(|(i, _)| *i);
        Ok(all.into_iter().map(|(_, timed)| timed).collect())
    }

    async fn register(&self, body: String) -> Result<String, Error> {
        let response = self
            .client
            .post(format!("{}/v1/runs", self.base_url))
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await?;
        if status.as_u16() != 201 {
            return Err(format!("POST /v1/runs: {status} {answer}").into());
        }
        answer["turn"]["digest"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "the registration answer has no turn.digest".into())
    }
}
