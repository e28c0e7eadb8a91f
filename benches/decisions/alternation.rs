//! The phases of issues 43 and 40 that measure the service against something else in the same run, alternated round
//! by round (first the one, then the other in even rounds, the other way round in odd ones), so that whatever else
//! loads the machine meanwhile falls on both alike; each prints its ratio per round and over the rounds:
//! - `straightforward` (its own module, `straightforward_phase`, which uses the sides, rounds and tables here): the
//!   deny of an agent's transcript against bench/deny_floor_straightforward.sql;
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

use crate::load::{Kind, Stop};
use crate::seed::Shape;
use crate::{Bench, Error, Instance};

/// The phases' knobs, from the environment (bench/run.sh lists them).
pub struct Settings {
    pub(crate) clients: usize,
    pub(crate) rounds: usize,
    pub(crate) decisions: usize,
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
pub(crate) struct Side {
    pub(crate) rate: f64,
    pub(crate) p99_ms: f64,
    /// Statements per registration (the `registration` phase, where Postgres counts them).
    pub(crate) statements: Option<f64>,
    /// CPU per decision, where it was measured (the `straightforward` phase).
    pub(crate) cpu: Option<CpuPerDecision>,
}

/// Milliseconds of CPU per decision of one measurement, by who spent them: Postgres (every process of the server),
/// the service (none for a floor), and what drove the load (the harness's own clients, or pgbench).
#[derive(Clone, Copy, Default)]
pub(crate) struct CpuPerDecision {
    pub(crate) postgres_ms: f64,
    pub(crate) service_ms: f64,
    pub(crate) driver_ms: f64,
}

impl CpuPerDecision {
    pub(crate) fn of(
        cpu: &crate::service::Cpu,
        driver_ms: f64,
        decisions: u64,
    ) -> Option<CpuPerDecision> {
        let per = |ms: f64| ms / decisions as f64;
        (decisions > 0).then(|| CpuPerDecision {
            postgres_ms: per(cpu.postgres_ms),
            service_ms: per(cpu.service_ms),
            driver_ms: per(driver_ms),
        })
    }

    pub(crate) fn total_ms(&self) -> f64 {
        self.postgres_ms + self.service_ms + self.driver_ms
    }
}

/// One round of an alternation.
pub(crate) struct Round {
    pub(crate) first: Side,
    pub(crate) second: Side,
    /// Errors or shortfalls of either side, printed beside the round.
    pub(crate) note: String,
}

/// The phases of this module that BENCH_PHASES names, in order (the `straightforward` phase is
/// `straightforward_phase`'s).
pub async fn run(bench: &Bench, settings: &crate::Settings) -> Result<(), Error> {
    if settings.wants("langgraph") {
        langgraph(bench, settings).await?;
    }
    if settings.wants("base") || settings.wants("registration") {
        base(bench, settings).await?;
    }
    Ok(())
}

/// The service's deny of `members` at the phase's client count, deciding the phase's number of runs.
pub(crate) async fn deny(
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

/// Which side goes first in `round`: the service (true) in even rounds, the other in odd ones.
fn order(round: usize) -> [bool; 2] {
    if round.is_multiple_of(2) {
        [true, false]
    } else {
        [false, true]
    }
}

/// The rounds as a Markdown table, with each round's ratio first ÷ second.
pub(crate) fn table(first: &str, second: &str, rounds: &[Round]) -> String {
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
pub(crate) fn summary(name: &str, rounds: &[Round], target: f64) -> String {
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
