//! A PostgreSQL cluster of the test's own, for tests that stop, restart or hurt the database: `initdb` into a fresh
//! temporary directory (trust authentication, a free port, the socket inside that directory), started and stopped
//! with `pg_ctl`. Dropping it stops the cluster and removes the directory. The shared server on port 5432 is never
//! touched.
//!
//! Postgres refuses to run as root, so as root every tool runs as the OS user `postgres` (`runuser`), which must
//! own the directory. Nothing is skipped: without the server binaries the test fails and says what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Where the server binaries may be, besides `PG_BIN` and the `PATH`.
const BIN_DIRS: &str = "/usr/lib/postgresql";

/// A running (or stopped) private cluster.
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    log: PathBuf,
    /// As root, the user every tool runs as.
    run_as: Option<&'static str>,
    pub port: u16,
    /// Declared last, so it is removed after the cluster has stopped.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Initializes a cluster in a fresh temporary directory and starts it.
    pub fn start_new() -> Cluster {
        Self::start_new_with("")
    }

    /// `start_new` with more `postgresql.conf` lines (e.g. `shared_preload_libraries`).
    pub fn start_new_with(extra_settings: &str) -> Cluster {
        let bin = server_binaries();
        let run_as = is_root().then_some("postgres");
        let dir = tempfile::Builder::new()
            .prefix("approval-resume-pg-")
            .tempdir()
            .expect("a temporary directory for the cluster");
        if let Some(user) = run_as {
            run(Command::new("chown")
                .arg(format!("{user}:"))
                .arg(dir.path()));
        }
        let data = dir.path().join("data");
        let log = dir.path().join("postgres.log");
        let port = super::free_port();
        let cluster = Cluster {
            bin,
            data,
            log,
            run_as,
            port,
            dir,
        };
        let data = cluster.data.display().to_string();
        run(cluster.tool("initdb").args([
            "-D",
            data.as_str(),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]));
        // Appended to the file initdb wrote (and the postgres user owns), so a restart keeps the settings.
        let settings = format!(
            "\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nmax_connections = 60\nshared_buffers = 32MB\n{extra_settings}\n",
            cluster.dir.path().display()
        );
        let conf = cluster.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("initdb wrote postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).expect("postgresql.conf is writable");
        cluster.start();
        cluster
    }

    /// The URL of `database` on this cluster.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Starts the cluster and waits until it accepts connections.
    pub fn start(&self) {
        self.pg_ctl(&[
            "start",
            "-w",
            "-t",
            "30",
            "-l",
            &self.log.display().to_string(),
        ]);
    }

    /// Stops the cluster (`fast`: roll back open transactions, disconnect every client) and waits until it is down.
    pub fn stop_fast(&self) {
        self.pg_ctl(&["stop", "-w", "-t", "30", "-m", "fast"]);
    }

    /// The server's log so far, for failure messages.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data.display().to_string();
        let output = run_unchecked(self.tool("pg_ctl").args(["-D", data.as_str()]).args(args));
        assert!(
            output.status.success(),
            "pg_ctl {} failed: {}\n{}{}\n--- server log ---\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            self.server_log()
        );
    }

    fn tool(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        let mut command = match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        };
        // The postgres user may not be allowed into the test's working directory.
        command.current_dir(self.dir.path()).stdin(Stdio::null());
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Immediate: nothing of the test's data needs to survive, and the directory goes next.
        let data = self.data.display().to_string();
        let _ = self
            .tool("pg_ctl")
            .args([
                "-D",
                data.as_str(),
                "stop",
                "-w",
                "-t",
                "30",
                "-m",
                "immediate",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The directory holding `initdb` and `pg_ctl`: `PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`, else the
/// `PATH`. Panics with what to install when there is none.
fn server_binaries() -> PathBuf {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("PG_BIN").map(PathBuf::from) {
        assert!(
            has_tools(&dir),
            "PG_BIN={} holds no initdb and pg_ctl",
            dir.display()
        );
        return dir;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(BIN_DIRS)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_tools(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return dir;
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| has_tools(dir));
    on_path.unwrap_or_else(|| {
        panic!(
            "the fault tests need PostgreSQL's server binaries (initdb, pg_ctl) to run a cluster of their own; none \
             in PG_BIN, {BIN_DIRS}/*/bin or the PATH. Install them (Debian: apt-get install postgresql-15) or set \
             PG_BIN to their directory."
        )
    })
}

fn is_root() -> bool {
    let output = run(Command::new("id").arg("-u"));
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

fn run(command: &mut Command) -> Output {
    let output = run_unchecked(command);
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn run_unchecked(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|error| panic!("{command:?} cannot be started: {error}"))
}
