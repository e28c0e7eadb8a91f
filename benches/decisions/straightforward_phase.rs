//! The `straightforward` phase of issue 43: the service's deny of an agent's transcript (41 messages of about 35 KB,
//! two pending calls; and 3 messages) against bench/deny_floor_straightforward.sql and, in the same rounds, the same
//! floor with its transcript kept in place (bench/deny_floor_straightforward_kept.sql, the most that not rewriting
//! the transcript can gain), the three sides rotated round by round; the CPU each side spends per decision, by who
//! spends it; and the deny's p99 at half its saturating load beside both floors' at the same offered rate.

use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use crate::alternation::{CpuPerDecision, Round, Settings, Side, deny, summary, table};
use crate::floor::{Floor, Length};
use crate::straightforward::Script;
use crate::{Bench, Error};

/// The `straightforward` phase: both transcript sizes against the floor, then the p99 at half the load the
/// 41-message deny saturated at.
pub async fn run(
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
        return Err(format!("pgbench warm-up of {} failed: {failed}", script.path()).into());
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
