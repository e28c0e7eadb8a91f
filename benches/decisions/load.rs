//! Driving decisions over HTTP: closed loop (N virtual clients, each one keep-alive connection, one request at a
//! time) and open loop (Poisson arrivals at a fixed mean rate, as `pgbench --rate` schedules them; latency is
//! measured from each request's scheduled start, so a stall is not hidden by the clients waiting for it: no
//! coordinated omission).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::Value;

use crate::seed::Target;

/// What is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Denied by the run's owner (`decided_by: run_owner`), the chat backend's usual decision.
    Deny,
    /// Approved by the run's owner; the tools run through the harness's no-op executor.
    Approve,
    /// Per-call verdicts by the run's owner on a three-call turn: the first call approved as proposed, the second
    /// approved with edited arguments, the third denied with a reason.
    Mixed,
}

/// When a driver stops (besides running out of seeded runs).
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    After(Duration),
    Count(usize),
}

/// One virtual client per element: each holds one keep-alive connection.
pub fn clients(count: usize) -> Vec<reqwest::Client> {
    (0..count)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .build()
                .expect("a plain HTTP client builds")
        })
        .collect()
}

/// What one driven stage measured.
#[derive(Debug)]
pub struct Outcome {
    /// Latency of successful decisions, in microseconds.
    pub latency: Histogram<u64>,
    pub ok: u64,
    pub errors: BTreeMap<String, u64>,
    pub elapsed: Duration,
    pub response_bytes: u64,
    /// The seeded runs ran out before the stop condition.
    pub exhausted: bool,
}

impl Outcome {
    fn empty() -> Outcome {
        Outcome {
            latency: histogram(),
            ok: 0,
            errors: BTreeMap::new(),
            elapsed: Duration::ZERO,
            response_bytes: 0,
            exhausted: false,
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.latency.add(&other.latency).expect("same bounds");
        self.ok += other.ok;
        for (error, count) in other.errors {
            *self.errors.entry(error).or_default() += count;
        }
        self.response_bytes += other.response_bytes;
        self.exhausted |= other.exhausted;
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 60 s, 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// Everything a request needs, shared by the workers of a stage.
#[derive(Clone)]
pub struct Driver {
    pub base_url: Arc<str>,
    pub key: Arc<str>,
    pub kind: Kind,
    /// When each run's decision was answered (200): the latest point its commit can have happened, against which
    /// the events phase also measures its consumers.
    pub answered: Answered,
}

/// When each decided run's answer arrived.
pub type Answered = Arc<std::sync::Mutex<std::collections::HashMap<uuid::Uuid, Instant>>>;

impl Driver {
    /// Closed loop: every client sends its next decision as soon as the previous one is answered.
    pub async fn closed_loop(
        &self,
        clients: &[reqwest::Client],
        targets: Arc<Vec<Target>>,
        stop: Stop,
    ) -> Outcome {
        let next = Arc::new(AtomicUsize::new(0));
        let limit = match stop {
            Stop::Count(count) => count.min(targets.len()),
            Stop::After(_) => targets.len(),
        };
        let started = Instant::now();
        let deadline = match stop {
            Stop::After(duration) => Some(started + duration),
            Stop::Count(_) => None,
        };
        let mut tasks = Vec::new();
        for client in clients {
            let (driver, client, targets, next) = (
                self.clone(),
                client.clone(),
                Arc::clone(&targets),
                Arc::clone(&next),
            );
            tasks.push(tokio::spawn(async move {
                let mut outcome = Outcome::empty();
                loop {
                    if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= limit {
                        outcome.exhausted = i >= targets.len() && deadline.is_some();
                        break;
                    }
                    let sent = Instant::now();
                    driver
                        .decide(&client, &targets[i], sent, &mut outcome)
                        .await;
                }
                outcome
            }));
        }
        let mut total = Outcome::empty();
        for task in tasks {
            total.merge(task.await.expect("a driver task never panics"));
        }
        total.elapsed = started.elapsed();
        total
    }

    /// Open loop: Poisson arrivals of mean `rate` per second for `duration`, whatever the answers' latency, with
    /// enough clients that one never waits for a free client unless the service falls behind.
    pub async fn open_loop(
        &self,
        clients: &[reqwest::Client],
        targets: Arc<Vec<Target>>,
        rate: f64,
        duration: Duration,
    ) -> Outcome {
        let slots = ((rate * duration.as_secs_f64()) as usize).min(targets.len());
        let schedule = Arc::new(poisson_schedule(slots, rate));
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now() + Duration::from_millis(20);
        let mut tasks = Vec::new();
        for client in clients {
            let (driver, client, targets, next, schedule) = (
                self.clone(),
                client.clone(),
                Arc::clone(&targets),
                Arc::clone(&next),
                Arc::clone(&schedule),
            );
            tasks.push(tokio::spawn(async move {
                let mut outcome = Outcome::empty();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= slots {
                        break;
                    }
                    let scheduled = started + schedule[i];
                    tokio::time::sleep_until(scheduled.into()).await;
                    driver
                        .decide(&client, &targets[i], scheduled, &mut outcome)
                        .await;
                }
                outcome
            }));
        }
        let mut total = Outcome::empty();
        for task in tasks {
            total.merge(task.await.expect("a driver task never panics"));
        }
        total.elapsed = started.elapsed();
        total
    }

    /// Sends one decision and records it; latency runs from `since`.
    async fn decide(
        &self,
        client: &reqwest::Client,
        target: &Target,
        since: Instant,
        outcome: &mut Outcome,
    ) {
        let body = match self.kind {
            Kind::Mixed => format!(
                "{{\"decider_uid\":{},\"turn_digest\":\"{}\",\"calls\":[\
                 {{\"call_id\":\"call_r_0\",\"approved\":true}},\
                 {{\"call_id\":\"call_r_1\",\"approved\":true,\"arguments\":\"{{\\\"path\\\":\\\"/about\\\"}}\"}},\
                 {{\"call_id\":\"call_r_2\",\"approved\":false,\"reason\":\"variant\"}}]}}",
                target.owner, target.digest
            ),
            kind => format!(
                "{{\"approved\":{},\"decider_uid\":{},\"turn_digest\":\"{}\"}}",
                kind == Kind::Approve,
                target.owner,
                target.digest
            ),
        };
        let sent = client
            .post(format!("{}/v1/runs/{}/decision", self.base_url, target.id))
            .bearer_auth(&*self.key)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                *outcome.errors.entry(transport(&error)).or_default() += 1;
                return;
            }
        };
        let status = response.status();
        match response.bytes().await {
            Ok(bytes) if status.is_success() => {
                self.answered
                    .lock()
                    .expect("never poisoned")
                    .insert(target.id, Instant::now());
                let micros = since.elapsed().as_micros().max(1) as u64;
                outcome.latency.saturating_record(micros);
                outcome.ok += 1;
                outcome.response_bytes += bytes.len() as u64;
            }
            Ok(bytes) => {
                let code = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .and_then(|problem| problem["code"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                *outcome
                    .errors
                    .entry(format!("{} {code}", status.as_u16()))
                    .or_default() += 1;
            }
            Err(error) => *outcome.errors.entry(transport(&error)).or_default() += 1,
        }
    }
}

/// Start offsets of `count` arrivals of a Poisson process of mean `rate` per second.
fn poisson_schedule(count: usize, rate: f64) -> Vec<Duration> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let mut at = 0.0_f64;
    (0..count)
        .map(|_| {
            let uniform: f64 = rng.gen_range(f64::EPSILON..1.0);
            at += -uniform.ln() / rate;
            Duration::from_secs_f64(at)
        })
        .collect()
}

fn transport(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout".into()
    } else if error.is_connect() {
        "connect".into()
    } else {
        "transport".into()
    }
}
