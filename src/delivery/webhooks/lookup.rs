//! Name lookups of webhook URLs, bounded. The system's resolver (`getaddrinfo`) blocks, so tokio runs it on the
//! blocking pool, where it cannot be cancelled: a caller that stops waiting leaves the thread busy until the lookup
//! ends. Unbounded, a tenant creating subscriptions on slow names (or a receiver's name whose DNS hangs) could hold
//! as many threads of that pool as it liked, and every other blocking task of the service (redaction, filtering)
//! would queue behind them.
//!
//! So every lookup, at a subscription's creation and at each delivery's connection, goes through [`Lookups`]: at most
//! [`MAX_CONCURRENT_LOOKUPS`] at once, each holding its place until the resolver has really answered (not merely
//! until its caller gave up), and each caller waiting at most [`LOOKUP_TIMEOUT`], for a place and the answer
//! together. Constants, not settings: the bound protects the process, and no deployment needs another.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio::sync::Semaphore;

/// How long a caller waits for a lookup: for a free place, then for the answer.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Lookups running at once in this process; a 33rd waits for a place.
pub const MAX_CONCURRENT_LOOKUPS: usize = 32;

/// A lookup as started: the addresses a name resolves to.
type Answer = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Starts the lookup of a name.
type Resolve = Arc<dyn Fn(String) -> Answer + Send + Sync>;

/// Why a lookup gave no addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error(
        "{limit} name lookups are already running and none ended within {secs} s; try again shortly",
        secs = .waited.as_secs_f64()
    )]
    Busy { limit: usize, waited: Duration },
    #[error("the name did not resolve within {} s", .0.as_secs_f64())]
    TimedOut(Duration),
    #[error("{0}")]
    Failed(String),
}

/// The lookups of one process: a resolver, and the bound on it.
pub struct Lookups {
    places: Arc<Semaphore>,
    limit: usize,
    timeout: Duration,
    resolve: Resolve,
}

/// The system's resolver, bounded, shared by every lookup of this process.
static SYSTEM: LazyLock<Lookups> = LazyLock::new(|| {
    Lookups::new(MAX_CONCURRENT_LOOKUPS, LOOKUP_TIMEOUT, |host: String| {
        Box::pin(async move {
            // Port 0: callers set the URL's port on the addresses they get.
            Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect())
        }) as Answer
    })
});

impl Lookups {
    /// Lookups through `resolve`, at most `limit` at once, each caller waiting at most `timeout`.
    pub fn new(
        limit: usize,
        timeout: Duration,
        resolve: impl Fn(String) -> Answer + Send + Sync + 'static,
    ) -> Lookups {
        Lookups {
            places: Arc::new(Semaphore::new(limit)),
            limit,
            timeout,
            resolve: Arc::new(resolve),
        }
    }

    /// The system's resolver, bounded.
    pub fn system() -> &'static Lookups {
        &SYSTEM
    }

    /// The addresses `host` resolves to.
    pub async fn lookup(&self, host: &str) -> Result<Vec<SocketAddr>, LookupError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let busy = || LookupError::Busy {
            limit: self.limit,
            waited: self.timeout,
        };
        let place = tokio::time::timeout_at(deadline, Arc::clone(&self.places).acquire_owned())
            .await
            .map_err(|_| busy())?
            // The semaphore is never closed.
            .map_err(|_| busy())?;
        let answer = (self.resolve)(host.to_owned());
        // The place goes with the lookup, not with its caller: it is given back when the resolver answers, however
        // long after the caller stopped waiting.
        let running = tokio::spawn(async move {
            let answer = answer.await;
            drop(place);
            answer
        });
        match tokio::time::timeout_at(deadline, running).await {
            Err(_) => Err(LookupError::TimedOut(self.timeout)),
            Ok(Err(panicked)) => Err(LookupError::Failed(panicked.to_string())),
            Ok(Ok(answer)) => answer.map_err(|error| LookupError::Failed(error.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use tokio::sync::oneshot;

    /// How long a caller waits in these tests.
    const WAIT: Duration = Duration::from_millis(100);

    fn address() -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(93, 184, 215, 14)), 0)
    }

    #[tokio::test]
    async fn a_lookup_that_never_answers_times_out_and_keeps_its_place_so_the_next_is_told_busy() {
        let lookups = Lookups::new(1, WAIT, |_| Box::pin(std::future::pending()) as Answer);
        assert_eq!(
            lookups.lookup("slow.example").await,
            Err(LookupError::TimedOut(WAIT))
        );
        // The hung lookup still runs: its place is not given to the next one.
        assert_eq!(lookups.places.available_permits(), 0);
        let refused = lookups.lookup("other.example").await.unwrap_err();
        assert_eq!(
            refused,
            LookupError::Busy {
                limit: 1,
                waited: WAIT
            }
        );
        assert!(
            refused
                .to_string()
                .contains("1 name lookups are already running"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_place_comes_back_when_the_slow_lookup_answers_even_after_its_caller_gave_up() {
        let (answer, answered) = oneshot::channel::<()>();
        let answered = Arc::new(std::sync::Mutex::new(Some(answered)));
        let lookups = Lookups::new(1, WAIT, move |_| {
            let wait = answered.lock().unwrap().take();
            Box::pin(async move {
                if let Some(wait) = wait {
                    let _ = wait.await;
                }
                Ok(vec![address()])
            }) as Answer
        });
        assert!(matches!(
            lookups.lookup("slow.example").await,
            Err(LookupError::TimedOut(_))
        ));
        assert_eq!(lookups.places.available_permits(), 0);
        answer.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), async {
            while lookups.places.available_permits() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the place comes back once the resolver answers");
        assert_eq!(lookups.lookup("fast.example").await, Ok(vec![address()]));
    }

    #[tokio::test]
    async fn no_more_lookups_than_the_limit_run_at_once() {
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (counting, highest) = (Arc::clone(&running), Arc::clone(&most));
        let lookups = Arc::new(Lookups::new(3, Duration::from_secs(60), move |_| {
            let (running, most) = (Arc::clone(&counting), Arc::clone(&highest));
            Box::pin(async move {
                let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                Ok(vec![address()])
            }) as Answer
        }));
        let callers = (0..10).map(|i| {
            let lookups = Arc::clone(&lookups);
            tokio::spawn(async move { lookups.lookup(&format!("n{i}.example")).await })
        });
        for caller in callers.collect::<Vec<_>>() {
            assert_eq!(caller.await.unwrap(), Ok(vec![address()]));
        }
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
