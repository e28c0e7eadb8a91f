//! The floors: `pgbench` at the same concurrency as the service phases, against runs cloned from one the service
//! registered, running either
//! - bench/deny_floor_naive.sql, the writes a straightforward implementation makes for one deny (the deny
//!   throughput target), on tables of the same shape in the schema `naive`, filled with a copy of the service's
//!   rows; or
//! - bench/deny_floor.sql, the service's own SQL of one deny (bench/deny_floor_previous.sql: before the outbox); or
//! - bench/approve_floor_naive.sql, the naive floor's approval of one call, on the `naive` tables.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use approval_resume::domain::results::denial_text;
use approval_resume::vocabulary::{DecidedBy, Effect};
use hdrhistogram::Histogram;
use sqlx::PgPool;
use uuid::Uuid;

use crate::executor::OK_CONTENT;
use crate::seed::OWNERS;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Where pgbench runs, and what the script's variables are.
pub struct Floor {
    pub pgbench: PathBuf,
    pub database_url: String,
    pub log_dir: PathBuf,
    pub template: Uuid,
    pub digest: String,
    pub key_hash_hex: String,
    /// The next unused `n` of floor run ids (`md5('floor' || n)`).
    pub next_n: i64,
}

/// What one pgbench run measured.
pub struct FloorOutcome {
    pub transactions: u64,
    pub tps: f64,
    /// Transaction latency in microseconds, from pgbench's per-transaction log.
    pub latency: Histogram<u64>,
    pub failed: Option<String>,
}

/// Which tables a floor script writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// The service's own (`public`).
    Service,
    /// The naive floor's copies (`naive`).
    Naive,
}

impl Floor {
    /// Makes the naive floor's tables the same as the service's at this moment: the same shape (`like … including
    /// all`, plus the foreign keys, which `like` leaves out) and the same rows (runs with their transcripts, and
    /// the audit rows), so that the naive floor writes into tables as big as the service phase just did.
    pub async fn copy_naive(pool: &PgPool) -> Result<(), Error> {
        let mut tx = pool.begin().await?;
        for statement in [
            "create schema if not exists naive",
            "create table if not exists naive.runs (like public.runs including all)",
            "create table if not exists naive.approval_events (like public.approval_events including all)",
            "create table if not exists naive.tool_events (like public.tool_events including all)",
            "alter table naive.approval_events drop constraint if exists approval_events_run_id_fkey",
            "alter table naive.tool_events drop constraint if exists tool_events_run_id_fkey",
            "truncate naive.runs, naive.approval_events, naive.tool_events",
            // Copied as the service's text (an earlier copy left it `jsonb`, below).
            "alter table naive.runs alter column messages type text",
            "insert into naive.runs select * from public.runs",
            "insert into naive.approval_events select * from public.approval_events",
            "insert into naive.tool_events select * from public.tool_events",
            // A straightforward implementation keeps the transcript as `jsonb` and appends to it there; the service
            // keeps its own JSON text since migration 0008, which must not make the naive floor cheaper.
            "alter table naive.runs alter column messages type jsonb using messages::jsonb",
            "alter table naive.approval_events add constraint approval_events_run_id_fkey
                 foreign key (run_id) references naive.runs (id) on delete cascade",
            "alter table naive.tool_events add constraint tool_events_run_id_fkey
                 foreign key (run_id) references naive.runs (id) on delete cascade",
        ] {
            sqlx::query(statement).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        sqlx::query("analyze naive.runs, naive.approval_events, naive.tool_events")
            .execute(pool)
            .await?;
        Ok(())
    }

    /// Clones the template run `count` times as waiting runs into `tables`; returns the first `n` of the new
    /// range.
    pub async fn seed(&mut self, pool: &PgPool, count: i64, tables: Tables) -> Result<i64, Error> {
        let (from, to) = (self.next_n, self.next_n + count - 1);
        self.next_n = to + 1;
        if tables == Tables::Naive {
            // The naive design keeps the calls in the transcript: there is no table of calls to seed.
            sqlx::query(
                "insert into naive.runs (id, tenant, owner_uid, status, privacy_level, require_second_approver,
                                         registration_hash, tools, messages, turn_index, turn_digest)
                 select md5('floor' || n)::uuid, t.tenant, n % $4 + 1, 'waiting_for_approval', t.privacy_level,
                        false, t.registration_hash, t.tools, t.messages::jsonb, 0, t.turn_digest
                 from public.runs t cross join generate_series($2::bigint, $3::bigint) as n where t.id = $1",
            )
            .bind(self.template)
            .bind(from)
            .bind(to)
            .bind(OWNERS)
            .execute(pool)
            .await?;
            return Ok(from);
        }
        let mut tx = pool.begin().await?;
        sqlx::query(
            "insert into runs (id, tenant, owner_uid, status, privacy_level, require_second_approver,
                               registration_hash, tools, messages, turn_index, turn_digest)
             select md5('floor' || n)::uuid, t.tenant, n % $4 + 1, 'waiting_for_approval', t.privacy_level, false,
                    t.registration_hash, t.tools, t.messages, 0, t.turn_digest
             from runs t cross join generate_series($2::bigint, $3::bigint) as n where t.id = $1",
        )
        .bind(self.template)
        .bind(from)
        .bind(to)
        .bind(OWNERS)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "insert into turn_calls (run_id, turn_index, position, call_id, tool, arguments, effect)
             select md5('floor' || n)::uuid, 0, c.position, c.call_id, c.tool, c.arguments, c.effect
             from turn_calls c cross join generate_series($2::bigint, $3::bigint) as n
             where c.run_id = $1 and c.turn_index = 0",
        )
        .bind(self.template)
        .bind(from)
        .bind(to)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(from)
    }

    /// Removes the seeded runs of a range that no transaction decided, so later phases see the same tables.
    pub async fn clean(pool: &PgPool, from: i64, count: i64, tables: Tables) -> Result<(), Error> {
        let runs = match tables {
            Tables::Service => "public.runs",
            Tables::Naive => "naive.runs",
        };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "delete from {runs} where id in (select md5('floor' || n)::uuid
                                             from generate_series($1::bigint, $2::bigint) as n)
               and status = 'waiting_for_approval'"
        )))
        .bind(from)
        .bind(from + count - 1)
        .execute(pool)
        .await?;
        Ok(())
    }

    /// Runs pgbench with `script` on `clients` connections over runs `base..`, for `length`.
    pub fn run(
        &self,
        name: &str,
        script: &Path,
        clients: usize,
        base: i64,
        length: Length,
    ) -> Result<FloorOutcome, Error> {
        let content = denial_text(
            crate::transcript::WRITE_TOOL,
            Effect::Write,
            DecidedBy::RunOwner,
            None,
        );
        let arguments =
            crate::transcript::transcript(2, 1, "r")[1]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .len();
        let payload = format!(
            "{{\"approved\":false,\"run_id\":\"{}\",\"tenant\":\"default\",\"turn_index\":0}}",
            Uuid::nil()
        );
        let variables = [
            ("base", base.to_string()),
            ("nc", clients.to_string()),
            ("i", "0".into()),
            ("keyhash", format!("\\x{}", self.key_hash_hex)),
            // A variable, not a literal: pgbench reads `:write` inside a quoted 'decisions:write' as one.
            ("scope", "decisions:write".into()),
            ("tenant", "default".into()),
            ("turn", "0".into()),
            ("digest", self.digest.clone()),
            ("client", "bench".into()),
            ("content", content.clone()),
            ("callid", "call_r_0".into()),
            ("tool", crate::transcript::WRITE_TOOL.into()),
            ("argbytes", arguments.to_string()),
            ("resbytes", content.len().to_string()),
            ("channel", "approval_resume_run_resumed".into()),
            ("payload", payload),
            ("okbytes", OK_CONTENT.len().to_string()),
            (
                "okmessage",
                serde_json::json!({"role": "tool", "tool_call_id": "call_r_0", "content": OK_CONTENT})
                    .to_string(),
            ),
            (
                "toolmessage",
                serde_json::json!({"role": "tool", "tool_call_id": "call_r_0", "content": content})
                    .to_string(),
            ),
        ];
        self.run_script(name, script, clients, length, &variables)
    }

    /// Runs pgbench with `script` on `clients` connections for `length`, giving it `variables` with -D; the
    /// per-transaction log goes under `name` in the log folder.
    pub fn run_script(
        &self,
        name: &str,
        script: &Path,
        clients: usize,
        length: Length,
        variables: &[(&str, String)],
    ) -> Result<FloorOutcome, Error> {
        let prefix = self.log_dir.join(format!("pgbench_{name}"));
        remove_logs(&prefix);
        let mut command = Command::new(&self.pgbench);
        command
            .args(["-n", "-M", "prepared", "-l"])
            .arg(format!("--log-prefix={}", prefix.display()))
            .args(["-c", &clients.to_string()])
            .args(["-j", &clients.min(2).to_string()]);
        match length {
            Length::Seconds(seconds) => command.args(["-T", &seconds.as_secs().to_string()]),
            Length::PerClient(count) => command.args(["-t", &count.to_string()]),
            // pgbench then logs each latency from the transaction's scheduled start, like the harness's open loop.
            Length::Rate(rate, seconds) => command
                .args(["-T", &seconds.as_secs().to_string()])
                .args(["-R", &format!("{rate:.0}")]),
        };
        for (name, value) in variables {
            command.arg("-D").arg(format!("{name}={value}"));
        }
        command.arg("-f").arg(script).arg(&self.database_url);
        let output = command
            .output()
            .map_err(|error| format!("cannot run {}: {error}", self.pgbench.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let number = |label: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(label))
                .and_then(|rest| {
                    rest.trim()
                        .split([' ', '/'])
                        .next()
                        .and_then(|n| n.parse::<f64>().ok())
                })
        };
        let transactions =
            number("number of transactions actually processed:").unwrap_or(0.0) as u64;
        let tps = number("tps =").unwrap_or(0.0);
        let failed = if output.status.success() && transactions > 0 {
            None
        } else {
            let reason: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.trim().is_empty())
                .take(3)
                .collect();
            Some(format!(
                "pgbench exit {}: {}",
                output.status,
                reason.join(" | ")
            ))
        };
        Ok(FloorOutcome {
            transactions,
            tps,
            latency: read_logs(&prefix)?,
            failed,
        })
    }
}

/// How long a pgbench run lasts.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    Seconds(Duration),
    PerClient(usize),
    /// Poisson arrivals at this mean rate per second, for this long.
    Rate(f64, Duration),
}

fn log_files(prefix: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(stem)) = (prefix.parent(), prefix.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let stem = format!("{stem}.");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&stem))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn remove_logs(prefix: &Path) {
    for path in log_files(prefix) {
        let _ = std::fs::remove_file(path);
    }
}

/// Reads pgbench's per-transaction logs: `client_id transaction_no time_us script_no epoch epoch_us`.
fn read_logs(prefix: &Path) -> Result<Histogram<u64>, Error> {
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for path in log_files(prefix) {
        for line in std::fs::read_to_string(&path)?.lines() {
            if let Some(micros) = line
                .split_whitespace()
                .nth(2)
                .and_then(|t| t.parse::<u64>().ok())
            {
                latency.saturating_record(micros.max(1));
            }
        }
        let _ = std::fs::remove_file(path);
    }
    Ok(latency)
}

/// `pgbench` from PATH, or from the Postgres installation's bin directory.
pub fn find_pgbench() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("PGBENCH") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("pgbench"))
            .find(|path| path.is_file())
    });
    on_path.or_else(|| {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|entry| entry.path().join("bin/pgbench"))
            .filter(|path| path.is_file())
            .collect();
        found.sort();
        found.pop()
    })
}
