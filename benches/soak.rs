//! The soak: minutes of bounded mixed load on the real release binary, watching for what only time shows, memory
//! that keeps growing and connections that pile up. Run it with `bash bench/soak.sh`; the script's header lists
//! the settings.
//!
//! Each virtual client repeats one cycle, paced so that all together send at most `SOAK_RATE` requests a second:
//! register a run (10 messages, one write call), read it, read its owner's inbox, decide it (a third approved
//! through a local no-op executor, a third denied, a third denied with a reason), and on some cycles fetch the
//! model input in another format, send the same decision again, and complete the run. Every few seconds the
//! harness samples the service's resident memory (`VmRSS`) and the connections to its database in
//! `pg_stat_activity`. It fails (exit status 1) when
//! - the mean RSS of the last third of the samples exceeds that of the first third by more than
//!   `SOAK_RSS_GROWTH_PCT` percent plus `SOAK_RSS_SLACK_MIB` MiB (defaults 20 % and 8 MiB), or
//! - the service ever held more connections than its `DATABASE_POOL_SIZE`, or
//! - any request was answered 5xx, not answered at all, or answered anything the cycle does not expect.

#[allow(dead_code)] // The load harness's modules; the soak uses a part of each.
#[path = "decisions/executor.rs"]
mod executor;
#[allow(dead_code)]
#[path = "decisions/seed.rs"]
mod seed;
#[allow(dead_code)]
#[path = "decisions/service.rs"]
mod service;
#[allow(dead_code)]
#[path = "decisions/transcript.rs"]
mod transcript;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::Value;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::seed::{Api, OWNERS, Shape};
use crate::service::{Launch, Service, Target};

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Settings {
    target: Target,
    database: String,
    duration: Duration,
    clients: usize,
    rate: f64,
    sample_every: Duration,
    pool_size: u32,
    rss_growth_pct: f64,
    rss_slack_mib: f64,
}

impl Settings {
    fn from_env() -> Settings {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        let number = |name: &str, default: f64| var(name, "").parse().unwrap_or(default);
        Settings {
            target: Target::from_env(),
            database: var("SOAK_DATABASE", "approval_resume_soak"),
            duration: Duration::from_secs_f64(number("SOAK_SECS", 180.0)),
            clients: number("SOAK_CLIENTS", 8.0) as usize,
            rate: number("SOAK_RATE", 300.0),
            sample_every: Duration::from_secs_f64(number("SOAK_SAMPLE_SECS", 5.0)),
            pool_size: number("SOAK_POOL_SIZE", 10.0) as u32,
            rss_growth_pct: number("SOAK_RSS_GROWTH_PCT", 20.0),
            rss_slack_mib: number("SOAK_RSS_SLACK_MIB", 8.0),
        }
    }
}

fn main() -> ExitCode {
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(soak(&settings)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("soak failed to run: {error}");
            ExitCode::from(2)
        }
    }
}

/// What every client counts.
#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    server_errors: AtomicU64,
    /// Not answered, or answered a status the cycle does not expect (5xx included), by route and status.
    unexpected: Mutex<BTreeMap<String, u64>>,
}

/// One sample of the service's resources.
struct Sample {
    at: Duration,
    requests: u64,
    server_errors: u64,
    unexpected: u64,
    rss_kib: u64,
    service_connections: i64,
    all_connections: i64,
}

async fn soak(settings: &Settings) -> Result<bool, Error> {
    std::fs::create_dir_all(&settings.target.out_dir)?;
    let database_url =
        service::fresh_database(&settings.target.server_url, &settings.database).await?;
    let key = service::add_client(
        &settings.target.binary,
        &database_url,
        &format!("soak-{}", Uuid::new_v4().simple()),
        &[
            "runs:write",
            "runs:read",
            "users:write",
            "decisions:write",
            "approvals:read",
        ],
    )?;
    let executor_port = executor::start().await?;
    let tools_config = settings.target.out_dir.join("soak-tools.toml");
    executor::write_config(&tools_config, executor_port)?;
    let service = Service::start(&Launch {
        binary: &settings.target.binary,
        database_url: &database_url,
        pool_size: settings.pool_size,
        tools_config: Some(&tools_config),
        log_file: settings.target.out_dir.join("soak-service.log"),
    })
    .await?;
    let api = Api::new(&service.base_url, &key);
    api.put_users().await?;
    let mut monitor = PgConnection::connect(&database_url).await?;
    println!(
        "# approval-resume soak\n\n{} s of mixed load, {} clients, at most {} requests/s; DATABASE_POOL_SIZE={}; \
         sampled every {} s; service log in {}\n",
        settings.duration.as_secs_f64(),
        settings.clients,
        settings.rate,
        settings.pool_size,
        settings.sample_every.as_secs_f64(),
        settings.target.out_dir.join("soak-service.log").display(),
    );

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let body = Arc::new(registration_parts()?);
    let workers: Vec<_> = (0..settings.clients)
        .map(|client| {
            let worker = Worker {
                api: api.clone(),
                tally: Arc::clone(&tally),
                body: Arc::clone(&body),
                latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            };
            let pace = Duration::from_secs_f64(settings.clients as f64 / settings.rate);
            tokio::spawn(worker.run(client, pace, Arc::clone(&stop)))
        })
        .collect();

    let mut samples = Vec::new();
    let mut next = started;
    while started.elapsed() < settings.duration {
        next += settings.sample_every;
        tokio::time::sleep_until(next.into()).await;
        let (service_connections, all_connections): (i64, i64) = sqlx::query_as(
            "select count(*) filter (where application_name = 'approval-resume'), count(*)
             from pg_stat_activity where datname = current_database()",
        )
        .fetch_one(&mut monitor)
        .await?;
        let sample = Sample {
            at: started.elapsed(),
            requests: tally.requests.load(Ordering::Relaxed),
            server_errors: tally.server_errors.load(Ordering::Relaxed),
            unexpected: tally.unexpected.lock().unwrap().values().sum(),
            rss_kib: service.memory().1,
            service_connections,
            all_connections,
        };
        eprintln!(
            "t={:>5.0}s requests {:>7}  5xx {}  RSS {:.1} MiB  connections {}",
            sample.at.as_secs_f64(),
            sample.requests,
            sample.server_errors,
            sample.rss_kib as f64 / 1024.0,
            sample.service_connections
        );
        samples.push(sample);
    }
    stop.store(true, Ordering::Relaxed);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for worker in workers {
        latency.add(worker.await?)?;
    }
    let elapsed = started.elapsed();
    monitor.close().await?;
    service.stop();

    println!("{}", table(&samples));
    let totals = Totals {
        requests: tally.requests.load(Ordering::Relaxed),
        server_errors: tally.server_errors.load(Ordering::Relaxed),
        unexpected: tally.unexpected.lock().unwrap().clone(),
        latency,
        elapsed,
    };
    Ok(verdict(settings, &samples, &totals))
}

/// The registration body around the run id and owner: the same transcript for every run, serialized once.
fn registration_parts() -> Result<(String, String), Error> {
    let messages = serde_json::to_string(&transcript::transcript(
        Shape::TYPICAL.messages,
        Shape::TYPICAL.calls,
        "s",
    ))?;
    Ok((messages, transcript::declared_tools().to_string()))
}

struct Worker {
    api: Api,
    tally: Arc<Tally>,
    body: Arc<(String, String)>,
    latency: Histogram<u64>,
}

impl Worker {
    /// Repeats the cycle until `stop`, one request per `pace`; answers the latency of every request.
    async fn run(mut self, client: usize, pace: Duration, stop: Arc<AtomicBool>) -> Histogram<u64> {
        let mut ticker = tokio::time::interval(pace);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut cycle = client;
        while !stop.load(Ordering::Relaxed) {
            cycle += 1;
            self.cycle(cycle, &mut ticker).await;
        }
        self.latency
    }

    async fn cycle(&mut self, cycle: usize, ticker: &mut tokio::time::Interval) {
        let id = Uuid::new_v4();
        let owner = (cycle as i64 * 7919) % OWNERS + 1;
        let run = format!("/v1/runs/{id}");
        let body = format!(
            "{{\"id\":\"{id}\",\"owner_uid\":{owner},\"messages\":{},\"tools\":{}}}",
            self.body.0, self.body.1
        );
        ticker.tick().await;
        let Some(registered) = self.send("POST", "/v1/runs", Some(body), 201).await else {
            return;
        };
        let digest = registered["turn"]["digest"].as_str().unwrap_or_default();
        let decision = match cycle % 3 {
            0 => format!(
                "{{\"approved\":true,\"decider_uid\":{owner},\"turn_digest\":\"{digest}\"}}"
            ),
            1 => format!(
                "{{\"approved\":false,\"decider_uid\":{owner},\"turn_digest\":\"{digest}\"}}"
            ),
            _ => format!(
                "{{\"approved\":false,\"decider_uid\":{owner},\"turn_digest\":\"{digest}\",\"reason\":\"{}\"}}",
                if cycle.is_multiple_of(2) {
                    "skip"
                } else {
                    "variant"
                }
            ),
        };
        let inbox = format!("/v1/approvals?acting_uid={owner}&limit=20");
        let model_input = format!("{run}/model-input?format=anthropic");
        let decide = format!("{run}/decision");
        let complete = format!("{run}/complete");
        let mut steps: Vec<(&str, &str, Option<String>, u16)> = vec![
            ("GET", &run, None, 200),
            ("GET", &inbox, None, 200),
            ("POST", &decide, Some(decision.clone()), 200),
        ];
        if cycle.is_multiple_of(4) {
            steps.push(("GET", &model_input, None, 200));
        }
        if cycle.is_multiple_of(8) {
            steps.push(("POST", &decide, Some(decision), 200));
        }
        if cycle.is_multiple_of(2) {
            steps.push(("POST", &complete, None, 200));
        }
        for (method, path, body, expected) in steps {
            ticker.tick().await;
            if self.send(method, path, body, expected).await.is_none() {
                return;
            }
        }
    }

    /// One request; the parsed answer when it has the expected status, else `None` (counted as unexpected).
    async fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<String>,
        expected: u16,
    ) -> Option<Value> {
        let url = format!("{}{path}", self.api.base_url);
        let mut request = match method {
            "POST" => self.api.client.post(url),
            _ => self.api.client.get(url),
        }
        .bearer_auth(&self.api.key)
        .timeout(Duration::from_secs(60));
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let sent = Instant::now();
        let answer = request.send().await;
        self.tally.requests.fetch_add(1, Ordering::Relaxed);
        let route = route_of(path);
        let (status, bytes) = match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.bytes().await.ok())
            }
            Err(error) => {
                let kind = if error.is_timeout() {
                    "timeout"
                } else {
                    "transport"
                };
                self.unexpected(format!("{method} {route} {kind}"));
                return None;
            }
        };
        self.latency
            .saturating_record(sent.elapsed().as_micros().max(1) as u64);
        if status >= 500 {
            self.tally.server_errors.fetch_add(1, Ordering::Relaxed);
        }
        let parsed = bytes.and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        if status != expected {
            let code = parsed
                .as_ref()
                .and_then(|problem| problem["code"].as_str())
                .unwrap_or_default();
            self.unexpected(format!("{method} {route} {status} {code}"));
            return None;
        }
        parsed
    }

    fn unexpected(&self, what: String) {
        *self
            .tally
            .unexpected
            .lock()
            .unwrap()
            .entry(what)
            .or_default() += 1;
    }
}

/// The route of a path, without ids or query, for counting.
fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    path.split('/')
        .map(|part| {
            if Uuid::parse_str(part).is_ok() {
                "{id}"
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn table(samples: &[Sample]) -> String {
    let mut out = String::from(
        "| t s | requests | requests/s | 5xx | unexpected | service RSS MiB | service connections | all connections to the database |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut before = (Duration::ZERO, 0);
    for sample in samples {
        let rate = (sample.requests - before.1) as f64 / (sample.at - before.0).as_secs_f64();
        before = (sample.at, sample.requests);
        out.push_str(&format!(
            "| {:.0} | {} | {:.0} | {} | {} | {:.1} | {} | {} |\n",
            sample.at.as_secs_f64(),
            sample.requests,
            rate,
            sample.server_errors,
            sample.unexpected,
            sample.rss_kib as f64 / 1024.0,
            sample.service_connections,
            sample.all_connections,
        ));
    }
    out
}

/// What the whole run counted, after the clients stopped.
struct Totals {
    requests: u64,
    server_errors: u64,
    unexpected: BTreeMap<String, u64>,
    latency: Histogram<u64>,
    elapsed: Duration,
}

/// Prints the verdict; `true` when every bound held.
fn verdict(settings: &Settings, samples: &[Sample], totals: &Totals) -> bool {
    let Totals {
        requests,
        server_errors,
        unexpected,
        latency,
        elapsed,
    } = totals;
    let mib = |kib: f64| kib / 1024.0;
    let third = (samples.len() / 3).max(1);
    let mean = |part: &[Sample]| {
        part.iter().map(|s| s.rss_kib as f64).sum::<f64>() / part.len().max(1) as f64
    };
    let first = mean(&samples[..third.min(samples.len())]);
    let last = mean(&samples[samples.len().saturating_sub(third)..]);
    let bound = first * (1.0 + settings.rss_growth_pct / 100.0) + settings.rss_slack_mib * 1024.0;
    let rss_min = samples.iter().map(|s| s.rss_kib).min().unwrap_or(0);
    let rss_max = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    let connections_max = samples
        .iter()
        .map(|s| s.service_connections)
        .max()
        .unwrap_or(0);
    let unexpected_total: u64 = unexpected.values().sum();
    let memory_ok = samples.len() >= 3 && last <= bound;
    let connections_ok = connections_max <= i64::from(settings.pool_size);
    let answers_ok = unexpected_total == 0 && *server_errors == 0;
    let p = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{requests} requests in {:.0} s ({:.0}/s); latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms\n",
        elapsed.as_secs_f64(),
        *requests as f64 / elapsed.as_secs_f64(),
        p(0.5),
        p(0.99),
        latency.max() as f64 / 1000.0,
    );
    println!(
        "- memory: {}: mean RSS of the first third of the samples {:.1} MiB, of the last third {:.1} MiB \
         (bound {:.1} MiB: +{}% +{} MiB); min {:.1}, max {:.1} MiB",
        pass(memory_ok),
        mib(first),
        mib(last),
        mib(bound),
        settings.rss_growth_pct,
        settings.rss_slack_mib,
        mib(rss_min as f64),
        mib(rss_max as f64),
    );
    println!(
        "- connections: {}: the service held at most {connections_max} (DATABASE_POOL_SIZE {})",
        pass(connections_ok),
        settings.pool_size
    );
    println!(
        "- answers: {}: {server_errors} answered 5xx, {unexpected_total} unexpected in all{}",
        pass(answers_ok),
        if unexpected.is_empty() {
            String::new()
        } else {
            format!(": {unexpected:?}")
        }
    );
    memory_ok && connections_ok && answers_ok
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}
