//! A pg_auto_failover formation of the test's own on loopback (Debian's `postgresql-15-auto-failover`): a monitor,
//! a primary and a secondary with synchronous replication, each `pg_autoctl` in a process group of its own so that
//! killing a node kills its keeper and its Postgres at once, as a crashed machine would. Dropping it kills every
//! process and removes the directory.
//!
//! As root every tool runs as the OS user `postgres` (Postgres refuses root); `XDG_*` point into the test's
//! directory, so nothing of `pg_autoctl`'s state lands in that user's home. The monitor checks nodes more often
//! than by default, so a failover takes seconds rather than half a minute.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The database the nodes serve (`pg_autoctl create postgres --dbname`).
pub const DATABASE: &str = "approval_resume_failover";

/// The monitor's health checks, faster than the defaults (5 s period, 20 s until a node counts as unhealthy).
const MONITOR_SETTINGS: [(&str, &str); 4] = [
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_retry_delay", "500"),
    ("pgautofailover.health_check_timeout", "1000"),
    ("pgautofailover.node_considered_unhealthy_timeout", "2000"),
];

pub struct Formation {
    /// The `pg_autoctl run` processes: the monitor, node 1, node 2.
    children: Vec<Child>,
    pub monitor_port: u16,
    pub node_ports: [u16; 2],
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl Formation {
    /// Creates the monitor and both nodes and waits until node 1 is primary and node 2 its synchronous secondary.
    pub fn start() -> Formation {
        let bin = pg_bin();
        let dir = tempfile::Builder::new()
            .prefix("approval-resume-paf-")
            .tempdir()
            .expect("a temporary directory");
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(dir.path()));
        }
        let mut formation = Formation {
            children: Vec::new(),
            monitor_port: crate::support::free_port(),
            node_ports: [crate::support::free_port(), crate::support::free_port()],
            bin,
            dir,
        };
        let monitor_data = formation.path("monitor");
        let port = formation.monitor_port.to_string();
        run(formation.autoctl().args([
            "create",
            "monitor",
            "--pgdata",
            &monitor_data,
            "--pgport",
            &port,
            "--hostname",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
        ]));
        let child = formation.spawn(&["run", "--pgdata", &monitor_data], "monitor.log");
        formation.children.push(child);
        formation.wait_for("the monitor", Duration::from_secs(60), |formation| {
            formation
                .psql(formation.monitor_port, "pg_auto_failover", "select 1")
                .is_some()
        });
        for (name, value) in MONITOR_SETTINGS {
            formation.psql(
                formation.monitor_port,
                "pg_auto_failover",
                &format!("alter system set {name} = '{value}'"),
            );
        }
        formation.psql(
            formation.monitor_port,
            "pg_auto_failover",
            "select pg_reload_conf()",
        );
        formation.start_node(0);
        formation.wait_for(
            "node 1 to run alone",
            Duration::from_secs(120),
            |formation| formation.states() == "1:single",
        );
        formation.start_node(1);
        formation.wait_for(
            "node 1 primary and node 2 secondary",
            Duration::from_secs(180),
            |formation| formation.states() == "1:primary,2:secondary",
        );
        let sync = formation
            .psql(
                formation.node_ports[0],
                DATABASE,
                "show synchronous_standby_names",
            )
            .unwrap_or_default();
        assert!(!sync.is_empty(), "replication to node 2 is not synchronous");
        formation
    }

    /// The service's URL: both nodes, the writable one kept.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{DATABASE}?target_session_attrs=read-write",
            self.node_ports[0], self.node_ports[1]
        )
    }

    /// A direct URL of one node (0 or 1).
    pub fn node_url(&self, node: usize) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{DATABASE}",
            self.node_ports[node]
        )
    }

    /// Kills node `node`'s keeper and Postgres at once (SIGKILL to its process group).
    pub fn kill_node(&mut self, node: usize) {
        let child = &mut self.children[node + 1];
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .status();
        let _ = child.wait();
    }

    /// Each node's id and reported state, as the monitor has them: `1:primary,2:secondary`.
    pub fn states(&self) -> String {
        self.psql(
            self.monitor_port,
            "pg_auto_failover",
            "select string_agg(nodeid || ':' || reportedstate, ',' order by nodeid) from pgautofailover.node",
        )
        .unwrap_or_default()
    }

    /// The logs of every process, for failure messages.
    pub fn logs(&self) -> String {
        ["monitor.log", "node1.log", "node2.log"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
                let tail: String = text
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                format!("--- {name} ---\n{tail}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn start_node(&mut self, node: usize) {
        let data = self.path(&format!("node{}", node + 1));
        let port = self.node_ports[node].to_string();
        let monitor = format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            self.monitor_port
        );
        let child = self.spawn(
            &[
                "create",
                "postgres",
                "--pgdata",
                &data,
                "--pgport",
                &port,
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--monitor",
                &monitor,
                "--dbname",
                DATABASE,
                "--run",
            ],
            &format!("node{}.log", node + 1),
        );
        self.children.push(child);
    }

    fn wait_for(&self, what: &str, within: Duration, done: impl Fn(&Formation) -> bool) {
        let deadline = Instant::now() + within;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "waited {within:?} for {what}; states {:?}\n{}",
                self.states(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// `pg_autoctl`, as the postgres user when root, with the server binaries first on the PATH.
    fn autoctl(&self) -> Command {
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "env"]);
            command
        } else {
            Command::new("env")
        };
        let path = format!(
            "PATH={}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .arg(path)
            .arg(format!("XDG_CONFIG_HOME={}", self.path("config")))
            .arg(format!("XDG_DATA_HOME={}", self.path("share")))
            .arg(format!("XDG_RUNTIME_DIR={}", self.path("run")))
            .arg("pg_autoctl")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    fn spawn(&self, args: &[&str], log: &str) -> Child {
        let log = std::fs::File::create(self.dir.path().join(log)).expect("a log file");
        let err = log.try_clone().expect("the log file twice");
        self.autoctl()
            .args(args)
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("pg_autoctl starts")
    }

    /// One value from psql, or `None` when the server does not answer.
    fn psql(&self, port: u16, database: &str, sql: &str) -> Option<String> {
        let output = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
            ])
            .args(["-Atc", sql])
            .env("PGCONNECT_TIMEOUT", "2")
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        for child in self.children.iter_mut().rev() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = child.wait();
        }
    }
}

/// The newest `/usr/lib/postgresql/*/bin` holding `pg_autoctl`'s companions (`pg_ctl`, `psql`).
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            Some((
                entry.file_name().to_str()?.parse().ok()?,
                entry.path().join("bin"),
            ))
        })
        .filter(|(_, dir): &(u32, PathBuf)| dir.join("pg_ctl").is_file())
        .collect();
    versions.sort();
    let dir = versions
        .pop()
        .map(|(_, dir)| dir)
        .expect("PostgreSQL's server binaries");
    assert!(
        Path::new("/usr/bin/pg_autoctl").is_file() || dir.join("pg_autoctl").is_file(),
        "the failover test needs pg_auto_failover (Debian: apt-get install postgresql-15-auto-failover)"
    );
    dir
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?} cannot be started: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
