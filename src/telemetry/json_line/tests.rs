//! Every line `JsonLine` writes, against the one tracing-subscriber's own JSON formatter writes with the service's
//! settings for the same spans and events: equal as JSON values and, the timestamp aside, byte for byte.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;

use super::JsonLine;

/// Everything written, shared with the writer handed to the subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        let text = String::from_utf8(bytes).expect("log lines are UTF-8");
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "every line ends in a newline: {text}"
        );
        text.lines().map(str::to_owned).collect()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Runs `log` under tracing-subscriber's JSON formatter (the settings `telemetry::init` used before) and under
/// `JsonLine`, asserts each pair of lines equal, and answers ours, parsed.
fn same_lines_as_the_fmt_formatter(log: impl Fn()) -> Vec<Value> {
    let theirs = Captured::default();
    let reference = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_max_level(Level::TRACE)
        .with_writer(theirs.clone())
        .finish();
    tracing::subscriber::with_default(reference, &log);
    let ours = Captured::default();
    let subscriber = tracing_subscriber::registry().with(JsonLine::new(ours.clone()));
    tracing::subscriber::with_default(subscriber, &log);

    let (theirs, ours) = (theirs.lines(), ours.lines());

    assert_eq!(
        ours.len(),
        theirs.len(),
        "ours: {ours:#?}\ntheirs: {theirs:#?}"
    );
    assert!(!ours.is_empty(), "the case logs something");
    ours.iter()
        .zip(&theirs)
        .map(|(our_line, their_line)| {
            let parse = |line: &str| -> Value {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
            };
            let (mut ours, mut theirs) = (parse(our_line), parse(their_line));
            let timestamp = ours["timestamp"].clone();
            for value in [&mut ours, &mut theirs] {
                value
                    .as_object_mut()
                    .expect("a line is an object")
                    .remove("timestamp")
                    .expect("a line has a timestamp");
            }
            assert_eq!(ours, theirs, "\nours:   {our_line}\ntheirs: {their_line}");
            assert_eq!(
                after_timestamp(our_line),
                after_timestamp(their_line),
                "the same text, keys in the same order"
            );
            ours["timestamp"] = timestamp;
            ours
        })
        .collect()
}

/// The line from `"level"` on: the timestamps of two runs differ.
fn after_timestamp(line: &str) -> &str {
    let at = line
        .find(",\"level\":")
        .expect("a level after the timestamp");
    &line[at..]
}

#[test]
fn a_request_span_with_its_client_recorded_later_prints_as_the_fmt_formatter_prints_it() {
    let lines = same_lines_as_the_fmt_formatter(|| {
        let span = tracing::info_span!(
            "request",
            method = "POST",
            route = "/v1/runs/{id}/decision",
            request_id = "4f1c",
            client = tracing::field::Empty,
        );
        let _entered = span.enter();
        tracing::info!("before the key is checked");
        tracing::Span::current().record("client", "chat-backend");
        let run_id = uuid::Uuid::nil();
        tracing::info!(run_id = %run_id, turn = 3_i64, decided_by = "run_owner", "turn denied");
        tracing::info!(status = 200_u16, latency_ms = 1.25_f64, "request served");
    });
    assert_eq!(lines[0]["span"].get("client"), None, "not recorded yet");
    assert_eq!(lines[1]["span"]["client"], "chat-backend");
    assert_eq!(lines[1]["span"]["name"], "request");
    assert_eq!(lines[1]["run_id"], "00000000-0000-0000-0000-000000000000");
    assert_eq!(lines[2]["status"], 200);
    assert_eq!(lines[2]["message"], "request served");
    assert_eq!(lines[2]["level"], "INFO");
}

#[test]
fn strings_are_escaped_in_event_fields_span_fields_and_the_message() {
    let awkward = "a \"quoted\" back\\slash, a\nnewline, a\ttab, \u{1}\u{1f}\u{7f}, é, 🦀, \u{2028}, </script>";
    same_lines_as_the_fmt_formatter(|| {
        let span = tracing::info_span!("request", note = awkward, later = tracing::field::Empty);
        span.record("later", awkward);
        let _entered = span.enter();
        tracing::info!(text = awkward, "message with {awkward}");
        tracing::warn!(empty = "", "");
    });
}

#[test]
fn numbers_and_booleans_keep_their_json_types_in_events_and_spans() {
    let lines = same_lines_as_the_fmt_formatter(|| {
        let span = tracing::info_span!(
            "numbers",
            big = u64::MAX,
            small = i64::MIN,
            minus = -1_i64,
            half = 0.5_f64,
            whole = 1.0_f64,
            huge = 1e300_f64,
            nan = f64::NAN,
            infinite = f64::INFINITY,
            negative_zero = -0.0_f64,
            yes = true,
            wide = 1_u128 << 100,
        );
        let _entered = span.enter();
        tracing::info!(
            big = u64::MAX,
            small = i64::MIN,
            minus = -1_i64,
            half = 0.5_f64,
            whole = 1.0_f64,
            tiny = 5e-324_f64,
            nan = f64::NAN,
            infinite = f64::NEG_INFINITY,
            yes = true,
            no = false,
            wide = -(1_i128 << 100),
            byte = 7_u8,
        );
    });
    assert_eq!(lines[0]["big"], u64::MAX);
    assert_eq!(lines[0]["small"], i64::MIN);
    assert_eq!(lines[0]["half"], 0.5);
    assert_eq!(lines[0]["nan"], Value::Null);
    assert_eq!(lines[0]["no"], false);
    assert_eq!(lines[0]["span"]["yes"], true);
    assert_eq!(lines[0]["span"]["wide"], (1_u128 << 100).to_string());
}

#[derive(Debug)]
#[allow(dead_code)] // read by its Debug only
struct Turn {
    index: u32,
    note: &'static str,
}

#[test]
fn display_debug_and_error_fields_are_strings_as_the_fmt_formatter_writes_them() {
    let error = std::io::Error::other("connection \"reset\"");
    same_lines_as_the_fmt_formatter(|| {
        let turn = Turn {
            index: 2,
            note: "say \"no\"",
        };
        let span = tracing::info_span!("request", shown = %"a \"b\"", debugged = ?turn);
        let _entered = span.enter();
        tracing::error!(
            cause = %error,
            debugged = ?turn,
            error = &error as &(dyn std::error::Error + 'static),
            "request failed"
        );
    });
}

#[test]
fn an_event_outside_any_span_has_no_span_key() {
    let lines = same_lines_as_the_fmt_formatter(|| {
        tracing::info!(port = 8080_u64, "listening");
        tracing::debug!(target: "approval_resume::elsewhere", "no fields but the message");
        tracing::trace!(lonely = true);
    });
    assert!(lines.iter().all(|line| line.get("span").is_none()));
    assert_eq!(lines[1]["target"], "approval_resume::elsewhere");
    assert_eq!(lines[2].get("message"), None, "an event without a message");
}

#[test]
fn of_nested_spans_only_the_current_one_is_printed_or_the_explicit_parent() {
    let lines = same_lines_as_the_fmt_formatter(|| {
        let outer = tracing::info_span!("request", request_id = "outer");
        let _outer = outer.enter();
        tracing::info!("in the outer span");
        let inner = tracing::debug_span!("deciding", r#type = "deny", step = 1_u64);
        {
            let _inner = inner.enter();
            inner.record("step", 2_u64);
            tracing::info!(r#type = "event raw name", "in the inner span");
            tracing::info!(parent: &outer, "the outer span is the explicit parent");
            let bare = tracing::info_span!("bare");
            let _bare = bare.enter();
            tracing::info!("in a span without fields");
        }
        tracing::info!("back in the outer span");
    });
    assert_eq!(lines[0]["span"]["request_id"], "outer");
    assert_eq!(lines[1]["span"]["name"], "deciding");
    assert_eq!(
        lines[1]["span"]["step"], 2,
        "a re-recorded field replaces the first"
    );
    assert_eq!(
        lines[1]["span"].get("request_id"),
        None,
        "only the current span"
    );
    assert_eq!(lines[2]["span"]["name"], "request");
    assert_eq!(lines[3]["span"], serde_json::json!({"name": "bare"}));
    assert_eq!(lines[4]["span"]["name"], "request");
}

#[test]
fn a_record_of_the_log_crate_is_printed_with_its_own_target() {
    use tracing_log::log;
    let lines = same_lines_as_the_fmt_formatter(|| {
        let span = tracing::info_span!("request", request_id = "r1");
        let _entered = span.enter();
        tracing_log::format_trace(
            &log::Record::builder()
                .args(format_args!("sending fatal alert {}", "DecodeError"))
                .level(log::Level::Warn)
                .target("rustls::common_state")
                .module_path_static(Some("rustls::common_state"))
                .file_static(Some("src/common_state.rs"))
                .line(Some(42))
                .build(),
        )
        .expect("the record is dispatched");
    });
    assert_eq!(lines[0]["target"], "rustls::common_state");
    assert_eq!(lines[0]["level"], "WARN");
}

#[test]
fn the_timestamp_is_rfc_3339_in_utc_to_the_microsecond() {
    let lines = same_lines_as_the_fmt_formatter(|| tracing::info!("now"));
    let timestamp = lines[0]["timestamp"].as_str().expect("a string");
    let parsed = chrono::DateTime::parse_from_rfc3339(timestamp).expect("RFC 3339");
    assert_eq!(parsed.offset().local_minus_utc(), 0, "{timestamp}");
    assert!(timestamp.ends_with('Z'), "{timestamp}");
    assert_eq!(
        timestamp.len(),
        "2026-12-04T01:02:03.456789Z".len(),
        "{timestamp}"
    );
}

#[test]
fn a_line_longer_than_the_kept_buffer_is_whole_and_the_next_is_unaffected() {
    let long = "x".repeat(super::KEPT_CAPACITY * 2);
    let lines = same_lines_as_the_fmt_formatter(|| {
        tracing::info!(long = long.as_str(), "long");
        tracing::info!("short");
    });
    assert_eq!(lines[0]["long"].as_str().map(str::len), Some(long.len()));
    assert_eq!(lines[1]["message"], "short");
}
