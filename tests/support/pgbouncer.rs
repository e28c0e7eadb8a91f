//! A PgBouncer of the test's own in transaction pooling mode (Debian's `pgbouncer`, 1.18 on bookworm), in front of a
//! Postgres server, on a free loopback port; dropping it stops it and removes its directory.
//!
//! PgBouncer refuses to run as root, so as root it runs as the OS user `postgres`, which owns the directory. Its
//! server pool is smaller than the service's client pool on purpose: client connections then really share server
//! connections, which is what breaks session state.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Server connections PgBouncer opens per database and user.
pub const SERVER_POOL_SIZE: u32 = 3;

/// A running PgBouncer.
pub struct PgBouncer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    /// Declared last, so it is removed after the process has stopped.
    dir: tempfile::TempDir,
}

impl PgBouncer {
    /// As `start`, where PgBouncer is installed. Where it is not, the README's quick start (a machine with Postgres,
    /// not necessarily PgBouncer) still passes: the test says on standard error that it did not run and why, and
    /// answers `None`. With `CI` set (as `.ci/run` is run), a missing PgBouncer fails the test instead.
    pub fn start_if_installed(host: &str, server_port: u16) -> Option<PgBouncer> {
        if which("pgbouncer").is_none() && std::env::var_os("CI").is_none() {
            eprintln!(
                "not run: PgBouncer is not installed (Debian: apt-get install pgbouncer); with CI set this fails"
            );
            return None;
        }
        Some(PgBouncer::start(host, server_port))
    }

    /// Starts PgBouncer in front of the server at `host:port` and waits until it accepts connections.
    pub fn start(host: &str, server_port: u16) -> PgBouncer {
        let program = which("pgbouncer").unwrap_or_else(|| {
            panic!(
                "these tests need PgBouncer (Debian: apt-get install pgbouncer); none on the PATH"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("approval-resume-pgbouncer-")
            .tempdir()
            .expect("a temporary directory for PgBouncer");
        let port = super::free_port();
        let log = dir.path().join("pgbouncer.log");
        let config = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("userlist.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").expect("the user list is writable");
        std::fs::write(
            &config,
            format!(
                "[databases]\n* = host={host} port={server_port}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {users}\n\
                 pool_mode = transaction\ndefault_pool_size = {SERVER_POOL_SIZE}\nmin_pool_size = 0\n\
                 max_client_conn = 500\nlogfile = {log}\nadmin_users = postgres\nserver_check_delay = 0\nquery_wait_timeout = 2\n",
                users = users.display(),
                log = log.display(),
            ),
        )
        .expect("the configuration is writable");
        let as_root = is_root();
        if as_root {
            let status = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(status.success(), "chown of the PgBouncer directory failed");
        }
        let mut command = if as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        let child = command
            .arg(&config)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("PgBouncer starts");
        let bouncer = PgBouncer {
            child,
            port,
            log,
            dir,
        };
        bouncer.wait_until_listening();
        bouncer
    }

    /// The URL of `database` through PgBouncer.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// PgBouncer's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_until_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen within 10 s\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // SIGTERM to runuser reaches PgBouncer too; kill if it lingers.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
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

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}
