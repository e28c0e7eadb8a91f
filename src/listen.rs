//! Accepting and serving connections, bounded for a service that faces browsers and so the internet: at most
//! `max_connections` open at once, each closed when it does not send a request header within
//! `header_read_timeout`, and all of them drained on shutdown for at most a grace period.
//!
//! `axum::serve` offers neither bound, so the accept loop is written here over hyper's HTTP/1 connection builder.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The bounds on connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a connection may take to send a whole request header, counted from when the service starts
    /// waiting for one; an idle keep-alive connection is closed after as long.
    pub header_read_timeout: Duration,
    /// Most connections open at once. At the bound the service stops accepting, so further connections wait in
    /// the kernel's backlog until one closes instead of being accepted and starved.
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open connections finish their requests for
/// at most `grace`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => {
                permit.map_err(std::io::Error::other)?
            }
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, say: waiting a moment lets connections close instead of spinning.
                    tracing::warn!(error = %error, "accepting a connection failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers are small and written whole; waiting to coalesce them (Nagle) only adds latency.
        let _ = stream.set_nodelay(true);
        let connection = builder.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection ends in an error when its client goes away or is too slow with its header: the
            // client's doing, not the service's, so it is not logged above debug.
            if let Err(error) = connection.await {
                tracing::debug!(error = %error, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!(grace_secs = grace.as_secs(), "requests still running after the grace period; stopping");
        }
    }
    Ok(())
}
