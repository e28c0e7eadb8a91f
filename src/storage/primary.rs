//! Following the primary among several servers (`target_session_attrs=read-write`): the pool connects to the first
//! server, in the URL's order, that accepts writes, and moves to another when that one stops accepting them.
//!
//! Three parts. A new connection to a server that does not accept writes is refused (`after_connect`), so the pool
//! never hands one out; the pool then keeps retrying until `DATABASE_ACQUIRE_TIMEOUT_MS`, and the request is
//! answered 503. A follower task checks the current server every `DATABASE_PRIMARY_CHECK_MS` over a connection of
//! its own, and at once when a connection was refused; when the server is gone or read-only it tries the servers in
//! order and points the pool at the first writable one (`Pool::set_connect_options`). Connections opened before
//! that switch are dropped when next acquired (`before_acquire`), never reused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, PgPool, Row};
use tokio::sync::Notify;

/// How long one server may take to accept a connection and answer whether it takes writes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The servers of a multi-host URL and which of them the pool uses now.
#[derive(Debug)]
pub struct Primary {
    servers: Vec<PgConnectOptions>,
    current: AtomicUsize,
    /// When the pool last moved to another server: connections older than that are not reused.
    switched_at: Mutex<Option<Instant>>,
    /// Set once the pool exists; the pool's hooks hold this `Primary`, so it cannot be given at construction.
    pool: OnceLock<PgPool>,
    /// Wakes the follower early: a connection was refused because its server takes no writes.
    suspect: Notify,
}

impl Primary {
    pub fn new(servers: Vec<PgConnectOptions>) -> Arc<Self> {
        Arc::new(Primary {
            servers,
            current: AtomicUsize::new(0),
            switched_at: Mutex::new(None),
            pool: OnceLock::new(),
            suspect: Notify::new(),
        })
    }

    /// The options of the server in use.
    pub fn current(&self) -> PgConnectOptions {
        self.servers[self.current.load(Ordering::Relaxed)].clone()
    }

    /// Tries the servers in order and makes the first writable one current; the current one stays when none is.
    pub async fn choose(&self) -> Option<PgConnectOptions> {
        let found = self.first_writable().await?;
        self.make_current(found);
        Some(self.servers[found].clone())
    }

    /// Hands the pool to this `Primary`, so that it can point it at another server.
    pub fn attach(&self, pool: PgPool) {
        let _ = self.pool.set(pool);
    }

    /// For `after_connect`: refuses a connection to a server that does not accept writes, and wakes the follower.
    pub async fn admit(&self, connection: &mut PgConnection) -> Result<(), sqlx::Error> {
        if accepts_writes(connection).await? {
            return Ok(());
        }
        self.suspect.notify_one();
        Err(sqlx::Error::Protocol(
            "the server does not accept writes (target_session_attrs=read-write); looking for the primary".into(),
        ))
    }

    /// For `before_acquire`: whether a connection this old was opened after the last switch of server.
    pub fn is_current(&self, age: Duration) -> bool {
        let switched_at = *self
            .switched_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        switched_at.is_none_or(|at| age < at.elapsed())
    }

    /// Checks the current server every `interval` (and when woken), moving the pool when it stops taking writes.
    /// Ends when the pool is closed.
    pub fn spawn_follower(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let primary = Arc::clone(self);
        tokio::spawn(async move {
            let mut watching: Option<PgConnection> = None;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    () = primary.suspect.notified() => {}
                }
                if primary.pool.get().is_some_and(PgPool::is_closed) {
                    return;
                }
                let healthy = match watching.as_mut() {
                    Some(connection) => accepts_writes(connection).await.unwrap_or(false),
                    None => false,
                };
                if healthy {
                    continue;
                }
                watching = None;
                if let Some(found) = primary.first_writable().await {
                    primary.make_current(found);
                    watching = connect(&primary.servers[found]).await.ok();
                }
            }
        })
    }

    async fn first_writable(&self) -> Option<usize> {
        for (index, server) in self.servers.iter().enumerate() {
            let Ok(mut connection) = connect(server).await else {
                continue;
            };
            let writable =
                tokio::time::timeout(PROBE_TIMEOUT, accepts_writes(&mut connection)).await;
            let _ = connection.close().await;
            if matches!(writable, Ok(Ok(true))) {
                return Some(index);
            }
        }
        None
    }

    fn make_current(&self, index: usize) {
        let previous = self.current.swap(index, Ordering::Relaxed);
        if previous == index {
            return;
        }
        *self
            .switched_at
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(Instant::now());
        if let Some(pool) = self.pool.get() {
            pool.set_connect_options(self.servers[index].clone());
        }
        let server = &self.servers[index];
        tracing::warn!(
            host = server.get_host(),
            port = server.get_port(),
            "moved to the server that now accepts writes"
        );
    }
}

async fn connect(server: &PgConnectOptions) -> Result<PgConnection, sqlx::Error> {
    tokio::time::timeout(PROBE_TIMEOUT, server.connect())
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
}

/// Whether the server takes writes: `transaction_read_only` is on for a standby and for a server set read-only, as
/// libpq checks it for `read-write`. A simple query, so no prepared statement is left behind a pooler.
pub async fn accepts_writes(connection: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let row = connection.fetch_one("show transaction_read_only").await?;
    Ok(row.try_get::<String, _>(0)? == "off")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_servers() -> Arc<Primary> {
        Primary::new(vec![
            PgConnectOptions::new().host("127.0.0.1").port(1),
            PgConnectOptions::new().host("127.0.0.1").port(2),
        ])
    }

    #[test]
    fn before_any_switch_every_connection_is_reused() {
        assert!(two_servers().is_current(Duration::from_secs(3600)));
    }

    #[test]
    fn a_connection_opened_before_the_switch_is_dropped_and_one_opened_after_it_is_kept() {
        let primary = two_servers();
        primary.make_current(1);
        assert_eq!(primary.current().get_port(), 2);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !primary.is_current(Duration::from_secs(1)),
            "opened before the switch"
        );
        assert!(
            primary.is_current(Duration::from_millis(1)),
            "opened after the switch"
        );
    }

    #[test]
    fn choosing_the_server_already_in_use_is_no_switch() {
        let primary = two_servers();
        primary.make_current(0);
        assert!(primary.is_current(Duration::from_secs(3600)));
    }
}
