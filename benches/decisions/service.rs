//! The system under test: a fresh database, the real release binary on a free loopback port, and what the
//! harness reads from /proc about it (peak RSS, CPU time) and about Postgres (CPU time of all its processes).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Drops and creates `name` on the server of `server_url` (a URL without a database), and returns its URL.
pub async fn fresh_database(server_url: &str, name: &str) -> Result<String, Error> {
    let options = PgConnectOptions::from_str(server_url)?.database("postgres");
    let mut admin: PgConnection = options.connect().await?;
    sqlx::query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1")
        .bind(name)
        .execute(&mut admin)
        .await?;
    let quoted = name.replace('"', "\"\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "drop database if exists \"{quoted}\""
    )))
    .execute(&mut admin)
    .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("create database \"{quoted}\"")))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    Ok(format!("{}/{name}", server_url.trim_end_matches('/')))
}

/// The service process, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Service {
    child: Child,
    pub pid: u32,
    pub base_url: String,
}

/// How the service is started.
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub database_url: &'a str,
    pub pool_size: u32,
    pub tools_config: Option<&'a Path>,
    pub log_file: PathBuf,
}

impl Service {
    pub async fn start(launch: &Launch<'_>) -> Result<Service, Error> {
        let port = free_port()?;
        let log = std::fs::File::create(&launch.log_file)?;
        let mut command = Command::new(launch.binary);
        command
            .arg("serve")
            .env("DATABASE_URL", launch.database_url)
            .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .env("DATABASE_POOL_SIZE", launch.pool_size.to_string())
            // The production default; the log goes to a file, as it would go to a collector.
            .env("LOG_LEVEL", "info,sqlx=warn")
            .env("LOG_FORMAT", "json")
            // The events phase's webhook receiver listens on loopback.
            .env("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        match launch.tools_config {
            Some(path) => command.env("TOOLS_CONFIG", path),
            None => command.env_remove("TOOLS_CONFIG"),
        };
        let child = command
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", launch.binary.display()))?;
        let service = Service {
            pid: child.id(),
            child,
            base_url: format!("http://127.0.0.1:{port}"),
        };
        service.wait_ready().await?;
        Ok(service)
    }

    async fn wait_ready(&self) -> Result<(), Error> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = client
                .get(format!("{}/readyz", self.base_url))
                .send()
                .await
                .is_ok_and(|response| response.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("the service did not become ready within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Resets the kernel's peak-RSS counter, so the next [`Service::memory`] is the peak of what follows.
    pub fn reset_peak_rss(&self) {
        // "5" resets VmHWM to the current RSS (Linux ≥ 4.0). Without it, VmHWM is the peak since start.
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5");
    }

    /// (VmHWM, VmRSS) in KiB.
    pub fn memory(&self) -> (u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
                .unwrap_or(0)
        };
        (field("VmHWM:"), field("VmRSS:"))
    }

    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Where a bench finds the service's binary, the Postgres server and its output folder, from the environment:
/// `BENCH_BINARY` [target/release/approval-resume], `BENCH_PG_URL` [postgres://postgres@127.0.0.1:5432] and
/// `BENCH_OUT` [target/bench].
pub struct Target {
    pub binary: PathBuf,
    pub server_url: String,
    pub out_dir: PathBuf,
}

impl Target {
    pub fn from_env() -> Target {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = |name: &str, default: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join(default))
        };
        Target {
            binary: path("BENCH_BINARY", "target/release/approval-resume"),
            server_url: std::env::var("BENCH_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned()),
            out_dir: path("BENCH_OUT", "target/bench"),
        }
    }
}

/// Creates an API client holding `scopes` with `approval-resume clients add` and returns its key.
pub fn add_client(
    binary: &Path,
    database_url: &str,
    name: &str,
    scopes: &[&str],
) -> Result<String, Error> {
    let mut command = Command::new(binary);
    command.args(["clients", "add", name]);
    for scope in scopes {
        command.args(["--scope", scope]);
    }
    let output = command
        .env("DATABASE_URL", database_url)
        .env("LOG_LEVEL", "warn")
        .stdin(Stdio::null())
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "clients add failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let key = String::from_utf8(output.stdout)?.trim().to_owned();
    if key.is_empty() {
        return Err("clients add printed no key".into());
    }
    Ok(key)
}

/// CPU time in milliseconds, of the service, of all Postgres processes, of this harness and of its exited children
/// (pgbench), read at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub service_ms: f64,
    /// TCP data segments the service sent to Postgres (`data_segs_out` of its connections to port 5432, by `ss`):
    /// each flush of a request to Postgres is one segment, so per decision this counts its database round trips.
    pub service_db_sends: f64,
    pub postgres_ms: f64,
    pub harness_ms: f64,
    pub children_ms: f64,
}

impl Cpu {
    pub fn read(service_pid: Option<u32>, ticks_per_sec: f64) -> Cpu {
        let to_ms = |ticks: u64| ticks as f64 * 1000.0 / ticks_per_sec;
        let service_ms = service_pid
            .and_then(|pid| stat(&format!("/proc/{pid}/stat")))
            .map(|s| to_ms(s.own))
            .unwrap_or(0.0);
        let own = stat("/proc/self/stat").unwrap_or_default();
        let service_db_sends = service_pid.map(database_sends).unwrap_or(0.0);
        Cpu {
            service_ms,
            service_db_sends,
            postgres_ms: to_ms(postgres_ticks()),
            harness_ms: to_ms(own.own),
            children_ms: to_ms(own.children),
        }
    }

    pub fn since(&self, before: &Cpu) -> Cpu {
        Cpu {
            service_ms: self.service_ms - before.service_ms,
            service_db_sends: self.service_db_sends - before.service_db_sends,
            postgres_ms: self.postgres_ms - before.postgres_ms,
            harness_ms: self.harness_ms - before.harness_ms,
            children_ms: self.children_ms - before.children_ms,
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Stat {
    ppid: u32,
    /// utime + stime
    own: u64,
    /// cutime + cstime: children that exited and were waited for
    children: u64,
}

fn stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name is in parentheses and may hold spaces: fields are counted after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    Some(Stat {
        ppid: field(1)? as u32,
        own: field(11)? + field(12)?,
        children: field(13)? + field(14)?,
    })
}

/// CPU ticks of every process named `postgres`, plus what the postmaster collected from exited backends.
fn postgres_ticks() -> u64 {
    let processes = postgres_processes();
    let pids: Vec<u32> = processes.iter().map(|(pid, _)| *pid).collect();
    processes
        .iter()
        .map(|(_, s)| {
            let is_postmaster = !pids.contains(&s.ppid);
            s.own + if is_postmaster { s.children } else { 0 }
        })
        .sum()
}

/// Every process named `postgres` (exited ones too, until the postmaster reaps them), with its times.
fn postgres_processes() -> Vec<(u32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut processes = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let is_postgres = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.trim() == "postgres");
        if is_postgres && let Some(s) = stat(&format!("/proc/{pid}/stat")) {
            processes.push((pid, s));
        }
    }
    processes
}

/// How many `postgres` processes there are now: the server's own, and one per open connection.
pub fn postgres_process_count() -> usize {
    postgres_processes().len()
}

/// Waits (up to `limit`) until no more than `count` `postgres` processes are left, so that the backends of a pgbench
/// run that just ended have exited and been reaped: only then is their CPU time in the postmaster's children time,
/// which [`Cpu::read`] adds. Read sooner, a run's CPU is missed, or counted in the next run's (seen: the own SQL's
/// Postgres CPU per deny read as 0.17 ms at 8 connections and 0.66 ms at 16 in one report).
pub fn wait_for_backends_reaped(count: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while postgres_process_count() > count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Data segments sent so far on the established connections of process `pid` to port 5432 (0 without `ss`).
fn database_sends(pid: u32) -> f64 {
    let Ok(output) = Command::new("ss")
        .args(["-tinpH", "state", "established", "( dport = :5432 )"])
        .output()
    else {
        return 0.0;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let owner = format!("pid={pid},");
    let mut ours = false;
    let mut total = 0.0;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            // A socket line: addresses and the owning process; its details follow on an indented line.
            ours = line.contains(&owner);
            continue;
        }
        if ours {
            total += line
                .split_whitespace()
                .find_map(|field| field.strip_prefix("data_segs_out:"))
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or(0.0);
        }
    }
    total
}

/// Clock ticks per second of /proc/*/stat (`getconf CLK_TCK`; 100 on Linux almost everywhere).
pub fn ticks_per_sec() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}
