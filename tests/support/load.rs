//! The load the fault tests put on the service: workers that decide waiting runs (mostly denials by the owner,
//! every fifth an approval) and register new ones, each request sent once and never retried, each answer recorded
//! with when it was sent, when it came, and what it said.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use uuid::Uuid;

/// Backend users 1..=OWNERS own the runs, each deciding their own.
pub const OWNERS: i64 = 10;

/// Every run has these two pending calls, so a whole decision has two results and two tool events.
pub const CALLS_PER_RUN: i64 = 2;

/// What a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Register,
    Deny,
    Approve,
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub kind: Kind,
    pub run: Uuid,
    pub sent: Instant,
    pub answered: Instant,
    /// `None`: no HTTP answer at all (`error` says why).
    pub status: Option<u16>,
    pub problem_json: bool,
    pub retry_after: bool,
    pub code: Option<String>,
    pub error: Option<String>,
}

impl Answer {
    pub fn took(&self) -> Duration {
        self.answered - self.sent
    }

    pub fn succeeded(&self) -> bool {
        matches!(self.status, Some(200 | 201))
    }
}

/// A run waiting for its owner's decision.
#[derive(Debug, Clone)]
pub struct Target {
    pub id: Uuid,
    pub owner: i64,
    pub digest: String,
}

/// Where and how to send requests.
#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
    pub key: String,
}

impl Api {
    /// `give_up` bounds every request on the client's side, so a hanging service shows up as an error, not a hang.
    pub fn new(base: String, key: String, give_up: Duration) -> Api {
        let client = reqwest::Client::builder()
            .timeout(give_up)
            .build()
            .expect("an HTTP client");
        Api { client, base, key }
    }

    /// Registers a run of `owner` with a write and a read call pending; the digest when it was created.
    pub async fn register(&self, owner: i64) -> (Answer, Option<Target>) {
        let id = Uuid::new_v4();
        let body = json!({
            "id": id,
            "owner_uid": owner,
            "messages": [
                {"role": "user", "content": "Shorten the description of page 12 and read page 13."},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "update_page", "arguments": "{\"page\": 12}"}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "read_page", "arguments": "{\"page\": 13}"}},
                ]},
            ],
            "tools": [{"name": "update_page", "effect": "write"}, {"name": "read_page", "effect": "read"}],
        });
        let request = self
            .client
            .post(format!("{}/v1/runs", self.base))
            .bearer_auth(&self.key)
            .json(&body);
        let (answer, body) = send(Kind::Register, id, request).await;
        let target = body
            .filter(|_| answer.status == Some(201))
            .and_then(|run| run["turn"]["digest"].as_str().map(str::to_owned))
            .map(|digest| Target { id, owner, digest });
        (answer, target)
    }

    /// The owner's decision on the run's turn.
    pub async fn decide(&self, target: &Target, approved: bool) -> Answer {
        let request = self
            .client
            .post(format!("{}/v1/runs/{}/decision", self.base, target.id))
            .bearer_auth(&self.key)
            .json(&json!({"approved": approved, "decider_uid": target.owner, "turn_digest": target.digest}));
        let kind = if approved { Kind::Approve } else { Kind::Deny };
        send(kind, target.id, request).await.0
    }

    /// Registers `count` runs, `concurrency` at a time, while the database is healthy; panics on any failure.
    pub async fn seed(&self, count: usize, concurrency: usize) -> Vec<Target> {
        let queue = Arc::new(Mutex::new(0..count));
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (api, queue) = (self.clone(), Arc::clone(&queue));
            tasks.push(tokio::spawn(async move {
                let mut made = Vec::new();
                loop {
                    let Some(i) = queue.lock().unwrap().next() else {
                        break;
                    };
                    let (answer, target) = api.register(i as i64 % OWNERS + 1).await;
                    made.push(target.unwrap_or_else(|| panic!("seeding failed: {answer:?}")));
                }
                made
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("a seeding task"));
        }
        all
    }
}

async fn send(kind: Kind, run: Uuid, request: reqwest::RequestBuilder) -> (Answer, Option<Value>) {
    let sent = Instant::now();
    let mut answer = Answer {
        kind,
        run,
        sent,
        answered: sent,
        status: None,
        problem_json: false,
        retry_after: false,
        code: None,
        error: None,
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            answer.answered = Instant::now();
            answer.error = Some(format!("{error:?}"));
            return (answer, None);
        }
    };
    answer.status = Some(response.status().as_u16());
    answer.problem_json = response
        .headers()
        .get("content-type")
        .is_some_and(|value| value == "application/problem+json");
    answer.retry_after = response.headers().contains_key("retry-after");
    let body = response.bytes().await;
    answer.answered = Instant::now();
    match body {
        Ok(bytes) => {
            let body: Option<Value> = serde_json::from_slice(&bytes).ok();
            answer.code = body
                .as_ref()
                .and_then(|body| body["code"].as_str().map(str::to_owned));
            (answer, body)
        }
        Err(error) => {
            answer.error = Some(format!("reading the body: {error:?}"));
            (answer, None)
        }
    }
}

/// Workers sending requests until told to stop.
pub struct Running {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Vec<Answer>>>,
}

/// Pause of a worker between two requests: bounds the load, so a fast 503 does not turn into a busy loop.
const PACE: Duration = Duration::from_millis(5);

/// Starts `workers` workers over the waiting `targets`. Each takes the next waiting run and decides it (every fifth
/// decision an approval, the rest denials); every other request, or when no run waits, it registers a new one,
/// which then waits in turn, so about as many runs wait at the end as at the start.
pub fn start(api: &Api, targets: Vec<Target>, workers: usize) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let waiting = Arc::new(Mutex::new(VecDeque::from(targets)));
    let tasks = (0..workers)
        .map(|worker| {
            let (api, stop, waiting) = (api.clone(), Arc::clone(&stop), Arc::clone(&waiting));
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = worker;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let next = if n.is_multiple_of(2) {
                        None
                    } else {
                        waiting.lock().unwrap().pop_front()
                    };
                    match next {
                        Some(target) => {
                            answers.push(api.decide(&target, n.is_multiple_of(5)).await)
                        }
                        None => {
                            let (answer, target) = api.register(n as i64 % OWNERS + 1).await;
                            answers.push(answer);
                            if let Some(target) = target {
                                waiting.lock().unwrap().push_back(target);
                            }
                        }
                    }
                    tokio::time::sleep(PACE).await;
                }
                answers
            })
        })
        .collect();
    Running { stop, tasks }
}

impl Running {
    /// Stops the workers and answers everything they recorded, in the order requests were sent.
    pub async fn finish(self) -> Vec<Answer> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for task in self.tasks {
            all.extend(task.await.expect("a load worker never panics"));
        }
        all.sort_by_key(|answer| answer.sent);
        all
    }
}
