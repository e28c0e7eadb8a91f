//! The `wal` mode of issue 53: what one deny of the 3-message transcript and one registration write, for the service
//! and for the straightforward floor (bench/deny_floor_straightforward.sql, bench/register_floor_straightforward.sql),
//! counted rather than timed, so that the figures hold on a busy machine: WAL bytes and records by type
//! (`pg_waldump --stats=record` between two LSNs, after a checkpoint), rows inserted and updated (HOT or not) from
//! `pg_stat_user_tables`, transactions committed (read-only ones too) from `pg_stat_database`.
//!
//! `bash bench/wal_per_deny.sh` runs it on a cluster of its own, so that no other database's activity is in the WAL.
//! Each side decides (or registers) BENCH_WAL_COUNT runs one at a time, on one connection; the service and the floor
//! alternate, BENCH_WAL_ROUNDS rounds, and each figure is the median of the rounds.
//!
//! The statistics views are fed by each backend when it goes idle, at most once a second, else up to 10 s later
//! (PostgreSQL 15's PGSTAT_IDLE_INTERVAL). So every window opens 11 s after its checkpoint, when what came before has
//! been counted, and closes after the backends that did the work have exited: the service is stopped (a backend
//! reports what it still holds when it exits), pgbench has exited. The WAL's end is read before the service stops, so
//! its shutdown is not in the WAL figures; the service's background loops that ran during the window are (a few
//! read-only transactions a second, which the idle row shows).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

use crate::floor::{Floor, Length};
use crate::load::{Driver, Kind, Stop};
use crate::seed::{Api, Target};
use crate::service::{Launch, Service};
use crate::straightforward::Script;
use crate::{Error, Settings};

/// What the `wal` mode needs besides the harness's settings, from the environment.
struct WalSettings {
    /// The cluster's pg_wal directory (BENCH_WAL_DIR; bench/wal_per_deny.sh sets it).
    wal_dir: PathBuf,
    /// pg_waldump (PG_WALDUMP) [/usr/lib/postgresql/15/bin/pg_waldump].
    waldump: PathBuf,
    /// Decisions (and registrations) per window (BENCH_WAL_COUNT) [400].
    count: usize,
    /// Alternations (BENCH_WAL_ROUNDS) [3].
    rounds: usize,
}

impl WalSettings {
    fn from_env() -> Result<WalSettings, Error> {
        let wal_dir = std::env::var_os("BENCH_WAL_DIR")
            .map(PathBuf::from)
            .ok_or("BENCH_WAL_DIR is not set: run `bash bench/wal_per_deny.sh`")?;
        let number = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Ok(WalSettings {
            wal_dir,
            waldump: std::env::var_os("PG_WALDUMP")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin/pg_waldump")),
            count: number("BENCH_WAL_COUNT", 400),
            rounds: number("BENCH_WAL_ROUNDS", 3),
        })
    }
}

/// The four measured sides.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Side {
    ServiceDeny,
    FloorDeny,
    ServiceRegister,
    FloorRegister,
    ServiceIdle,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::ServiceDeny => "service deny",
            Side::FloorDeny => "floor deny",
            Side::ServiceRegister => "service registration",
            Side::FloorRegister => "floor registration",
            Side::ServiceIdle => "service idle",
        }
    }
}

/// The counters read at one moment.
#[derive(Clone, Debug)]
struct Snapshot {
    lsn: String,
    commits: i64,
    inserted: i64,
    updated: i64,
    hot: i64,
    deleted: i64,
}

/// What one window counted, in total.
#[derive(Clone, Debug, Default)]
struct Window {
    operations: usize,
    wal_bytes: f64,
    records: f64,
    fpi_bytes: f64,
    /// By record type (`Heap/INSERT`): (records, combined bytes).
    by_type: BTreeMap<String, (f64, f64)>,
    inserted: f64,
    updated: f64,
    hot: f64,
    deleted: f64,
    commits: f64,
}

impl Window {
    fn per_op(&self, value: f64) -> f64 {
        value / self.operations.max(1) as f64
    }

    fn records_of(&self, kinds: &[&str]) -> f64 {
        kinds
            .iter()
            .map(|kind| self.by_type.get(*kind).map_or(0.0, |(n, _)| *n))
            .sum()
    }
}

/// The `wal` mode: every side, alternated, then the table.
pub async fn run(settings: &Settings) -> Result<(), Error> {
    let wal = WalSettings::from_env()?;
    std::fs::create_dir_all(&settings.target.out_dir)?;
    let database_url =
        crate::service::fresh_database(&settings.target.server_url, &settings.database).await?;
    let key = crate::service::add_client(
        &settings.target.binary,
        &database_url,
        &format!("bench-{}", uuid::Uuid::new_v4().simple()),
        &["runs:write", "runs:read", "users:write", "decisions:write"],
    )?;
    let executor_port = crate::executor::start().await?;
    let tools_config = settings.target.out_dir.join("tools.toml");
    crate::executor::write_config(&tools_config, executor_port)?;
    let launch = Launch {
        binary: &settings.target.binary,
        database_url: &database_url,
        pool_size: settings.pool_size,
        tools_config: Some(&tools_config),
        log_file: settings.target.out_dir.join("service-wal.log"),
    };
    {
        let service = Service::start(&launch).await?;
        Api::new(&service.base_url, &key).put_users().await?;
        service.stop();
    }
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&database_url)
        .await?;
    crate::straightforward::create(&pool).await?;
    // A what-if on the service's schema as migrated (BENCH_WAL_SETUP_SQL, e.g. a fill factor or a dropped key),
    // measured without writing a migration; the report says so.
    let setup = std::env::var("BENCH_WAL_SETUP_SQL").unwrap_or_default();
    if !setup.trim().is_empty() {
        sqlx::raw_sql(sqlx::AssertSqlSafe(setup.clone()))
            .execute(&pool)
            .await?;
    }
    pool.close().await;

    let (messages, bytes) = crate::agent::SIZES[1];
    let transcript = crate::agent::messages(messages, bytes);
    let text = crate::agent::json(&transcript);
    let members = format!("\"messages\":{text}");
    let mut floor = Floor {
        pgbench: crate::floor::find_pgbench().ok_or("pgbench not found: set PGBENCH")?,
        database_url: database_url.clone(),
        log_dir: settings.target.out_dir.clone(),
        // Read by the other floors' scripts only.
        template: uuid::Uuid::nil(),
        digest: String::new(),
        key_hash_hex: String::new(),
        next_n: 1,
    };
    let context = Context {
        launch: &launch,
        key: &key,
        database_url: &database_url,
        wal: &wal,
        members: &members,
        transcript: &transcript,
        text: &text,
    };
    let mut windows: BTreeMap<Side, Vec<Window>> = BTreeMap::new();
    let mut register_n = 1;
    for round in 0..wal.rounds {
        // Service first in even rounds, the floor first in odd ones, so that a drift falls on both alike.
        let order = if round % 2 == 0 {
            [
                Side::ServiceDeny,
                Side::FloorDeny,
                Side::ServiceRegister,
                Side::FloorRegister,
            ]
        } else {
            [
                Side::FloorDeny,
                Side::ServiceDeny,
                Side::FloorRegister,
                Side::ServiceRegister,
            ]
        };
        for side in order {
            let window = match side {
                Side::ServiceDeny => context.service_deny().await?,
                Side::ServiceRegister => context.service_register().await?,
                Side::FloorDeny => context.floor_deny(&mut floor).await?,
                Side::FloorRegister => {
                    let window = context.floor_register(&floor, register_n).await?;
                    register_n += wal.count as i64;
                    window
                }
                Side::ServiceIdle => unreachable!("measured after the rounds"),
            };
            eprintln!(
                "wal round {round} {}: {:.0} WAL bytes, {:.1} records, {:.2} transactions per operation",
                side.name(),
                window.per_op(window.wal_bytes),
                window.per_op(window.records),
                window.per_op(window.commits)
            );
            windows.entry(side).or_default().push(window);
        }
    }
    windows
        .entry(Side::ServiceIdle)
        .or_default()
        .push(context.service_idle().await?);
    // What a window counts with nothing in it (the harness's own connections and snapshots), taken off every window.
    let empty = {
        let before = context.open().await?;
        context.close(before, 1, None).await?
    };
    for window in windows.values_mut().flatten() {
        window.commits -= empty.commits;
    }
    eprintln!(
        "wal: an empty window counts {:.0} transactions",
        empty.commits
    );
    if !setup.trim().is_empty() {
        println!(
            "**What-if:** the service's schema was changed before measuring, with BENCH_WAL_SETUP_SQL: `{}`\n",
            setup.trim()
        );
    }
    println!("{}", report(&wal, &windows));
    Ok(())
}

struct Context<'a> {
    launch: &'a Launch<'a>,
    key: &'a str,
    database_url: &'a str,
    wal: &'a WalSettings,
    members: &'a str,
    transcript: &'a [Value],
    text: &'a str,
}

impl Context<'_> {
    /// `count` denies, one at a time, by a service started after the runs were registered (by another instance, now
    /// stopped, so that the registrations are counted before the window opens).
    async fn service_deny(&self) -> Result<Window, Error> {
        let targets = {
            let service = Service::start(self.launch).await?;
            let api = Api::new(&service.base_url, self.key);
            let targets = api
                .register_members(self.wal.count, self.members, 4)
                .await?;
            service.stop();
            targets
        };
        let service = Service::start(self.launch).await?;
        let driver = Driver {
            base_url: service.base_url.as_str().into(),
            key: self.key.into(),
            kind: Kind::Deny,
            answered: Default::default(),
        };
        let before = self.open().await?;
        let outcome = driver
            .closed_loop(
                &crate::load::clients(1),
                Arc::new(targets),
                Stop::Count(self.wal.count),
            )
            .await;
        self.close(before, outcome.ok as usize, Some(service)).await
    }

    /// `count` registrations of the 3-message transcript, one at a time.
    async fn service_register(&self) -> Result<Window, Error> {
        let service = Service::start(self.launch).await?;
        let api = Api::new(&service.base_url, self.key);
        let before = self.open().await?;
        let made: Vec<Target> = api
            .register_members(self.wal.count, self.members, 1)
            .await?;
        self.close(before, made.len(), Some(service)).await
    }

    /// The service started and left alone for as long as a window of denies takes: what its background loops add.
    async fn service_idle(&self) -> Result<Window, Error> {
        let service = Service::start(self.launch).await?;
        let before = self.open().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Per second, as the row says: 2 s.
        let mut window = self.close(before, 2, Some(service)).await?;
        window.operations = 2;
        Ok(window)
    }

    /// bench/deny_floor_straightforward.sql through pgbench, `count` transactions on one connection.
    async fn floor_deny(&self, floor: &mut Floor) -> Result<Window, Error> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(self.database_url)
            .await?;
        let base =
            crate::straightforward::seed(floor, &pool, self.wal.count as i64, self.text).await?;
        pool.close().await;
        let before = self.open().await?;
        let outcome = crate::straightforward::run(
            floor,
            Script::Rewritten,
            "wal_deny",
            self.transcript,
            1,
            base,
            Length::PerClient(self.wal.count),
        )?;
        if let Some(failed) = outcome.failed {
            return Err(format!("pgbench of the floor's deny failed: {failed}").into());
        }
        self.close(before, outcome.transactions as usize, None)
            .await
    }

    /// bench/register_floor_straightforward.sql through pgbench, `count` transactions on one connection, its runs'
    /// ids from `base` on.
    async fn floor_register(&self, floor: &Floor, base: i64) -> Result<Window, Error> {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/register_floor_straightforward.sql");
        let before = self.open().await?;
        let outcome = floor.run_script(
            "wal_register",
            &script,
            1,
            Length::PerClient(self.wal.count),
            &[
                ("base", base.to_string()),
                ("i", "0".into()),
                ("tenant", "default".into()),
                ("messages", self.text.to_owned()),
            ],
        )?;
        if let Some(failed) = outcome.failed {
            return Err(format!("pgbench of the floor's registration failed: {failed}").into());
        }
        self.close(before, outcome.transactions as usize, None)
            .await
    }

    /// A checkpoint (so that the window pays its own full-page images, as a busy server's would), 11 s for every
    /// count of what came before to reach the statistics, and the counters.
    async fn open(&self) -> Result<Snapshot, Error> {
        let mut connection = self.connect().await?;
        sqlx::query("checkpoint").execute(&mut connection).await?;
        connection.close().await?;
        tokio::time::sleep(Duration::from_secs(11)).await;
        self.snapshot().await
    }

    /// The WAL's end now; the service stopped (its backends report as they exit); then the counters, and the WAL
    /// between the two LSNs.
    async fn close(
        &self,
        before: Snapshot,
        operations: usize,
        service: Option<Service>,
    ) -> Result<Window, Error> {
        let end = self.snapshot().await?;
        if let Some(service) = service {
            service.stop();
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let after = self.snapshot().await?;
        let mut connection = self.connect().await?;
        let wal_bytes: f64 =
            sqlx::query_scalar("select pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8")
                .bind(&end.lsn)
                .bind(&before.lsn)
                .fetch_one(&mut connection)
                .await?;
        connection.close().await?;
        let by_type = waldump(self.wal, &before.lsn, &end.lsn)?;
        let total = by_type.get("Total").copied().unwrap_or_default();
        let fpi_bytes = by_type.get("FPI bytes").map_or(0.0, |(_, bytes)| *bytes);
        Ok(Window {
            operations,
            wal_bytes,
            records: total.0,
            fpi_bytes,
            by_type,
            inserted: (after.inserted - before.inserted) as f64,
            updated: (after.updated - before.updated) as f64,
            hot: (after.hot - before.hot) as f64,
            deleted: (after.deleted - before.deleted) as f64,
            // With the harness's own transactions (the snapshots'), which `run` takes off as an empty window counts them.
            commits: (after.commits - before.commits) as f64,
        })
    }

    async fn connect(&self) -> Result<PgConnection, Error> {
        Ok(PgConnectOptions::from_str(self.database_url)?
            .connect()
            .await?)
    }

    /// The counters in one statement, on a connection closed right after (so that its own transaction is reported).
    async fn snapshot(&self) -> Result<Snapshot, Error> {
        let mut connection = self.connect().await?;
        let row: (String, i64, i64, i64, i64, i64) = sqlx::query_as(
            "select pg_current_wal_insert_lsn()::text,
                    (select xact_commit from pg_stat_database where datname = current_database()),
                    coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint,
                    coalesce(sum(n_tup_hot_upd), 0)::bigint, coalesce(sum(n_tup_del), 0)::bigint
             from pg_stat_user_tables",
        )
        .fetch_one(&mut connection)
        .await?;
        connection.close().await?;
        Ok(Snapshot {
            lsn: row.0,
            commits: row.1,
            inserted: row.2,
            updated: row.3,
            hot: row.4,
            deleted: row.5,
        })
    }
}

/// `pg_waldump --stats=record` from `start` to `end`: records and combined bytes by type, with `Total` and the
/// full-page images' bytes (`FPI bytes`).
fn waldump(
    wal: &WalSettings,
    start: &str,
    end: &str,
) -> Result<BTreeMap<String, (f64, f64)>, Error> {
    let output = Command::new(&wal.waldump)
        .arg("-p")
        .arg(&wal.wal_dir)
        .args(["-s", start, "-e", end, "--stats=record"])
        .output()
        .map_err(|error| format!("cannot run {}: {error}", wal.waldump.display()))?;
    // A window in which nothing was written (the idle service, on a quiet cluster) has no record to find.
    if !output.status.success()
        && String::from_utf8_lossy(&output.stderr).contains("could not find a valid record")
    {
        return Ok(BTreeMap::new());
    }
    if !output.status.success() {
        return Err(format!(
            "pg_waldump failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let mut out = BTreeMap::new();
    let mut fpi = 0.0;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // "Heap/INSERT   12 ( 3.10)   1234 ( 2.00)   0 ( 0.00)   1234 ( 1.50)": the percentages in brackets go.
        let mut numbers = Vec::new();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let mut in_brackets = false;
        for word in words {
            if word.starts_with('(') {
                in_brackets = !word.ends_with(')');
                continue;
            }
            if in_brackets {
                in_brackets = !word.ends_with(')');
                continue;
            }
            if let Ok(n) = word.parse::<f64>() {
                numbers.push(n);
            }
        }
        if numbers.len() == 4 && (name.contains('/') || name == "Total") {
            out.insert(name.to_owned(), (numbers[0], numbers[3]));
            if name != "Total" {
                fpi += numbers[2];
            }
        }
    }
    out.insert("FPI bytes".to_owned(), (0.0, fpi));
    Ok(out)
}

/// The median of the rounds of `value` per operation of `side`.
fn median(
    windows: &BTreeMap<Side, Vec<Window>>,
    side: Side,
    value: impl Fn(&Window) -> f64,
) -> f64 {
    let mut values: Vec<f64> = windows
        .get(&side)
        .map(|ws| ws.iter().map(|w| w.per_op(value(w))).collect())
        .unwrap_or_default();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn report(wal: &WalSettings, windows: &BTreeMap<Side, Vec<Window>>) -> String {
    type Figure = (&'static str, Box<dyn Fn(&Window) -> f64>);
    let figures: Vec<Figure> = vec![
        ("WAL bytes (LSN distance)", Box::new(|w| w.wal_bytes)),
        ("of which full-page images", Box::new(|w| w.fpi_bytes)),
        (
            "WAL bytes of the records alone (no page images)",
            Box::new(|w| w.by_type.get("Total").map_or(0.0, |(_, bytes)| *bytes) - w.fpi_bytes),
        ),
        ("WAL records", Box::new(|w| w.records)),
        (
            "rows inserted (pg_stat_user_tables)",
            Box::new(|w| w.inserted),
        ),
        ("rows updated, not HOT", Box::new(|w| w.updated - w.hot)),
        ("rows updated, HOT", Box::new(|w| w.hot)),
        ("rows deleted", Box::new(|w| w.deleted)),
        (
            "Heap/INSERT + Heap2/MULTI_INSERT records",
            Box::new(|w| {
                w.records_of(&[
                    "Heap/INSERT",
                    "Heap/INSERT+INIT",
                    "Heap2/MULTI_INSERT",
                    "Heap2/MULTI_INSERT+INIT",
                ])
            }),
        ),
        (
            "Heap/UPDATE records (not HOT)",
            Box::new(|w| w.records_of(&["Heap/UPDATE", "Heap/UPDATE+INIT"])),
        ),
        (
            "Heap/HOT_UPDATE records",
            Box::new(|w| w.records_of(&["Heap/HOT_UPDATE", "Heap/HOT_UPDATE+INIT"])),
        ),
        (
            "row-lock records (Heap/LOCK)",
            Box::new(|w| w.records_of(&["Heap/LOCK"])),
        ),
        (
            "B-tree leaf inserts (Btree/INSERT_LEAF)",
            Box::new(|w| w.records_of(&["Btree/INSERT_LEAF"])),
        ),
        (
            "B-tree page splits",
            Box::new(|w| w.records_of(&["Btree/SPLIT_L", "Btree/SPLIT_R", "Btree/INSERT_UPPER"])),
        ),
        (
            "pruning records (Heap2/PRUNE)",
            Box::new(|w| w.records_of(&["Heap2/PRUNE"])),
        ),
        (
            "commit records (Transaction/COMMIT: transactions that wrote)",
            Box::new(|w| w.records_of(&["Transaction/COMMIT"])),
        ),
        (
            "transactions committed, read-only too (pg_stat_database)",
            Box::new(|w| w.commits),
        ),
    ];
    let rounds = wal.rounds;
    let mut out = format!(
        "## What one deny and one registration write (issue 53)\n\n\
         {} operations a window, one at a time on one connection, after a checkpoint; the service alternated with the \
         straightforward floor, {rounds} rounds; each figure is per operation, the median of the rounds. WAL from \
         `pg_waldump --stats=record` between the window's two LSNs, rows from `pg_stat_user_tables`, transactions \
         from `pg_stat_database`, on a cluster of the benchmark's own.\n\n",
        wal.count
    );
    for (title, service, floor) in [
        (
            "Per deny, 3-message transcript",
            Side::ServiceDeny,
            Side::FloorDeny,
        ),
        (
            "Per registration, 3-message transcript",
            Side::ServiceRegister,
            Side::FloorRegister,
        ),
    ] {
        out.push_str(&format!(
            "### {title}\n\n| per operation | {} | {} | service ÷ floor |\n|---|---:|---:|---:|\n",
            service.name(),
            floor.name()
        ));
        for (name, value) in &figures {
            let s = median(windows, service, value);
            let f = median(windows, floor, value);
            let ratio = if f > 0.0 {
                format!("{:.2}", s / f)
            } else if s > 0.0 {
                "—".to_owned()
            } else {
                String::new()
            };
            out.push_str(&format!("| {name} | {s:.2} | {f:.2} | {ratio} |\n"));
        }
        out.push('\n');
    }
    out.push_str(
        "### WAL records by type, per operation (median of the rounds)\n\n\
         | record type | service deny | floor deny | service registration | floor registration | service idle, per second |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    let mut kinds: Vec<&String> = windows
        .values()
        .flatten()
        .flat_map(|w| w.by_type.keys())
        .filter(|k| k.as_str() != "Total" && k.as_str() != "FPI bytes")
        .collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let cell = |side| {
            median(windows, side, |w: &Window| {
                w.by_type.get(kind).map_or(0.0, |(n, _)| *n)
            })
        };
        out.push_str(&format!(
            "| {kind} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            cell(Side::ServiceDeny),
            cell(Side::FloorDeny),
            cell(Side::ServiceRegister),
            cell(Side::FloorRegister),
            cell(Side::ServiceIdle),
        ));
    }
    let idle = |value: &dyn Fn(&Window) -> f64| median(windows, Side::ServiceIdle, value);
    out.push_str(&format!(
        "\nThe service idle (started, no requests, 2 s): {:.1} transactions, {:.0} WAL bytes a second, which the \
         service's windows include for the second or so that their {} operations take.\n",
        idle(&|w| w.commits),
        idle(&|w| w.wal_bytes),
        wal.count
    ));
    out
}
