//! Load harness: the real release binary against real Postgres, measured against the floor that Postgres itself
//! sets (pgbench running the same SQL). Run it with `bash bench/run.sh`; BENCHMARKS.md explains the figures.
//!
//! Phases, in order, each on runs seeded through the API beforehand (seeding is never measured):
//! 1. deny decisions at each concurrency, each followed by pgbench at the same concurrency (the floor);
//! 2. deny decisions at a fixed arrival rate of half the saturating throughput (open loop, for p99);
//! 3. approve decisions through a local no-op executor at each concurrency;
//! 4. (`mixed`) on three-call turns, per-call verdicts (approve, approve with an edit, deny) beside whole-turn
//!    approvals of the same turns;
//! 5. deny decisions on transcripts of 10 to 10,000 messages and turns of 1 to 16 calls;
//! 6. (`native`) deny decisions on an Anthropic run with extended thinking (docs/design.md §14) beside an OpenAI
//!    chat run of the same conversation and size, alternated phase by phase;
//! 7. (`straightforward`, `langgraph`, `base`, `registration`; not run unless named in BENCH_PHASES) deny decisions
//!    alternated with the straightforward floor (bench/deny_floor_straightforward.sql), with LangGraph's resumes
//!    (bench/langgraph_resume.py), and with the deny of another build of the service (BENCH_BASE_BINARY); and
//!    registrations alternated with that build's; see alternation.rs.
//!
//! Settings are environment variables (bench/run.sh lists them); `pool-sweep` as an argument runs only the deny
//! phases at several DATABASE_POOL_SIZE values instead, and `wal` only what one deny and one registration write,
//! against the straightforward floor (wal.rs; `bash bench/wal_per_deny.sh` runs it on a cluster of its own).

#[path = "decisions/agent.rs"]
mod agent;
#[path = "decisions/alternation.rs"]
mod alternation;
#[path = "decisions/event_latency.rs"]
mod event_latency;
#[path = "decisions/executor.rs"]
mod executor;
#[path = "decisions/floor.rs"]
mod floor;
#[path = "decisions/load.rs"]
mod load;
#[path = "decisions/native.rs"]
mod native;
#[path = "decisions/report.rs"]
mod report;
#[path = "decisions/seed.rs"]
mod seed;
#[path = "decisions/service.rs"]
mod service;
#[path = "decisions/straightforward.rs"]
mod straightforward;
#[path = "decisions/straightforward_phase.rs"]
mod straightforward_phase;
#[path = "decisions/transcript.rs"]
mod transcript;
#[path = "decisions/wal.rs"]
mod wal;

use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::floor::{Floor, Length, Tables};
use crate::load::{Driver, Kind, Stop};
use crate::report::{FloorPhase, NativeRow, Phase, ScalePoint};
use crate::seed::{Api, Shape};
use crate::service::{Cpu, Launch, Service, Target};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Every knob, from the environment.
struct Settings {
    target: Target,
    database: String,
    pool_size: u32,
    concurrency: Vec<usize>,
    seconds: Duration,
    warmup: Duration,
    phases: Vec<String>,
    scaling_clients: usize,
    sweep_pools: Vec<u32>,
    native_bytes: usize,
    native_clients: Vec<usize>,
    native_rounds: usize,
    native_decisions: usize,
    alternation: alternation::Settings,
}

impl Settings {
    fn from_env() -> Settings {
        let var =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        let list = |name: &str, default: &str| -> Vec<usize> {
            var(name, default)
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        };
        Settings {
            target: Target::from_env(),
            database: var("BENCH_DATABASE", "approval_resume_bench"),
            pool_size: var("BENCH_POOL_SIZE", "16").parse().unwrap_or(16),
            concurrency: list("BENCH_CONCURRENCY", "1,8,32,64"),
            seconds: Duration::from_secs_f64(var("BENCH_SECONDS", "8").parse().unwrap_or(8.0)),
            warmup: Duration::from_secs_f64(
                var("BENCH_WARMUP_SECONDS", "1").parse().unwrap_or(1.0),
            ),
            phases: var(
                "BENCH_PHASES",
                "deny,floor,previous,latency,events,approve,mixed,scaling,native",
            )
            .split(',')
            .map(|p| p.trim().to_owned())
            .collect(),
            scaling_clients: var("BENCH_SCALING_CLIENTS", "8").parse().unwrap_or(8),
            sweep_pools: list("BENCH_SWEEP_POOLS", "4,8,16,32,64")
                .into_iter()
                .map(|n| n as u32)
                .collect(),
            native_bytes: var("BENCH_NATIVE_BYTES", "35000").parse().unwrap_or(35_000),
            native_clients: list("BENCH_NATIVE_CLIENTS", "1,8,32"),
            native_rounds: var("BENCH_NATIVE_ROUNDS", "3").parse().unwrap_or(3),
            native_decisions: var("BENCH_NATIVE_DECISIONS", "1500")
                .parse()
                .unwrap_or(1500),
            alternation: alternation::Settings::from_env(),
        }
    }

    fn wants(&self, phase: &str) -> bool {
        self.phases.iter().any(|p| p == phase)
    }
}

fn main() -> ExitCode {
    let settings = Settings::from_env();
    let sweep = std::env::args().any(|arg| arg == "pool-sweep");
    let wal = std::env::args().any(|arg| arg == "wal");
    // Two workers, like pgbench's -j 2: the driver competes for the same two cores as the service and Postgres.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let result = runtime.block_on(async {
        if sweep {
            pool_sweep(&settings).await
        } else if wal {
            wal::run(&settings).await
        } else {
            benchmark(&settings).await
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What every phase needs.
struct Bench {
    service: Service,
    api: Api,
    driver_deny: Driver,
    driver_approve: Driver,
    driver_mixed: Driver,
    pool: PgPool,
    ticks: f64,
    cores: f64,
}

impl Bench {
    /// Checkpoints, seeds runs of `shape` for a warm-up, warms up, seeds enough for `stop`, and measures.
    async fn phase(
        &self,
        kind: Kind,
        shape: Shape,
        clients: usize,
        warmup: Stop,
        stop: Stop,
    ) -> Result<Phase, Error> {
        let messages =
            serde_json::to_string(&transcript::transcript(shape.messages, shape.calls, "r"))?;
        let members = format!("\"messages\":{messages}");
        let label = format!("{} messages x {} calls", shape.messages, shape.calls);
        self.phase_of(kind, &members, &label, clients, warmup, stop)
            .await
    }

    /// `phase` on runs whose registrations hold `members` (every member but `id`, `owner_uid` and `tools`).
    async fn phase_of(
        &self,
        kind: Kind,
        members: &str,
        label: &str,
        clients: usize,
        warmup: Stop,
        stop: Stop,
    ) -> Result<Phase, Error> {
        let driver = match kind {
            Kind::Deny => &self.driver_deny,
            Kind::Approve => &self.driver_approve,
            Kind::Mixed => &self.driver_mixed,
        };
        self.settle().await?;
        let connections = load::clients(clients);
        let warm_count = match warmup {
            Stop::Count(count) => count,
            Stop::After(duration) => (clients * 20).max((duration.as_secs_f64() * 1000.0) as usize),
        };
        let warm = Arc::new(self.api.register_members(warm_count, members, 16).await?);
        let warmed = driver.closed_loop(&connections, warm, warmup).await;
        let count = match stop {
            Stop::Count(count) => count,
            // Enough for the warm-up's rate and then some; a phase that runs out says so in the table.
            Stop::After(duration) => {
                (warmed.rate() * duration.as_secs_f64() * 2.5) as usize + clients * 20 + 100
            }
        };
        let targets = Arc::new(self.api.register_members(count, members, 16).await?);
        eprintln!("measuring {kind:?}, {clients} clients, {label}, {stop:?}, {count} runs seeded");
        self.service.reset_peak_rss();
        let before = Cpu::read(Some(self.service.pid), self.ticks);
        let outcome = driver.closed_loop(&connections, targets, stop).await;
        let cpu = Cpu::read(Some(self.service.pid), self.ticks).since(&before);
        let (peak_rss_kib, _) = self.service.memory();
        Ok(Phase {
            clients,
            outcome,
            cpu,
            peak_rss_kib,
        })
    }

    /// Starts every phase with a checkpoint, before its seeding: each phase then runs in a checkpoint cycle of its
    /// own (no timed checkpoint lands in it, phases being shorter than checkpoint_timeout), and the pages its
    /// seeding wrote already carry their full-page image. A checkpoint right before the measurement instead would
    /// load it with a full-page-image storm: p99 of the floor went from 9 to 160 ms that way.
    async fn settle(&self) -> Result<(), Error> {
        sqlx::query("checkpoint").execute(&self.pool).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(())
    }
}

/// The bench client's scopes; the event scopes only when the events phase runs (a binary from before them, measured
/// for comparison with BENCH_BINARY, would refuse them).
fn scopes(settings: &Settings) -> Vec<&'static str> {
    let mut scopes = vec!["runs:write", "runs:read", "users:write", "decisions:write"];
    if settings.wants("events") {
        scopes.extend(["events:read", "webhooks:write"]);
    }
    scopes
}

/// Which build of the service a `Bench` runs, on which database, logging to which file of the output folder.
struct Instance<'a> {
    binary: &'a Path,
    database: &'a str,
    log_name: &'a str,
}

impl<'a> Instance<'a> {
    /// The binary measured (BENCH_BINARY) on BENCH_DATABASE.
    fn measured(settings: &'a Settings, log_name: &'a str) -> Instance<'a> {
        Instance {
            binary: &settings.target.binary,
            database: &settings.database,
            log_name,
        }
    }
}

async fn start(
    settings: &Settings,
    instance: &Instance<'_>,
    pool_size: u32,
    fresh: bool,
) -> Result<(Bench, String, String), Error> {
    std::fs::create_dir_all(&settings.target.out_dir)?;
    let database_url = if fresh {
        service::fresh_database(&settings.target.server_url, instance.database).await?
    } else {
        format!("{}/{}", settings.target.server_url, instance.database)
    };
    let key = service::add_client(
        instance.binary,
        &database_url,
        &format!("bench-{}", uuid::Uuid::new_v4().simple()),
        &scopes(settings),
    )?;
    let executor_port = executor::start().await?;
    let tools_config = settings.target.out_dir.join("tools.toml");
    executor::write_config(&tools_config, executor_port)?;
    let service = Service::start(&Launch {
        binary: instance.binary,
        database_url: &database_url,
        pool_size,
        tools_config: Some(&tools_config),
        log_file: settings.target.out_dir.join(instance.log_name),
    })
    .await?;
    let api = Api::new(&service.base_url, &key);
    api.put_users().await?;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&database_url)
        .await?;
    let driver = |kind| Driver {
        base_url: service.base_url.as_str().into(),
        key: key.as_str().into(),
        kind,
        answered: Default::default(),
    };
    let bench = Bench {
        driver_deny: driver(Kind::Deny),
        driver_approve: driver(Kind::Approve),
        driver_mixed: driver(Kind::Mixed),
        api,
        service,
        pool,
        ticks: service::ticks_per_sec(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as f64,
    };
    Ok((bench, database_url, key))
}

async fn benchmark(settings: &Settings) -> Result<(), Error> {
    let started = Instant::now();
    let log_name = format!("service-pool{}.log", settings.pool_size);
    let instance = Instance::measured(settings, &log_name);
    let (bench, database_url, key) = start(settings, &instance, settings.pool_size, true).await?;
    println!("{}", machine(settings, &bench.pool).await?);
    let warmup = Stop::After(settings.warmup);
    let measure = Stop::After(settings.seconds);

    let mut deny = Vec::new();
    let mut floors = Vec::new();
    let mut floor = if settings.wants("floor") {
        let template = bench
            .api
            .register_runs(1, Shape::TYPICAL, 1)
            .await?
            .remove(0);
        Some(Floor {
            pgbench: floor::find_pgbench().ok_or("pgbench not found: set PGBENCH")?,
            database_url: database_url.clone(),
            log_dir: settings.target.out_dir.clone(),
            template: template.id,
            digest: template.digest,
            key_hash_hex: hex::encode(approval_resume::keys::hash(&key)),
            next_n: 1,
        })
    } else {
        None
    };
    // The naive floor is the target; `current` (the service's own SQL) and `previous` (the deny before the outbox)
    // say where the difference goes.
    let mut scripts: Vec<&'static str> = vec!["naive", "current"];
    if settings.wants("previous") {
        scripts.push("previous");
    }
    for &clients in &settings.concurrency {
        if settings.wants("deny") {
            let phase = bench
                .phase(Kind::Deny, Shape::TYPICAL, clients, warmup, measure)
                .await?;
            eprintln!(
                "deny   c={clients:<3} {:>7.0}/s  errors {}",
                phase.outcome.rate(),
                phase.outcome.error_count()
            );
            deny.push(phase);
        }
        if let Some(floor) = floor.as_mut() {
            for &script in &scripts {
                floors.push(
                    floor_phase(&bench, floor, script, clients, measure_length(settings)).await?,
                );
            }
        }
    }
    // The service never holds more than DATABASE_POOL_SIZE connections; pgbench at that many is the fair floor
    // for higher concurrencies (more backends than that only add contention on two cores).
    let pool = settings.pool_size as usize;
    if let Some(floor) = floor.as_mut()
        && settings.concurrency.iter().any(|&c| c > pool)
        && !settings.concurrency.contains(&pool)
    {
        for &script in &scripts {
            floors.push(floor_phase(&bench, floor, script, pool, measure_length(settings)).await?);
        }
    }
    // Run alone (BENCH_PHASES=native, say), the other phases print nothing.
    if !deny.is_empty() || !floors.is_empty() {
        println!(
            "## Deny decisions against the floor\n\n{}",
            report::deny_vs_floor(&deny, &floors, pool)
        );
        if let Some(headline) = report::headline(&deny, &floors, HEADLINE_CLIENTS) {
            println!("{headline}\n");
        }
        println!(
            "## Where the CPU went\n\n{}",
            report::resources(&deny, &floors, bench.cores)
        );
    }

    let saturating = deny.iter().map(|p| p.outcome.rate()).fold(0.0, f64::max);
    if settings.wants("latency") && saturating > 0.0 {
        let rate = saturating / 2.0;
        let consumer_key = settings.wants("events").then_some(key.as_str());
        let typical = seed::members(Shape::TYPICAL)?;
        let (phase, consumers) =
            open_loop(&bench, &typical, rate, settings.seconds, consumer_key).await?;
        if let Some(consumers) = consumers {
            let (feed, webhook) = consumers.stop(Duration::from_secs(3)).await?;
            let answered = bench
                .driver_deny
                .answered
                .lock()
                .expect("never poisoned")
                .clone();
            println!(
                "## Commit to consumer at half the saturating load ({rate:.0} denials/s)\n\n\
                 The commit of each `run.resumed` event lies between its `timestamp` (`created_at`, `now()` in \
                 Postgres: its transaction's start) and the arrival of its decision's answer at the driver. So \
                 each arrival at a consumer is measured from both: from the transaction's start (an upper bound \
                 of commit to consumer) and from the answer (a lower bound; 0 when the consumer had it first), \
                 all on this machine's clock.\n\n{}",
                event_latency::report(phase.outcome.ok as usize, &feed, &webhook, &answered)
            );
        }
        eprintln!(
            "latency at {rate:.0}/s: achieved {:.0}/s",
            phase.outcome.rate()
        );
        let mut floor_rows = Vec::new();
        if let Some(floor) = floor.as_mut() {
            for &script in &scripts {
                let length = Length::Rate(rate, settings.seconds);
                floor_rows.push(floor_phase(&bench, floor, script, pool, length).await?);
            }
        }
        println!(
            "## Latency at half the saturating load (open loop, Poisson arrivals)\n\n{}",
            report::open_loop(rate, saturating, &phase, &floor_rows)
        );
    }

    if settings.wants("approve") {
        let mut approve = Vec::new();
        for &clients in &settings.concurrency {
            let phase = bench
                .phase(Kind::Approve, Shape::TYPICAL, clients, warmup, measure)
                .await?;
            eprintln!(
                "approve c={clients:<3} {:>7.0}/s  errors {}",
                phase.outcome.rate(),
                phase.outcome.error_count()
            );
            approve.push(phase);
        }
        println!(
            "## Approve decisions (one call, local no-op executor)\n\n{}",
            report::plain("clients", &approve)
        );
        // The two paths' ratio when nothing but Postgres does the writes docs/design.md §5 requires (the decision
        // committed before the call runs, its outcome after): both naive floors back to back at each concurrency,
        // each on a fresh copy of the tables as the approvals left them, so that neither meets a fuller database.
        if let Some(floor) = floor.as_mut() {
            let mut naive_floors = Vec::new();
            for &clients in &settings.concurrency {
                for script in ["naive", "naive-approve"] {
                    let length = measure_length(settings);
                    naive_floors.push(floor_phase(&bench, floor, script, clients, length).await?);
                }
            }
            println!(
                "## Approvals against denies, and the naive floors' own ratio\n\n{}",
                report::approve_vs_deny(&approve, &deny, &naive_floors)
            );
        }
    }

    if settings.wants("mixed") {
        // The same three-call turns, decided whole (approve all) and per call (approve, approve edited, deny).
        let three = Shape {
            messages: 10,
            calls: 3,
        };
        let (mut whole, mut mixed) = (Vec::new(), Vec::new());
        for &clients in &settings.concurrency {
            for (kind, into) in [(Kind::Approve, &mut whole), (Kind::Mixed, &mut mixed)] {
                let phase = bench.phase(kind, three, clients, warmup, measure).await?;
                eprintln!(
                    "{kind:?} (3 calls) c={clients:<3} {:>7.0}/s  errors {}",
                    phase.outcome.rate(),
                    phase.outcome.error_count()
                );
                into.push(phase);
            }
        }
        println!(
            "## Three-call turns: whole-turn approval\n\n{}",
            report::plain("clients", &whole)
        );
        println!(
            "## Three-call turns: per-call verdicts (approve, approve with edited arguments, deny)\n\n{}",
            report::plain("clients", &mixed)
        );
    }

    if settings.wants("scaling") {
        let clients = settings.scaling_clients;
        // Big transcripts last: the allocator keeps what they took, which would inflate the small ones' peak RSS.
        let shapes = [
            (10, 1),
            (10, 4),
            (10, 16),
            (100, 1),
            (1_000, 1),
            (10_000, 1),
        ];
        let mut points = Vec::new();
        for (messages, calls) in shapes {
            // Fewer decisions of the big shapes: each 10,000-message run is about 2.5 MB to seed and to answer.
            let count = (1_500_000 / messages).clamp(120, 3_000);
            let shape = Shape { messages, calls };
            let phase = bench
                .phase(
                    Kind::Deny,
                    shape,
                    clients,
                    Stop::Count(clients * 2),
                    Stop::Count(count),
                )
                .await?;
            eprintln!(
                "scale  {messages:>6} msgs {calls:>2} calls {:>7.0}/s",
                phase.outcome.rate()
            );
            points.push(ScalePoint {
                messages,
                calls,
                phase,
            });
        }
        println!(
            "## Deny cost by transcript size and calls per turn ({clients} clients)\n\n{}",
            report::scaling(&points)
        );
    }
    if settings.wants("native") {
        native_phase(&bench, settings).await?;
    }
    if settings.wants("straightforward") {
        straightforward_phase::run(&bench, settings, &database_url).await?;
    }
    alternation::run(&bench, settings).await?;
    println!("Whole run: {:.0} s.", started.elapsed().as_secs_f64());
    bench.service.stop();
    Ok(())
}

/// Deny decisions on an Anthropic run with extended thinking beside an OpenAI chat run of the same size (the
/// native path must cost no more than the chat path). The two alternate phase by phase, in the order chat,
/// Anthropic in even rounds and Anthropic, chat in odd ones, so that whatever else loads the machine meanwhile
/// (a drift, a neighbour's build) falls on both alike; each row pools its format's rounds. A phase decides a fixed
/// number of runs (BENCH_NATIVE_DECISIONS) rather than running for a time: at 35 KB a run, seeding for 8 s at the
/// warm-up's rate would write a quarter of a gigabyte per phase.
async fn native_phase(bench: &Bench, settings: &Settings) -> Result<(), Error> {
    let measure = Stop::Count(settings.native_decisions);
    let anthropic = native::anthropic(settings.native_bytes, "r");
    let chat = native::chat(anthropic.len(), "r");
    let runs = [("openai-chat", chat), ("anthropic", anthropic)];
    let mut rows: Vec<NativeRow> = Vec::new();
    for &clients in &settings.native_clients {
        for (format, members) in &runs {
            rows.push(NativeRow {
                clients,
                format,
                body_bytes: members.len(),
                phases: Vec::new(),
            });
        }
    }
    for round in 0..settings.native_rounds {
        for &clients in &settings.native_clients {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let (format, members) = &runs[which];
                let label = format!("{format} run of {} bytes", members.len());
                let warmup = Stop::Count((clients * 10).max(100));
                let phase = bench
                    .phase_of(Kind::Deny, members, &label, clients, warmup, measure)
                    .await?;
                eprintln!(
                    "native round {round} {format:<11} c={clients:<3} {:>7.0}/s  errors {}",
                    phase.outcome.rate(),
                    phase.outcome.error_count()
                );
                rows.iter_mut()
                    .find(|row| row.clients == clients && row.format == *format)
                    .expect("a row per format and client count")
                    .phases
                    .push(phase);
            }
        }
    }
    println!(
        "## Native transcripts: deny of an Anthropic run with thinking beside an OpenAI chat run of the same size\n\n{}",
        report::native_vs_chat(&rows)
    );
    Ok(())
}

/// The client count of the deny throughput target: deny decisions at least as fast as the naive floor at 32 clients.
const HEADLINE_CLIENTS: usize = 32;

fn measure_length(settings: &Settings) -> Length {
    Length::Seconds(settings.seconds)
}

/// pgbench at `clients` connections with bench/deny_floor_naive.sql (`naive`, on a fresh copy of the service's
/// tables; `naive-approve`: bench/approve_floor_naive.sql, on the same), bench/deny_floor.sql (`current`) or
/// bench/deny_floor_previous.sql (`previous`): a short warm-up that also sizes the seeding, then the measured run.
async fn floor_phase(
    bench: &Bench,
    floor: &mut Floor,
    script: &'static str,
    clients: usize,
    length: Length,
) -> Result<FloorPhase, Error> {
    let (file, tables) = match script {
        "naive" => ("bench/deny_floor_naive.sql", Tables::Naive),
        "naive-approve" => ("bench/approve_floor_naive.sql", Tables::Naive),
        "previous" => ("bench/deny_floor_previous.sql", Tables::Service),
        _ => ("bench/deny_floor.sql", Tables::Service),
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    if tables == Tables::Naive {
        Floor::copy_naive(&bench.pool).await?;
    }
    bench.settle().await?;
    let per_client = (400 / clients).max(30);
    let warm_count = (per_client * clients) as i64;
    let warm_base = floor.seed(&bench.pool, warm_count, tables).await?;
    // pgbench's backends are not there yet: each run's CPU is read once they have all exited again.
    let backends_before = service::postgres_process_count();
    let warm = floor.run(
        "warmup",
        &path,
        clients,
        warm_base,
        Length::PerClient(per_client),
    )?;
    if let Some(failed) = warm.failed {
        return Err(format!("pgbench warm-up of {file} failed: {failed}").into());
    }
    // Each client walks its own sequence, so some need more than the average, and the short warm-up may run slower
    // than the measured phase (a cold cache): seed three times what the warm-up's rate needs.
    let needed = match length {
        Length::Seconds(seconds) => warm.tps * seconds.as_secs_f64(),
        Length::Rate(rate, seconds) => rate * seconds.as_secs_f64(),
        Length::PerClient(count) => (count * clients) as f64,
    };
    let count = (needed * 3.0) as i64 + 50 * clients as i64;
    let base = floor.seed(&bench.pool, count, tables).await?;
    eprintln!("measuring pgbench {file}, {clients} connections, {length:?}, {count} runs seeded");
    service::wait_for_backends_reaped(backends_before, Duration::from_secs(10));
    let before = Cpu::read(None, bench.ticks);
    let measured_from = Instant::now();
    let outcome = floor.run(
        &format!("{script}_c{clients}"),
        &path,
        clients,
        base,
        length,
    )?;
    let seconds = measured_from.elapsed().as_secs_f64();
    service::wait_for_backends_reaped(backends_before, Duration::from_secs(10));
    let cpu = Cpu::read(None, bench.ticks).since(&before);
    Floor::clean(&bench.pool, warm_base, warm_count, tables).await?;
    Floor::clean(&bench.pool, base, count, tables).await?;
    eprintln!(
        "floor {script} c={clients:<3} {:>7.0}/s  {}",
        outcome.tps,
        outcome.failed.as_deref().unwrap_or("")
    );
    Ok(FloorPhase {
        script,
        clients,
        outcome,
        cpu,
        seconds,
    })
}

/// The open-loop deny phase on runs whose registrations hold `members`; with `consumer_key`, a feed reader and a
/// webhook receiver follow its events (started after the warm-up, so that they count the measured decisions' events
/// only).
async fn open_loop(
    bench: &Bench,
    members: &str,
    rate: f64,
    duration: Duration,
    consumer_key: Option<&str>,
) -> Result<(Phase, Option<event_latency::Consumers>), Error> {
    let clients = 64;
    bench.settle().await?;
    let connections = load::clients(clients);
    let warm = Arc::new(bench.api.register_members(clients * 4, members, 16).await?);
    bench
        .driver_deny
        .closed_loop(&connections, warm, Stop::Count(clients * 4))
        .await;
    let count = (rate * duration.as_secs_f64()) as usize + 1;
    let targets = Arc::new(bench.api.register_members(count, members, 16).await?);
    let consumers = match consumer_key {
        Some(key) => Some(event_latency::Consumers::start(&bench.service.base_url, key).await?),
        None => None,
    };
    bench.service.reset_peak_rss();
    let before = Cpu::read(Some(bench.service.pid), bench.ticks);
    let outcome = bench
        .driver_deny
        .open_loop(&connections, targets, rate, duration)
        .await;
    let cpu = Cpu::read(Some(bench.service.pid), bench.ticks).since(&before);
    let (peak_rss_kib, _) = bench.service.memory();
    let phase = Phase {
        clients,
        outcome,
        cpu,
        peak_rss_kib,
    };
    Ok((phase, consumers))
}

/// Deny throughput at the two highest concurrencies for each pool size, each on a freshly started service.
async fn pool_sweep(settings: &Settings) -> Result<(), Error> {
    let mut fresh = true;
    let mut printed_machine = false;
    let mut out = String::from(
        "| DATABASE_POOL_SIZE | clients | decisions/s | p50 ms | p99 ms | p99.9 ms | errors | Postgres CPU ms/op | service peak RSS MiB |\n\
         |---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
    );
    let clients: Vec<usize> = settings
        .concurrency
        .iter()
        .rev()
        .take(2)
        .rev()
        .copied()
        .collect();
    for &pool_size in &settings.sweep_pools {
        let log_name = format!("service-pool{pool_size}.log");
        let instance = Instance::measured(settings, &log_name);
        let (bench, _, _) = start(settings, &instance, pool_size, fresh).await?;
        fresh = false;
        if !printed_machine {
            println!("{}", machine(settings, &bench.pool).await?);
            printed_machine = true;
        }
        for &c in &clients {
            let phase = bench
                .phase(
                    Kind::Deny,
                    Shape::TYPICAL,
                    c,
                    Stop::After(settings.warmup),
                    Stop::After(settings.seconds),
                )
                .await?;
            eprintln!(
                "pool {pool_size:<3} c={c:<3} {:>7.0}/s",
                phase.outcome.rate()
            );
            let p = |q: f64| {
                format!(
                    "{:.2}",
                    phase.outcome.latency.value_at_quantile(q) as f64 / 1000.0
                )
            };
            out.push_str(&format!(
                "| {pool_size} | {c} | {:.0} | {} | {} | {} | {} | {:.3} | {:.1} |\n",
                phase.outcome.rate(),
                p(0.5),
                p(0.99),
                p(0.999),
                phase.outcome.error_count(),
                phase.cpu.postgres_ms / phase.outcome.ok.max(1) as f64,
                phase.peak_rss_kib as f64 / 1024.0,
            ));
        }
        bench.service.stop();
    }
    println!("## Deny throughput by pool size\n\n{out}");
    Ok(())
}

/// The machine and the settings, as the report's header.
async fn machine(settings: &Settings, pool: &PgPool) -> Result<String, Error> {
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_owned())
        })
        .and_then(|kib| kib.parse::<f64>().ok())
        .map(|kib| format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        .unwrap_or_default();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_default();
    let postgres: String = sqlx::query_scalar("select version()")
        .fetch_one(pool)
        .await?;
    let settings_pg: Vec<(String, String)> = sqlx::query_as(
        "select name, setting || coalesce(unit, '') from pg_settings
         where name in ('shared_buffers', 'synchronous_commit', 'fsync', 'max_connections', 'wal_sync_method')
         order by name",
    )
    .fetch_all(pool)
    .await?;
    let others: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where backend_type = 'client backend' and datname <> current_database()",
    )
    .fetch_one(pool)
    .await?;
    let root = env!("CARGO_MANIFEST_DIR");
    Ok(format!(
        "# approval-resume benchmark\n\n\
         - machine: {} CPUs ({cpu_model}), {memory} memory, Postgres on the same machine\n\
         - {}\n\
         - Postgres: {postgres}; {}\n\
         - {}\n\
         - service: release build of {} (`git describe`: {}), DATABASE_POOL_SIZE={}, LOG_LEVEL=info,sqlx=warn\n\
         - phases: {} s measured after a {} s warm-up; clients {:?}; driver: 2 tokio workers, one keep-alive connection per client\n\
         - other client connections to this Postgres at start: {others}\n",
        run("nproc", &[]),
        run("uname", &["-sr"]),
        settings_pg
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        run("rustc", &["--version"]),
        settings.target.binary.display(),
        run("git", &["-C", root, "describe", "--always", "--dirty"]),
        settings.pool_size,
        settings.seconds.as_secs_f64(),
        settings.warmup.as_secs_f64(),
        settings.concurrency,
    ))
}
