//! The phases of issues 43 and 40 that measure the service against something else in the same run, alternated round
//! by round (first the one, then the other in even rounds, the other way round in odd ones), so that whatever else
//! loads the machine meanwhile falls on both alike; each prints its ratio per round and over the rounds:
//! - `straightforward`: the deny of an agent's transcript (41 messages of about 35 KB, two pending calls; and 3
//!   messages) against bench/deny_floor_straightforward.sql, and the deny's p99 at half its saturating load;
//! - `langgraph`: the same 41-message deny against LangGraph 1.2's resume of an interrupted thread
//!   (bench/langgraph_resume.py, PostgresSaver on the same server);
//! - `base`: the deny of today's binary against another build's (BENCH_BASE_BINARY, which bench/run.sh builds from
//!   BENCH_BASE_COMMIT), each on a database of its own;
//! - `registration`: the registration of the 41-message transcript, today's binary against the same other build on
//!   the same two databases (issue 40, item 5: a registration with no live rule costs no more than before rules),
//!   with the statements per registration where the server loads pg_stat_statements.
//!
//! Every measurement decides (or registers) a fixed number of runs (BENCH_ALT_DECISIONS) rather than running for a
//! time: at 35 KB a run, seeding for seconds at the warm-up's rate would write far more than the phase decides (as in
//! `native`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use uuid::Uuid;

use crate::floor::{Floor, Length};
use crate::load::{Kind, Stop};
use crate::seed::Shape;
use crate::straightforward::Script;
use crate::{Bench, Error, Instance};

/// The phases' knobs, from the environment (bench/run.sh lists them).
pub struct Settings {
    clients: usize,
    rounds: usize,
    decisions: usize,
    langgraph_python: PathBuf,
    langgraph_per_client: usize,
    base_binary: Option<PathBuf>,
    base_label: String,
}

impl Settings {
    pub fn from_env() -> Settings {
        let var = |name: &str| std::env::var(name).ok();
        let number =
            |name: &str, default: usize| var(name).and_then(|v| v.parse().ok()).unwrap_or(default);
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        Settings {
            clients: number("BENCH_ALT_CLIENTS", 32),
            rounds: number("BENCH_ALT_ROUNDS", 3).max(1),
            decisions: number("BENCH_ALT_DECISIONS", 1500),
            langgraph_python: var("BENCH_LANGGRAPH_PYTHON")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target/bench/langgraph-venv/bin/python")),
            langgraph_per_client: number("BENCH_LANGGRAPH_PER_CLIENT", 20),
            base_binary: var("BENCH_BASE_BINARY").map(PathBuf::from),
            base_label: var("BENCH_BASE_COMMIT").unwrap_or_else(|| "base".into()),
        }
    }
}

/// One measurement of one side: how many per second, and its p99 in milliseconds.
#[derive(Clone, Copy, Default)]
struct Side {
    rate: f64,
    p99_ms: f64,
    /// Statements per registration (the `registration` phase, where Postgres counts them).
    statements: Option<f64>,
    /// CPU per decision, where it was measured (the `straightforward` phase).
    cpu: Option<CpuPerDecision>,
}

/// Milliseconds of CPU per decision of one measurement, by who spent them: Postgres (every process of the server),
/// the service (none for a floor), and what drove the load (the harness's own clients, or pgbench).
#[derive(Clone, Copy, Default)]
struct CpuPerDecision {
    postgres_ms: f64,
    service_ms: f64,
    driver_ms: f64,
}

impl CpuPerDecision {
    fn of(cpu: &crate::service::Cpu, driver_ms: f64, decisions: u64) -> Option<CpuPerDecision> {
        let per = |ms: f64| ms / decisions as f64;
        (decisions > 0).then(|| CpuPerDecision {
            postgres_ms: per(cpu.postgres_ms),
            service_ms: per(cpu.service_ms),
            driver_ms: per(driver_ms),
        })
    }

    fn total_ms(&self) -> f64 {
        self.postgres_ms + self.service_ms + self.driver_ms
    }
}

/// One round of an alternation.
struct Round {
    first: Side,
    second: Side,
    /// Errors or shortfalls of either side, printed beside the round.
    note: String,
}

/// The phases of this module that BENCH_PHASES names, in order.
pub async fn run(
    bench: &Bench,
    settings: &crate::Settings,
    database_url: &str,
) -> Result<(), Error> {
    if settings.wants("straightforward") {
        straightforward(bench, settings, database_url).await?;
    }
    if settings.wants("langgraph") {
        langgraph(bench, settings).await?;
    }
    if settings.wants("base") || settings.wants("registration") {
        base(bench, settings).await?;
    }
    Ok(())
}

/// The service's deny of `members` at the phase's client count, deciding the phase's number of runs.
async fn deny(
    bench: &Bench,
    alt: &Settings,
    members: &str,
    label: &str,
) -> Result<(Side, String), Error> {
    let clients = alt.clients;
    let warmup = Stop::Count(warm_count(alt));
    let phase = bench
        .phase_of(
            Kind::Deny,
            members,
            label,
            clients,
            warmup,
            Stop::Count(alt.decisions),
        )
        .await?;
    let side = Side {
        rate: phase.outcome.rate(),
        p99_ms: phase.outcome.latency.value_at_quantile(0.99) as f64 / 1000.0,
        statements: None,
        cpu: CpuPerDecision::of(&phase.cpu, phase.cpu.harness_ms, phase.outcome.ok),
    };
    let mut note = String::new();
    if phase.outcome.error_count() > 0 {
        note = format!("service errors: {:?}", phase.outcome.errors);
    }
    if phase.outcome.exhausted {
        note.push_str(" service ran out of runs");
    }
    Ok((side, note))
}

/// The `straightforward` phase: both transcript sizes against the floor, then the p99 at half the load the
/// 41-message deny saturated at.
async fn straightforward(
    bench: &Bench,
    settings: &crate::Settings,
    database_url: &str,
) -> Result<(), Error> {
    let alt = &settings.alternation;
    let clients = alt.clients;
    let mut floor = Floor {
        pgbench: crate::floor::find_pgbench().ok_or("pgbench not found: set PGBENCH")?,
        database_url: database_url.to_owned(),
        log_dir: settings.target.out_dir.clone(),
        // Read by the other floors' scripts only; this one's variables are straightforward::run's.
        template: Uuid::nil(),
        digest: String::new(),
        key_hash_hex: String::new(),
        next_n: 1,
    };
    crate::straightforward::create(&bench.pool).await?;
    let mut out = String::from(
        "## The straightforward floor: deny ÷ floor (issue 43)\n\n\
         The service's deny alternated with bench/deny_floor_straightforward.sql (pgbench, one connection per client), \
         each deciding distinct waiting runs of the same transcript.\n\n",
    );
    let mut headline = Vec::new();
    let mut saturating: f64 = 0.0;
    let mut agent_members = String::new();
    for (messages, bytes) in crate::agent::SIZES {
        let transcript = crate::agent::messages(messages, bytes);
        let text = crate::agent::json(&transcript);
        let members = format!("\"messages\":{text}");
        let label = format!(
            "{messages} messages, {} bytes, {} pending calls",
            text.len(),
            crate::agent::CALLS
        );
        let mut rounds = Vec::new();
        // The same floor with its transcript kept in place, measured in the same rounds: ÷ the floor, the most deny ÷
        // floor can reach by not rewriting the transcript; the deny ÷ it, how near the service comes to that.
        let (mut ceilings, mut against_kept) = (Vec::new(), Vec::new());
        for round in 0..alt.rounds {
            let (mut service, mut pgbench, mut kept) =
                (Side::default(), Side::default(), Side::default());
            let mut notes = Vec::new();
            for side in rotation(round) {
                match side {
                    Three::Service => {
                        let (side, note) = deny(bench, alt, &members, &label).await?;
                        service = side;
                        notes.push(note);
                    }
                    Three::Floor(script) => {
                        let (side, note) = straightforward_floor(
                            bench,
                            &mut floor,
                            script,
                            &transcript,
                            &text,
                            alt,
                        )
                        .await?;
                        if script == Script::Kept {
                            kept = side;
                        } else {
                            pgbench = side;
                        }
                        notes.push(note);
                    }
                }
            }
            eprintln!(
                "straightforward round {round} {label}: deny {:.0}/s, floor {:.0}/s, floor with the transcript kept {:.0}/s",
                service.rate, pgbench.rate, kept.rate
            );
            if messages == crate::agent::SIZES[0].0 {
                saturating = saturating.max(service.rate);
            }
            let note = notes
                .into_iter()
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            ceilings.push(Round {
                first: kept,
                second: pgbench,
                note: String::new(),
            });
            against_kept.push(Round {
                first: service,
                second: kept,
                note: String::new(),
            });
            rounds.push(Round {
                first: service,
                second: pgbench,
                note,
            });
        }
        out.push_str(&format!("### {label}, {clients} clients\n\n"));
        out.push_str(&table("service deny", "straightforward floor", &rounds));
        out.push_str(&format!(
            "\nThe ceiling in the same rounds: bench/deny_floor_straightforward_kept.sql, the floor's transaction with \
             the transcript kept in place (no HTTP, no service):\n\n{}\n",
            table("floor, transcript kept", "straightforward floor", &ceilings)
        ));
        out.push_str(&cpu_table(&[
            ("service deny", rounds.iter().map(|r| r.first).collect()),
            (
                "straightforward floor",
                rounds.iter().map(|r| r.second).collect(),
            ),
            (
                "floor, transcript kept",
                ceilings.iter().map(|r| r.first).collect(),
            ),
        ]));
        let target = if messages == crate::agent::SIZES[0].0 {
            2.5
        } else {
            1.0
        };
        headline.push(summary(
            &format!("{messages} messages: deny ÷ floor"),
            &rounds,
            target,
        ));
        headline.push(summary(
            &format!("{messages} messages: ceiling, floor with the transcript kept ÷ floor"),
            &ceilings,
            0.0,
        ));
        headline.push(summary(
            &format!("{messages} messages: deny ÷ floor with the transcript kept"),
            &against_kept,
            0.0,
        ));
        if messages == crate::agent::SIZES[0].0 {
            agent_members = members;
        }
    }
    println!("{out}");
    for line in headline {
        println!("{line}");
    }
    println!();
    // The p99 target: the deny of the long transcript at half the rate this phase saturated at, open loop.
    if saturating > 0.0 {
        let rate = saturating / 2.0;
        let (phase, _) =
            crate::open_loop(bench, &agent_members, rate, settings.seconds, None).await?;
        let p99 = phase.outcome.latency.value_at_quantile(0.99) as f64 / 1000.0;
        println!(
            "## p99 at half the saturating load ({} messages, open loop, Poisson arrivals, 64 clients)\n\n\
             | offered/s | achieved/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|\n\
             | {rate:.0} | {:.0} | {:.2} | {p99:.2} | {} |\n\n\
             **p99 {p99:.2} ms at half the saturating load; target < 10 ms: {}.**\n",
            crate::agent::SIZES[0].0,
            phase.outcome.rate(),
            phase.outcome.latency.value_at_quantile(0.5) as f64 / 1000.0,
            phase.outcome.error_count(),
            if p99 < 10.0 {
                "met in this run"
            } else {
                "not met in this run"
            },
        );
        // What the database alone answers at the same offered rate: the two floors through pgbench, open loop.
        let (messages, bytes) = crate::agent::SIZES[0];
        let transcript = crate::agent::messages(messages, bytes);
        let text = crate::agent::json(&transcript);
        let mut lines = String::new();
        for script in [Script::Rewritten, Script::Kept] {
            let (p50, p99, achieved) = floor_at_rate(
                bench,
                &mut floor,
                script,
                (&transcript, &text),
                clients,
                rate,
                settings.seconds,
            )
            .await?;
            lines.push_str(&format!(
                "| {} | {rate:.0} | {achieved:.0} | {p50:.2} | {p99:.2} |\n",
                script.path()
            ));
        }
        println!(
            "The floors at the same offered rate (pgbench -R, {clients} connections, latency from each \
             transaction's scheduled start):\n\n\
             | floor | offered/s | achieved/s | p50 ms | p99 ms |\n|---|---|---|---|---|\n{lines}"
        );
    }
    Ok(())
}

/// `script` through pgbench at `rate` transactions a second (Poisson arrivals) for `seconds`, on freshly seeded runs
/// of the transcript (as values, and as text): its p50, p99 (ms) and achieved rate.
async fn floor_at_rate(
    bench: &Bench,
    floor: &mut Floor,
    script: Script,
    (transcript, text): (&[Value], &str),
    clients: usize,
    rate: f64,
    seconds: Duration,
) -> Result<(f64, f64, f64), Error> {
    bench.settle().await?;
    // A quarter more runs than the rate asks for, so that no client walks past its last seeded run.
    let count = (rate * seconds.as_secs_f64() * 1.25) as i64 + clients as i64;
    let base = crate::straightforward::seed(floor, &bench.pool, count, text).await?;
    let outcome = crate::straightforward::run(
        floor,
        script,
        &format!("straight_rate_{}", rate as u64),
        transcript,
        clients,
        base,
        Length::Rate(rate, seconds),
    )?;
    if let Some(failed) = outcome.failed {
        return Err(format!(
            "pgbench of {} at {rate:.0}/s failed: {failed}",
            script.path()
        )
        .into());
    }
    Ok((
        outcome.latency.value_at_quantile(0.5) as f64 / 1000.0,
        outcome.latency.value_at_quantile(0.99) as f64 / 1000.0,
        outcome.tps,
    ))
}

/// One measured run of the straightforward floor on freshly seeded runs of `text`, after a short warm-up; checks
/// that every transaction resumed its run.
async fn straightforward_floor(
    bench: &Bench,
    floor: &mut Floor,
    script: Script,
    transcript: &[Value],
    text: &str,
    alt: &Settings,
) -> Result<(Side, String), Error> {
    let clients = alt.clients;
    bench.settle().await?;
    let warm_per_client = (200 / clients).max(5);
    let warm_base =
        crate::straightforward::seed(floor, &bench.pool, (warm_per_client * clients) as i64, text)
            .await?;
    let warm = crate::straightforward::run(
        floor,
        script,
        "straight_warmup",
        transcript,
        clients,
        warm_base,
        Length::PerClient(warm_per_client),
    )?;
    if let Some(failed) = warm.failed {
        return Err(
            format!("pgbench warm-up of the straightforward floor failed: {failed}").into(),
        );
    }
    let per_client = (alt.decisions / clients).max(1);
    let base =
        crate::straightforward::seed(floor, &bench.pool, (per_client * clients) as i64, text)
            .await?;
    let before = resumed(bench).await?;
    let cpu_before = crate::service::Cpu::read(None, bench.ticks);
    let outcome = crate::straightforward::run(
        floor,
        script,
        &format!("straight_c{clients}"),
        transcript,
        clients,
        base,
        Length::PerClient(per_client),
    )?;
    // pgbench has been waited for, so its CPU is in the harness's children's.
    let cpu = crate::service::Cpu::read(None, bench.ticks).since(&cpu_before);
    let decided = resumed(bench).await? - before;
    if let Some(failed) = outcome.failed {
        return Err(format!("pgbench of {} failed: {failed}", script.path()).into());
    }
    let mut note = String::new();
    if decided != outcome.transactions as i64 || decided != (per_client * clients) as i64 {
        note = format!(
            "floor: {decided} runs resumed for {} transactions of {}",
            outcome.transactions,
            per_client * clients
        );
    }
    let side = Side {
        rate: outcome.tps,
        p99_ms: outcome.latency.value_at_quantile(0.99) as f64 / 1000.0,
        statements: None,
        cpu: CpuPerDecision::of(&cpu, cpu.children_ms, outcome.transactions),
    };
    Ok((side, note))
}

async fn resumed(bench: &Bench) -> Result<i64, Error> {
    Ok(
        sqlx::query_scalar("select count(*) from straight.runs where status = 'resumed'")
            .fetch_one(&bench.pool)
            .await?,
    )
}

/// The `langgraph` phase: the 41-message deny alternated with LangGraph's resumes of threads holding the same
/// transcript, on a database of its own on the same server.
async fn langgraph(bench: &Bench, settings: &crate::Settings) -> Result<(), Error> {
    let alt = &settings.alternation;
    let (messages, bytes) = crate::agent::SIZES[0];
    let transcript = crate::agent::messages(messages, bytes);
    let text = crate::agent::json(&transcript);
    let members = format!("\"messages\":{text}");
    let label = format!("{messages} messages, {} bytes", text.len());
    let dir = &settings.target.out_dir;
    let messages_file = dir.join("langgraph-messages.json");
    let results_file = dir.join("langgraph-results.json");
    std::fs::write(&messages_file, &text)?;
    std::fs::write(
        &results_file,
        Value::from(crate::agent::denials(&transcript)).to_string(),
    )?;
    let database = format!("{}_langgraph", settings.database);
    let url = crate::service::fresh_database(&settings.target.server_url, &database).await?;
    let mut rounds = Vec::new();
    for round in 0..alt.rounds {
        let (mut service, mut resumes) = (Side::default(), Side::default());
        let mut notes = Vec::new();
        for service_now in order(round) {
            if service_now {
                let (side, note) = deny(bench, alt, &members, &label).await?;
                service = side;
                notes.push(note);
            } else {
                bench.settle().await?;
                let answer = Command::new(&alt.langgraph_python)
                    .arg(
                        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                            .join("bench/langgraph_resume.py"),
                    )
                    .args(["--database-url", &url])
                    .arg("--messages")
                    .arg(&messages_file)
                    .arg("--results")
                    .arg(&results_file)
                    .args(["--clients", &alt.clients.to_string()])
                    .args(["--per-client", &alt.langgraph_per_client.to_string()])
                    .output()
                    .map_err(|e| format!("cannot run {}: {e}", alt.langgraph_python.display()))?;
                if !answer.status.success() {
                    let stderr = String::from_utf8_lossy(&answer.stderr);
                    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
                    return Err(
                        format!("bench/langgraph_resume.py failed: {}", tail.join(" | ")).into(),
                    );
                }
                let line: Value = serde_json::from_slice(&answer.stdout)?;
                resumes = Side {
                    rate: line["rate"].as_f64().unwrap_or(0.0),
                    p99_ms: line["p99_ms"].as_f64().unwrap_or(0.0),
                    statements: None,
                    cpu: None,
                };
                let errors = line["errors"].as_u64().unwrap_or(0);
                if errors > 0 {
                    notes.push(format!(
                        "LangGraph: {errors} resumes did not append the results"
                    ));
                }
            }
        }
        eprintln!(
            "langgraph round {round}: deny {:.0}/s, LangGraph resume {:.0}/s",
            service.rate, resumes.rate
        );
        rounds.push(Round {
            first: service,
            second: resumes,
            note: notes
                .into_iter()
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    println!(
        "## LangGraph 1.2: deny ÷ resume (issue 43)\n\n\
         The service's deny alternated with LangGraph's Command(resume=…) of threads stopped at interrupt() before \
         their tool node, PostgresSaver on the same server (bench/langgraph_resume.py, versions in \
         bench/langgraph-requirements.txt), {} clients, each thread resumed once; {label}.\n\n{}\n{}\n",
        alt.clients,
        table("service deny", "LangGraph resume", &rounds),
        summary("deny ÷ LangGraph resume", &rounds, 10.0)
    );
    Ok(())
}

/// The `base` and `registration` phases: today's binary against BENCH_BASE_BINARY, each with a database of its own
/// and one instance of each for both phases.
async fn base(today: &Bench, settings: &crate::Settings) -> Result<(), Error> {
    let alt = &settings.alternation;
    let binary = alt.base_binary.as_deref().ok_or(
        "the base and registration phases need BENCH_BASE_BINARY (bench/run.sh builds it from BENCH_BASE_COMMIT)",
    )?;
    let database = format!("{}_base", settings.database);
    let log_name = format!("service-base-pool{}.log", settings.pool_size);
    let instance = Instance {
        binary,
        database: &database,
        log_name: &log_name,
    };
    let (other, _, _) = crate::start(settings, &instance, settings.pool_size, true).await?;
    let (messages, bytes) = crate::agent::SIZES[0];
    let agent = format!(
        "\"messages\":{}",
        crate::agent::json(&crate::agent::messages(messages, bytes))
    );
    if settings.wants("base") {
        base_deny(today, &other, alt, &agent).await?;
    }
    if settings.wants("registration") {
        registrations(today, &other, alt, &agent).await?;
    }
    other.service.stop();
    Ok(())
}

/// The `base` phase's deny, on the typical run and on the 41-message one (`agent`).
async fn base_deny(today: &Bench, other: &Bench, alt: &Settings, agent: &str) -> Result<(), Error> {
    let (messages, _) = crate::agent::SIZES[0];
    let runs = [
        (
            "typical run (10 messages, 1 call)".to_owned(),
            crate::seed::members(Shape::TYPICAL)?,
        ),
        (format!("{messages} messages, 2 calls"), agent.to_owned()),
    ];
    let mut out = format!(
        "## Today's build against {} (deny, alternated, {} clients)\n\n",
        alt.base_label, alt.clients
    );
    let mut lines = Vec::new();
    for (label, members) in &runs {
        let rounds = against_base(today, other, alt, label, |bench| {
            deny(bench, alt, members, label)
        })
        .await?;
        out.push_str(&format!("### {label}\n\n"));
        out.push_str(&table("today", &alt.base_label, &rounds));
        out.push('\n');
        lines.push(summary(
            &format!("{label}: today ÷ {}", alt.base_label),
            &rounds,
            0.0,
        ));
    }
    println!("{out}");
    for line in lines {
        println!("{line}");
    }
    println!();
    Ok(())
}

/// The `registration` phase (issue 40, item 5): registrations of distinct runs of the 41-message transcript
/// (`agent`, two pending calls, each run owned by one of the seeded users, no rule in either database), today's
/// against the base's, and the statements each made per registration where Postgres counts them.
async fn registrations(
    today: &Bench,
    other: &Bench,
    alt: &Settings,
    agent: &str,
) -> Result<(), Error> {
    let (messages, _) = crate::agent::SIZES[0];
    let label = format!("{messages} messages, 2 calls");
    let rounds = against_base(today, other, alt, "registration", |bench| {
        register(bench, alt, agent)
    })
    .await?;
    let median = |side: fn(&Round) -> Side| {
        let mut counted: Vec<f64> = rounds.iter().filter_map(|r| side(r).statements).collect();
        counted.sort_by(f64::total_cmp);
        counted.get(counted.len() / 2).copied()
    };
    let statements = match (median(|r| r.first), median(|r| r.second)) {
        (Some(now), Some(then)) => format!(
            "**statements per registration (pg_stat_statements: everything run on each database during the \
             measurement ÷ its registrations, the periodic sweeps' few included), median over the rounds: today \
             {now:.2}, {} {then:.2}.**",
            alt.base_label
        ),
        _ => "statements per registration: not counted here (the server does not load pg_stat_statements: \
              shared_preload_libraries); tests/round_trips.rs counts them on a private cluster: 9 with no live \
              rule, as before remembered decisions."
            .to_owned(),
    };
    println!(
        "## Today's build against {} (registration, alternated, {} clients)\n\n\
         Each measurement registers {} distinct runs ({label}, no rule in the database), after {} unmeasured.\n\n{}\n{}\n{statements}\n",
        alt.base_label,
        alt.clients,
        alt.decisions,
        warm_count(alt),
        table("today", &alt.base_label, &rounds),
        summary(
            &format!("registration: today ÷ {}", alt.base_label),
            &rounds,
            0.0
        ),
    );
    Ok(())
}

/// How many runs a measurement's warm-up decides or registers.
fn warm_count(alt: &Settings) -> usize {
    (alt.clients * 10).max(100)
}

/// One measurement of registrations on `bench`: a warm-up (which also opens the clients' connections), then
/// BENCH_ALT_DECISIONS registrations on BENCH_ALT_CLIENTS clients, and the statements they made if counted. A
/// refused registration ends the phase with its answer.
async fn register(bench: &Bench, alt: &Settings, members: &str) -> Result<(Side, String), Error> {
    bench.settle().await?;
    bench
        .api
        .register_members(warm_count(alt), members, alt.clients)
        .await?;
    let before = statements(bench).await?;
    let started = Instant::now();
    let timed = bench
        .api
        .register_timed(alt.decisions, members, alt.clients)
        .await?;
    let elapsed = started.elapsed();
    let after = statements(bench).await?;
    let mut latencies: Vec<Duration> = timed.into_iter().map(|(_, latency)| latency).collect();
    latencies.sort();
    let p99 = latencies
        .get((latencies.len() * 99).div_ceil(100).saturating_sub(1))
        .copied()
        .unwrap_or_default();
    let count = latencies.len().max(1) as f64;
    let statements = before
        .zip(after)
        .map(|(before, after)| (after - before) as f64 / count);
    let note = statements
        .map(|s| format!("{s:.2} statements per registration"))
        .unwrap_or_default();
    let side = Side {
        rate: latencies.len() as f64 / elapsed.as_secs_f64(),
        p99_ms: p99.as_secs_f64() * 1000.0,
        statements,
        cpu: None,
    };
    Ok((side, note))
}

/// The executions Postgres recorded on `bench`'s database so far (each one round trip, `BEGIN` and `COMMIT`
/// included), leaving out the reads of this count and the webhook dispatcher's look for subscriptions, made once a
/// second whatever happens (as tests/round_trips.rs does); none when the server does not load pg_stat_statements.
async fn statements(bench: &Bench) -> Result<Option<i64>, Error> {
    let loaded: bool = sqlx::query_scalar(
        "select current_setting('shared_preload_libraries') ilike '%pg_stat_statements%'",
    )
    .fetch_one(&bench.pool)
    .await?;
    if !loaded {
        return Ok(None);
    }
    sqlx::query("create extension if not exists pg_stat_statements")
        .execute(&bench.pool)
        .await?;
    let executed: Option<i64> = sqlx::query_scalar(
        "select sum(calls)::bigint from pg_stat_statements
         where dbid = (select oid from pg_database where datname = current_database())
           and query not ilike '%pg_stat_statements%'
           and query not ilike '%webhook_subscriptions%'",
    )
    .fetch_one(&bench.pool)
    .await?;
    Ok(Some(executed.unwrap_or(0)))
}

/// BENCH_ALT_ROUNDS rounds of `measure` on today's instance and the base's, in `order`; `what` names the rounds in
/// the progress lines.
async fn against_base<'a, F, Fut>(
    today: &'a Bench,
    other: &'a Bench,
    alt: &Settings,
    what: &str,
    mut measure: F,
) -> Result<Vec<Round>, Error>
where
    F: FnMut(&'a Bench) -> Fut,
    Fut: Future<Output = Result<(Side, String), Error>>,
{
    let mut rounds = Vec::new();
    for round in 0..alt.rounds {
        let (mut now, mut then) = (Side::default(), Side::default());
        let mut notes = Vec::new();
        for today_now in order(round) {
            let (side, note) = measure(if today_now { today } else { other }).await?;
            if today_now {
                now = side;
                notes.push(prefixed("today", note));
            } else {
                then = side;
                notes.push(prefixed(&alt.base_label, note));
            }
        }
        eprintln!(
            "base round {round} {what}: today {:.0}/s, {} {:.0}/s",
            now.rate, alt.base_label, then.rate
        );
        rounds.push(Round {
            first: now,
            second: then,
            note: notes
                .into_iter()
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    Ok(rounds)
}

/// `note` said of `side`, or nothing when there is nothing to say.
fn prefixed(side: &str, note: String) -> String {
    if note.is_empty() {
        note
    } else {
        format!("{side}: {}", note.trim())
    }
}

/// A side of the `straightforward` phase.
#[derive(Clone, Copy)]
enum Three {
    Service,
    Floor(Script),
}

/// The order of the `straightforward` phase's three sides in `round`: each first, second and third in turn.
fn rotation(round: usize) -> [Three; 3] {
    let mut sides = [
        Three::Service,
        Three::Floor(Script::Rewritten),
        Three::Floor(Script::Kept),
    ];
    sides.rotate_left(round % 3);
    sides
}

/// Which side goes first in `round`: the service (true) in even rounds, the other in odd ones.
fn order(round: usize) -> [bool; 2] {
    if round.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// Where each side's CPU went, per decision, as the median over its rounds of each part (the machine's cores are
/// what every side shares, so the total bounds its rate: cores ÷ total).
fn cpu_table(sides: &[(&str, Vec<Side>)]) -> String {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    };
    let mut out = String::from(
        "\nCPU per decision, ms (median of the rounds; Postgres: every process of the server; the driver: the harness's \
         HTTP clients, or pgbench):\n\n\
         | side | Postgres | service | driver | total | decisions/s the cores could carry at that |\n\
         |---|---|---|---|---|---|\n",
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for (name, measured) in sides {
        let cpus: Vec<CpuPerDecision> = measured.iter().filter_map(|side| side.cpu).collect();
        if cpus.is_empty() {
            continue;
        }
        let total = median(cpus.iter().map(CpuPerDecision::total_ms).collect());
        out.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {:.3} | {total:.3} | {:.0} |\n",
            median(cpus.iter().map(|c| c.postgres_ms).collect()),
            median(cpus.iter().map(|c| c.service_ms).collect()),
            median(cpus.iter().map(|c| c.driver_ms).collect()),
            if total > 0.0 {
                cores * 1000.0 / total
            } else {
                0.0
            },
        ));
    }
    out
}

/// The rounds as a Markdown table, with each round's ratio first ÷ second.
fn table(first: &str, second: &str, rounds: &[Round]) -> String {
    let mut out = format!(
        "| round | {first} /s | p99 ms | {second} /s | p99 ms | {first} ÷ {second} | notes |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (i, round) in rounds.iter().enumerate() {
        out.push_str(&format!(
            "| {i} | {:.0} | {:.2} | {:.0} | {:.2} | {} | {} |\n",
            round.first.rate,
            round.first.p99_ms,
            round.second.rate,
            round.second.p99_ms,
            ratio(round),
            round.note
        ));
    }
    out
}

fn ratio(round: &Round) -> String {
    if round.second.rate > 0.0 {
        format!("{:.2}", round.first.rate / round.second.rate)
    } else {
        "–".into()
    }
}

/// The ratio's range and median over the rounds, against `target` (none when 0).
fn summary(name: &str, rounds: &[Round], target: f64) -> String {
    let mut ratios: Vec<f64> = rounds
        .iter()
        .filter(|r| r.second.rate > 0.0)
        .map(|r| r.first.rate / r.second.rate)
        .collect();
    if ratios.is_empty() {
        return format!("**{name}: no ratio (the second side measured nothing).**");
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    let verdict = if target <= 0.0 {
        String::new()
    } else if ratios[0] >= target {
        format!("; target ≥ {target}: met in every round")
    } else {
        format!("; target ≥ {target}: not met in this run")
    };
    format!(
        "**{name}: {:.2}–{:.2}, median {median:.2} over {} rounds{verdict}.**",
        ratios[0],
        ratios[ratios.len() - 1],
        ratios.len()
    )
}
