//! The figures of one phase, and the Markdown tables the harness prints (pasted as-is into BENCHMARKS.md).

use hdrhistogram::Histogram;

use crate::floor::FloorOutcome;
use crate::load::Outcome;
use crate::service::Cpu;

/// One measured phase of the service.
pub struct Phase {
    pub clients: usize,
    pub outcome: Outcome,
    pub cpu: Cpu,
    /// Peak RSS of the service during the phase (VmHWM after a reset), KiB.
    pub peak_rss_kib: u64,
}

/// One pgbench run of the floor.
pub struct FloorPhase {
    /// `current`: bench/deny_floor.sql; `previous`: bench/deny_floor_previous.sql (the service's SQL before the merge).
    pub script: &'static str,
    pub clients: usize,
    pub outcome: FloorOutcome,
    pub cpu: Cpu,
    pub seconds: f64,
}

fn ms(histogram: &Histogram<u64>, quantile: f64) -> String {
    if histogram.is_empty() {
        return "–".into();
    }
    format!(
        "{:.2}",
        histogram.value_at_quantile(quantile) as f64 / 1000.0
    )
}

fn per(total_ms: f64, count: u64) -> String {
    if count == 0 {
        return "–".into();
    }
    format!("{:.3}", total_ms / count as f64)
}

fn errors(outcome: &Outcome) -> String {
    if outcome.errors.is_empty() {
        return "0".into();
    }
    outcome
        .errors
        .iter()
        .map(|(kind, count)| format!("{count}× {kind}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// Share of the machine's CPU time (all cores) the three parties used while the phase ran.
fn busy(cpu: &Cpu, seconds: f64, cores: f64) -> String {
    let used = cpu.service_ms + cpu.postgres_ms + cpu.harness_ms + cpu.children_ms;
    format!("{:.0}%", used / (seconds * 1000.0 * cores) * 100.0)
}

/// The headline: deny decisions of the service against the floors at each concurrency, each pgbench at the same
/// number of connections as clients: the naive floor (the target), the service's own SQL, and (where that differs)
/// the service's own SQL at its own connection count.
pub fn deny_vs_floor(service: &[Phase], floor: &[FloorPhase], pool: usize) -> String {
    let mut out = String::from(
        "| clients | service decisions/s | p50 ms | p99 ms | p99.9 ms | errors | naive floor tx/s | naive p50 ms | naive p99 ms | **ratio to naive** | own-SQL floor tx/s | ratio | own-SQL floor tx/s, min(clients, pool) connections | ratio | previous SQL (14 round trips) tx/s, min(clients, pool) |\n\
         |---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for phase in service {
        let rate = phase.outcome.rate();
        let ratio = |f: Option<&FloorPhase>| {
            f.map(|f| format!("**{:.2}**", rate / f.outcome.tps))
                .unwrap_or_else(|| "–".into())
        };
        let tps = |f: Option<&FloorPhase>| {
            f.map(|f| format!("{:.0}", f.outcome.tps))
                .unwrap_or_else(|| "–".into())
        };
        let naive = find(floor, phase.clients, "naive");
        let same = find(floor, phase.clients, "current");
        let pooled = find(floor, phase.clients.min(pool), "current");
        let previous = find(floor, phase.clients.min(pool), "previous");
        let (naive_p50, naive_p99) = naive
            .map(|f| (ms(&f.outcome.latency, 0.5), ms(&f.outcome.latency, 0.99)))
            .unwrap_or_else(|| ("–".into(), "–".into()));
        let exhausted = if phase.outcome.exhausted {
            " (ran out of seeded runs)"
        } else {
            ""
        };
        out.push_str(&format!(
            "| {} | {rate:.0}{exhausted} | {} | {} | {} | {} | {} | {naive_p50} | {naive_p99} | {} | {} | {} | {} | {} | {} |\n",
            phase.clients,
            ms(&phase.outcome.latency, 0.5),
            ms(&phase.outcome.latency, 0.99),
            ms(&phase.outcome.latency, 0.999),
            errors(&phase.outcome),
            tps(naive),
            ratio(naive),
            tps(same),
            ratio(same),
            tps(pooled),
            ratio(pooled),
            tps(previous),
        ));
    }
    let failed: Vec<String> = floor
        .iter()
        .filter_map(|f| {
            f.outcome
                .failed
                .as_ref()
                .map(|why| format!("- pgbench {} at {}: {why}\n", f.script, f.clients))
        })
        .collect();
    out.push_str(&failed.concat());
    out
}

/// The floor run of `script` at `clients` connections that completed, if any.
fn find<'a>(floor: &'a [FloorPhase], clients: usize, script: &str) -> Option<&'a FloorPhase> {
    floor
        .iter()
        .find(|f| f.clients == clients && f.script == script && f.outcome.failed.is_none())
}

/// The deny throughput target in one line: deny throughput at `clients` and its ratio to the naive floor.
pub fn headline(service: &[Phase], floor: &[FloorPhase], clients: usize) -> Option<String> {
    let phase = service.iter().find(|p| p.clients == clients)?;
    let naive = find(floor, clients, "naive")?;
    let rate = phase.outcome.rate();
    Some(format!(
        "**Deny at {clients} clients: {rate:.0} decisions/s; naive floor (pgbench -M prepared, {clients} \
         connections) {:.0} tx/s; ratio {:.2} (target >= 1.0).**",
        naive.outcome.tps,
        rate / naive.outcome.tps
    ))
}

/// Where the CPU went, per decision (service phases) or per transaction (floor), and the service's memory.
pub fn resources(service: &[Phase], floor: &[FloorPhase], cores: f64) -> String {
    let mut out = String::from(
        "| run | clients | decisions | seconds | service CPU ms/op | Postgres CPU ms/op | driver CPU ms/op | machine busy | DB round trips/op | service peak RSS MiB |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for phase in service {
        let seconds = phase.outcome.elapsed.as_secs_f64();
        out.push_str(&format!(
            "| service | {} | {} | {seconds:.1} | {} | {} | {} | {} | {:.1} | {} |\n",
            phase.clients,
            phase.outcome.ok,
            per(phase.cpu.service_ms, phase.outcome.ok),
            per(phase.cpu.postgres_ms, phase.outcome.ok),
            per(phase.cpu.harness_ms, phase.outcome.ok),
            busy(&phase.cpu, seconds, cores),
            phase.cpu.service_db_sends / phase.outcome.ok.max(1) as f64,
            mib(phase.peak_rss_kib),
        ));
    }
    for phase in floor {
        out.push_str(&format!(
            "| pgbench {} | {} | {} | {:.1} | – | {} | {} | {} | – | – |\n",
            phase.script,
            phase.clients,
            phase.outcome.transactions,
            phase.seconds,
            per(phase.cpu.postgres_ms, phase.outcome.transactions),
            per(phase.cpu.children_ms, phase.outcome.transactions),
            busy(&phase.cpu, phase.seconds, cores),
        ));
    }
    out
}

/// Approve phases, or any plain list of service phases.
pub fn plain(label: &str, phases: &[Phase]) -> String {
    let mut out = format!(
        "| {label} | decisions/s | p50 ms | p99 ms | p99.9 ms | errors | service CPU ms/op | Postgres CPU ms/op | DB round trips/op | service peak RSS MiB |\n\
         |---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n"
    );
    for phase in phases {
        let exhausted = if phase.outcome.exhausted {
            " (ran out of seeded runs)"
        } else {
            ""
        };
        out.push_str(&format!(
            "| {} | {:.0}{exhausted} | {} | {} | {} | {} | {} | {} | {:.1} | {} |\n",
            phase.clients,
            phase.outcome.rate(),
            ms(&phase.outcome.latency, 0.5),
            ms(&phase.outcome.latency, 0.99),
            ms(&phase.outcome.latency, 0.999),
            errors(&phase.outcome),
            per(phase.cpu.service_ms, phase.outcome.ok),
            per(phase.cpu.postgres_ms, phase.outcome.ok),
            phase.cpu.service_db_sends / phase.outcome.ok.max(1) as f64,
            mib(phase.peak_rss_kib),
        ));
    }
    out
}

/// Approvals against denies at each concurrency (the target: at least 0.8), beside the same ratio of the naive floors
/// (bench/approve_floor_naive.sql ÷ bench/deny_floor_naive.sql, from `naive_floors`, run back to back): the ratio of
/// the two paths when nothing but Postgres does the writes docs/design.md §5 requires, with the Postgres CPU each floor
/// spent per decision.
pub fn approve_vs_deny(approve: &[Phase], deny: &[Phase], naive_floors: &[FloorPhase]) -> String {
    let mut out = String::from(
        "| clients | approvals/s | denies/s | **approvals ÷ denies** | naive approval floor /s | naive deny floor tx/s | **floors' ratio** | Postgres CPU ms per naive approval | per naive deny |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let ratio = |a: f64, b: f64| {
        if a > 0.0 && b > 0.0 {
            format!("{:.2}", a / b)
        } else {
            "–".into()
        }
    };
    for approved in approve {
        let clients = approved.clients;
        let denied = deny.iter().find(|p| p.clients == clients);
        let naive = |script: &str| {
            naive_floors
                .iter()
                .find(|f| f.clients == clients && f.script == script)
                .map_or((0.0, "–".into()), |f| {
                    (
                        f.outcome.tps,
                        per(f.cpu.postgres_ms, f.outcome.transactions),
                    )
                })
        };
        let (approve_floor, approve_cpu) = naive("naive-approve");
        let (deny_floor, deny_cpu) = naive("naive");
        let deny_rate = denied.map_or(0.0, |p| p.outcome.rate());
        out.push_str(&format!(
            "| {clients} | {:.0} | {deny_rate:.0} | {} | {approve_floor:.0} | {deny_floor:.0} | {} | {approve_cpu} | {deny_cpu} |\n",
            approved.outcome.rate(),
            ratio(approved.outcome.rate(), deny_rate),
            ratio(approve_floor, deny_floor),
        ));
    }
    out
}

/// The open-loop phase: Poisson arrivals, latency from each request's scheduled start; the service, then pgbench
/// at the same rate with the service's connection count.
pub fn open_loop(target_rate: f64, saturating: f64, phase: &Phase, floor: &[FloorPhase]) -> String {
    let mut out = format!(
        "Mean arrival rate {target_rate:.0}/s, {:.0}% of the highest closed-loop deny throughput ({saturating:.0}/s).\n\n\
         | run | connections | achieved /s | p50 ms | p99 ms | p99.9 ms | max ms | errors |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n\
         | service | {} clients | {:.0} | {} | {} | {} | {} | {} |\n",
        target_rate / saturating * 100.0,
        phase.clients,
        phase.outcome.rate(),
        ms(&phase.outcome.latency, 0.5),
        ms(&phase.outcome.latency, 0.99),
        ms(&phase.outcome.latency, 0.999),
        ms(&phase.outcome.latency, 1.0),
        errors(&phase.outcome),
    );
    for f in floor {
        out.push_str(&format!(
            "| pgbench {} | {} | {:.0} | {} | {} | {} | {} | {} |\n",
            f.script,
            f.clients,
            f.outcome.tps,
            ms(&f.outcome.latency, 0.5),
            ms(&f.outcome.latency, 0.99),
            ms(&f.outcome.latency, 0.999),
            ms(&f.outcome.latency, 1.0),
            f.outcome.failed.as_deref().unwrap_or("0"),
        ));
    }
    out
}

/// One scaling point: a run shape and what deciding it cost.
pub struct ScalePoint {
    pub messages: usize,
    pub calls: usize,
    pub phase: Phase,
}

pub fn scaling(points: &[ScalePoint]) -> String {
    let mut out = String::from(
        "| messages | calls | decisions | decisions/s | p50 ms | p99 ms | answer KiB | service CPU ms/op | Postgres CPU ms/op | service peak RSS MiB | errors |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for point in points {
        let phase = &point.phase;
        let answer_kib = if phase.outcome.ok == 0 {
            0.0
        } else {
            phase.outcome.response_bytes as f64 / phase.outcome.ok as f64 / 1024.0
        };
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {answer_kib:.1} | {} | {} | {} | {} |\n",
            point.messages,
            point.calls,
            phase.outcome.ok,
            phase.outcome.rate(),
            ms(&phase.outcome.latency, 0.5),
            ms(&phase.outcome.latency, 0.99),
            per(phase.cpu.service_ms, phase.outcome.ok),
            per(phase.cpu.postgres_ms, phase.outcome.ok),
            mib(phase.peak_rss_kib),
            errors(&phase.outcome),
        ));
    }
    out
}

/// The rounds of one format of the `native` phase at one client count.
pub struct NativeRow {
    pub clients: usize,
    pub format: &'static str,
    /// Length of the registration's members (the body but `id`, `owner_uid`, `tools`).
    pub body_bytes: usize,
    pub phases: Vec<Phase>,
}

/// The pooled figures of a row: decisions/s over all its rounds, latency of all of them, CPU per decision.
struct Pooled {
    rate: f64,
    latency: Histogram<u64>,
    service_ms: f64,
    postgres_ms: f64,
    answer_bytes: f64,
    errors: u64,
    /// Each round's decisions/s and, in brackets, its p99 in ms: how much of a difference is the machine's noise.
    rounds: Vec<String>,
}

fn pooled(row: &NativeRow) -> Pooled {
    let mut latency = Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let (mut ok, mut seconds, mut service_ms, mut postgres_ms, mut bytes, mut errors) =
        (0, 0.0, 0.0, 0.0, 0, 0);
    for phase in &row.phases {
        latency.add(&phase.outcome.latency).expect("same bounds");
        ok += phase.outcome.ok;
        seconds += phase.outcome.elapsed.as_secs_f64();
        service_ms += phase.cpu.service_ms;
        postgres_ms += phase.cpu.postgres_ms;
        bytes += phase.outcome.response_bytes;
        errors += phase.outcome.error_count();
    }
    let n = ok.max(1) as f64;
    Pooled {
        rate: ok as f64 / seconds.max(f64::EPSILON),
        latency,
        service_ms: service_ms / n,
        postgres_ms: postgres_ms / n,
        answer_bytes: bytes as f64 / n,
        errors,
        rounds: row
            .phases
            .iter()
            .map(|p| format!("{:.0} ({})", p.outcome.rate(), ms(&p.outcome.latency, 0.99)))
            .collect(),
    }
}

/// Native formats: deny throughput and p99 of the Anthropic run beside the OpenAI chat run of the same size, with their
/// ratios (Anthropic ÷ chat for throughput, chat ÷ Anthropic for p99: at least 0.95 both means the native path
/// costs no more than 5 % over the chat path).
pub fn native_vs_chat(rows: &[NativeRow]) -> String {
    let mut out = String::from(
        "| clients | run | registered bytes | rounds | decisions/s (pooled) | per round: decisions/s (p99 ms) | p50 ms | p99 ms | errors | service CPU ms/op | Postgres CPU ms/op | answer KB | **throughput ratio** | **p99 ratio** |\n\
         |---:|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let this = pooled(row);
        let chat = rows
            .iter()
            .find(|r| r.clients == row.clients && r.format == "openai-chat")
            .map(pooled);
        let (ratio, p99_ratio) = match (&chat, row.format) {
            (Some(chat), "anthropic") if !this.latency.is_empty() && !chat.latency.is_empty() => (
                format!("**{:.2}**", this.rate / chat.rate),
                format!(
                    "**{:.2}**",
                    chat.latency.value_at_quantile(0.99) as f64
                        / this.latency.value_at_quantile(0.99) as f64
                ),
            ),
            _ => ("–".into(), "–".into()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {:.3} | {:.3} | {:.1} | {ratio} | {p99_ratio} |\n",
            row.clients,
            row.format,
            row.body_bytes,
            row.phases.len(),
            this.rate,
            this.rounds.join(", "),
            ms(&this.latency, 0.5),
            ms(&this.latency, 0.99),
            this.errors,
            this.service_ms,
            this.postgres_ms,
            this.answer_bytes / 1024.0,
        ));
    }
    out
}
