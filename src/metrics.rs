//! Prometheus metrics in the text exposition format, kept in process memory.
//!
//! Metrics are observations, not state the service relies on, so a process-wide registry is fine here (unlike
//! decisions, which live only in Postgres). Label values come from bounded sets, since every value is a series
//! kept for the life of the process: matched routes (or `unmatched`), standard methods (or `other`), status codes,
//! configured tool names (only calls of a configured executor are counted), fixed outcome and `decided_by` tokens.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Upper bounds in seconds of the latency histograms: from a fast commit to a slow executor.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));

type Labels = Vec<(&'static str, String)>;

#[derive(Default)]
struct Registry {
    counters: BTreeMap<(&'static str, Labels), u64>,
    histograms: BTreeMap<(&'static str, Labels), Histogram>,
}

#[derive(Default)]
struct Histogram {
    /// Cumulative counts per bucket of `BUCKETS`.
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
}

const FAMILIES: [Family; 13] = [
    Family {
        name: "http_requests_total",
        kind: "counter",
        help: "HTTP requests by matched route, method and status.",
    },
    Family {
        name: "http_request_duration_seconds",
        kind: "histogram",
        help: "HTTP request latency by matched route and method.",
    },
    Family {
        name: "decisions_total",
        kind: "counter",
        help: "Decisions recorded, by approved and decided_by.",
    },
    Family {
        name: "approval_expiries_total",
        kind: "counter",
        help: "Turns that expired without a decision.",
    },
    Family {
        name: "executor_calls_total",
        kind: "counter",
        help: "Tool executor calls by tool and outcome.",
    },
    Family {
        name: "executor_call_duration_seconds",
        kind: "histogram",
        help: "Tool executor call latency by tool.",
    },
    Family {
        name: "webhook_attempts_total",
        kind: "counter",
        help: "Webhook delivery attempts, by result (ok: a 2xx answer; failed: anything else).",
    },
    Family {
        name: "webhook_attempt_duration_seconds",
        kind: "histogram",
        help: "Webhook delivery attempt latency.",
    },
    Family {
        name: "webhook_delivery_lag_seconds",
        kind: "histogram",
        help: "From the start of an event's transaction to its delivery's 2xx answer.",
    },
    Family {
        name: "deny_statements_total",
        kind: "counter",
        help: "Statements that recorded denies, by kind (single: one deny; batch: several; retried: one deny again after its batch failed).",
    },
    Family {
        name: "batched_denies_total",
        kind: "counter",
        help: "Denies sent in batch statements (divided by deny_statements_total{kind=\"batch\"}: the mean batch).",
    },
    Family {
        name: "mails_total",
        kind: "counter",
        help: "Mails to people who may decide a waiting turn, by result (sent; retried: an attempt to try again; capped: over a per-hour cap; moot: the turn no longer waits or the person may not decide it; failed: refused for good).",
    },
    Family {
        name: "db_pool_connections",
        kind: "gauge",
        help: "Database pool connections by state.",
    },
];

fn with_registry(update: impl FnOnce(&mut Registry)) {
    // A poisoned lock means a panic while counting; the numbers are still usable.
    let mut registry = REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    update(&mut registry);
}

fn count(name: &'static str, labels: Labels) {
    with_registry(|registry| *registry.counters.entry((name, labels)).or_default() += 1);
}

fn observe(name: &'static str, labels: Labels, elapsed: Duration) {
    let seconds = elapsed.as_secs_f64();
    with_registry(|registry| {
        let histogram = registry.histograms.entry((name, labels)).or_default();
        for (bucket, bound) in histogram.buckets.iter_mut().zip(BUCKETS) {
            if seconds <= bound {
                *bucket += 1;
            }
        }
        histogram.count += 1;
        histogram.sum += seconds;
    });
}

/// The methods counted under their own name; any other (hyper accepts extension methods of any length, before a
/// key is checked) is counted as `other`, so no request can add a label value of its own choosing.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A request method as a label value from a fixed set: a standard method's name, else `other`.
pub fn method_label(method: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or("other")
}

/// One HTTP request served. `route` is a matched route pattern or `unmatched`, `method` any method: it is
/// counted by [`method_label`].
pub fn http_request(route: &str, method: &str, status: u16, elapsed: Duration) {
    let method = method_label(method);
    count(
        "http_requests_total",
        vec![
            ("route", route.to_owned()),
            ("method", method.to_owned()),
            ("status", status.to_string()),
        ],
    );
    observe(
        "http_request_duration_seconds",
        vec![("route", route.to_owned()), ("method", method.to_owned())],
        elapsed,
    );
}

/// One decision recorded (replays are not counted).
pub fn decision(approved: bool, decided_by: &str) {
    count(
        "decisions_total",
        vec![
            ("approved", approved.to_string()),
            ("decided_by", decided_by.to_owned()),
        ],
    );
}

/// One statement that recorded `denies` denies (`kind`: `single`, `batch` or `retried`; see `resume::denial_writer`).
pub fn deny_statement(kind: &'static str, denies: usize) {
    with_registry(|registry| {
        *registry
            .counters
            .entry(("deny_statements_total", vec![("kind", kind.to_owned())]))
            .or_default() += 1;
        if kind == "batch" {
            *registry
                .counters
                .entry(("batched_denies_total", Vec::new()))
                .or_default() += denies as u64;
        }
    });
}

/// Turns expired without a decision (by the sweeper, or by a decision that came too late).
pub fn expired(turns: usize) {
    with_registry(|registry| {
        *registry
            .counters
            .entry(("approval_expiries_total", Vec::new()))
            .or_default() += turns as u64;
    });
}

/// One executor call finished, whatever its outcome.
pub fn executor_call(tool: &str, outcome: &str, elapsed: Duration) {
    count(
        "executor_calls_total",
        vec![("tool", tool.to_owned()), ("outcome", outcome.to_owned())],
    );
    observe(
        "executor_call_duration_seconds",
        vec![("tool", tool.to_owned())],
        elapsed,
    );
}

/// One mail's attempt or end (`result`: sent, retried, capped, moot or failed; `delivery::mail`).
pub fn mail(result: &'static str) {
    count("mails_total", vec![("result", result.to_owned())]);
}

/// One webhook delivery attempt.
pub fn webhook_attempt(ok: bool, elapsed: Duration) {
    let result = if ok { "ok" } else { "failed" };
    count(
        "webhook_attempts_total",
        vec![("result", result.to_owned())],
    );
    observe("webhook_attempt_duration_seconds", Vec::new(), elapsed);
}

/// One event delivered to one subscription, `lag` after its transaction began.
pub fn webhook_delivered(lag: Duration) {
    observe("webhook_delivery_lag_seconds", Vec::new(), lag);
}

/// Gauges of webhook subscriptions and their undelivered events by state, from `(state, subscriptions, backlog)`.
pub fn render_webhook_gauges(rows: &[(String, i64, i64)]) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# HELP webhook_subscriptions Webhook subscriptions by state (active, failing)."
    );
    let _ = writeln!(text, "# TYPE webhook_subscriptions gauge");
    for (state, subscriptions, _) in rows {
        let _ = writeln!(
            text,
            "webhook_subscriptions{{state=\"{}\"}} {subscriptions}",
            escape(state)
        );
    }
    let _ = writeln!(
        text,
        "# HELP webhook_backlog_events Events not yet delivered, summed over subscriptions, by subscription state."
    );
    let _ = writeln!(text, "# TYPE webhook_backlog_events gauge");
    for (state, _, backlog) in rows {
        let _ = writeln!(
            text,
            "webhook_backlog_events{{state=\"{}\"}} {backlog}",
            escape(state)
        );
    }
    text
}

/// The feed's readers as `/metrics` shows them, counted by `delivery::feed_waiters` (defined here, below delivery, so
/// that metrics imports nothing of the rooms it observes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedCounts {
    /// Waiting now.
    pub waiting: usize,
    /// Wake-ups that made a waiting reader read again, since the start.
    pub woken: u64,
    /// Readers refused at their client's cap, since the start.
    pub refused_client: u64,
    /// Readers refused at the instance's cap, since the start.
    pub refused_instance: u64,
}

/// The feed's long-polling readers on this instance (docs/design.md §17): waiting now, wake-ups that made one read
/// again, and readers refused at a cap, by whose.
pub fn render_feed_gauges(counts: FeedCounts) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# HELP feed_waiters Feed readers waiting for events on this instance.\n\
         # TYPE feed_waiters gauge\nfeed_waiters {}",
        counts.waiting
    );
    let _ = writeln!(
        text,
        "# HELP feed_wakeups_total Wake-ups of waiting feed readers by their tenant's new events (each reads again).\n\
         # TYPE feed_wakeups_total counter\nfeed_wakeups_total {}",
        counts.woken
    );
    let _ = writeln!(
        text,
        "# HELP feed_waiters_refused_total Feed readers refused 429 at a cap, by cap (client, instance).\n\
         # TYPE feed_waiters_refused_total counter\n\
         feed_waiters_refused_total{{cap=\"client\"}} {}\n\
         feed_waiters_refused_total{{cap=\"instance\"}} {}",
        counts.refused_client, counts.refused_instance
    );
    text
}

/// Whether payloads are encrypted at rest (docs/design.md §11): 1 with ENCRYPTION_KEYS, 0 without.
pub fn render_encryption_gauge(enabled: bool) -> String {
    format!(
        "# HELP encryption_enabled Whether transcripts, arguments and results are encrypted at rest.\n\
         # TYPE encryption_enabled gauge\nencryption_enabled {}\n",
        u8::from(enabled)
    )
}

/// The registry as Prometheus text, with the pool's current connections as gauges.
pub fn render(pool_size: u32, pool_idle: usize) -> String {
    let registry = REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut text = String::new();
    for family in FAMILIES {
        let _ = writeln!(text, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(text, "# TYPE {} {}", family.name, family.kind);
        for ((name, labels), value) in &registry.counters {
            if *name == family.name {
                let _ = writeln!(text, "{name}{} {value}", label_text(labels, None));
            }
        }
        for ((name, labels), histogram) in &registry.histograms {
            if *name != family.name {
                continue;
            }
            for (bound, bucket) in BUCKETS.iter().zip(histogram.buckets) {
                let _ = writeln!(
                    text,
                    "{name}_bucket{} {bucket}",
                    label_text(labels, Some(&bound.to_string()))
                );
            }
            let _ = writeln!(
                text,
                "{name}_bucket{} {}",
                label_text(labels, Some("+Inf")),
                histogram.count
            );
            let _ = writeln!(
                text,
                "{name}_sum{} {}",
                label_text(labels, None),
                histogram.sum
            );
            let _ = writeln!(
                text,
                "{name}_count{} {}",
                label_text(labels, None),
                histogram.count
            );
        }
        if family.name == "db_pool_connections" {
            let idle = pool_idle as u64;
            let open = u64::from(pool_size);
            let _ = writeln!(text, "db_pool_connections{{state=\"idle\"}} {idle}");
            let _ = writeln!(
                text,
                "db_pool_connections{{state=\"in_use\"}} {}",
                open.saturating_sub(idle)
            );
        }
    }
    text
}

fn label_text(labels: &Labels, le: Option<&str>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Label values escape backslash, double quote and newline (the exposition format's rule).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_request_appears_with_its_labels() {
        http_request("/v1/test-route-a", "GET", 200, Duration::from_millis(3));
        let text = render(10, 4);
        assert!(text.contains(
            "http_requests_total{route=\"/v1/test-route-a\",method=\"GET\",status=\"200\"} "
        ));
        assert!(text.contains("# TYPE http_request_duration_seconds histogram"));
        assert!(text.contains("db_pool_connections{state=\"in_use\"} 6"));
    }

    #[test]
    fn a_histogram_counts_an_observation_in_every_bucket_above_it() {
        executor_call("test_tool_b", "ok", Duration::from_millis(30));
        let text = render(1, 1);
        assert!(text.contains(
            "executor_call_duration_seconds_bucket{tool=\"test_tool_b\",le=\"0.025\"} 0"
        ));
        assert!(
            text.contains(
                "executor_call_duration_seconds_bucket{tool=\"test_tool_b\",le=\"0.05\"} 1"
            )
        );
        assert!(
            text.contains(
                "executor_call_duration_seconds_bucket{tool=\"test_tool_b\",le=\"+Inf\"} 1"
            )
        );
        assert!(text.contains("executor_call_duration_seconds_count{tool=\"test_tool_b\"} 1"));
    }

    #[test]
    fn a_made_up_method_is_counted_as_other() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("PATCH"), "PATCH");
        assert_eq!(method_label(&"X".repeat(20_000)), "other");
        assert_eq!(method_label("get"), "other", "methods are case-sensitive");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
