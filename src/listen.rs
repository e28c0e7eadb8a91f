//! Accepting and serving connections, bounded for a service that faces browsers and so the internet: at most
//! `max_connections` served at once, each closed when it does not send a request header within
//! `header_read_timeout` (counted from when it was accepted, and again while it idles between requests), and all of
//! them drained on shutdown for at most a grace period.
//!
//! A connection over the bound is still accepted, answered 503 with `Retry-After` at once and closed
//! (docs/design.md §17): left in the kernel's backlog it would wait, unanswered, behind connections that may never send
//! a request, and a client could not tell a full service from a dead one. Those answers are bounded too
//! ([`OVERFLOW_ANSWERS`]); past that, a connection is closed unanswered.
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::http::error::too_many_connections;

/// The bounds on connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a connection may take to send a whole request header, counted from when it is accepted (and from
    /// the end of each answer, for the next request); an idle connection is closed after as long.
    pub header_read_timeout: Duration,
    /// Most connections served at once. Past the bound a new connection is answered 503 at once and closed.
    pub max_connections: usize,
}

/// Most connections over the bound being answered 503 at once; each takes at most [`OVERFLOW_LINGER`].
pub const OVERFLOW_ANSWERS: usize = 256;

/// How long an over-the-bound connection is kept after its answer, reading what its client sent, so that closing a
/// socket with unread bytes (which sends a reset) does not discard the answer before the client reads it.
const OVERFLOW_LINGER: Duration = Duration::from_millis(500);

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
    let overflow = Arc::new(Semaphore::new(OVERFLOW_ANSWERS));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut shutdown = pin!(shutdown);
    loop {
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
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            if let Ok(answering) = Arc::clone(&overflow).try_acquire_owned() {
                tokio::spawn(async move {
                    answer_overflow(stream).await;
                    drop(answering);
                });
            }
            continue;
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

/// Answers a connection over the bound 503 (problem+json, `Retry-After`, `Connection: close`) without reading its
/// request, then closes it.
async fn answer_overflow(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = tokio::time::timeout(OVERFLOW_LINGER, async {
        stream.write_all(&too_many_connections()).await?;
        stream.shutdown().await?;
        // Until the client closes its side too, or the linger ends: what it sent is read and dropped.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}
