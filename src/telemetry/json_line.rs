//! The JSON log line, written without re-parsing: a `Layer` that prints the line tracing-subscriber's JSON
//! formatter prints with `flatten_event(true)`, `with_current_span(true)` and `with_span_list(false)`, key for key.
//!
//! Why it exists (the CPU a log line costs): that formatter keeps each span's fields as one JSON string, parses it back
//! into a `serde_json::Value` for every event (and again for every `Span::record`), and goes through generic visitors;
//! a callgrind profile of a deny put the log line at ~49,000 instructions, 12.6 % of the service's CPU. Here a span's
//! fields are kept as their JSON text, sorted by name as that formatter's map sorts them, an event's fields are
//! escaped by serde_json straight into a reused per-thread buffer, and the timestamp is written by `timestamp`.
//!
//! The line is `{"timestamp":…,"level":…,<event fields in order>,"target":…,"span":{<span fields by name>,"name":…}}`
//! with `span` the event's explicit parent or the current span, and absent outside any span. Value encodings follow
//! the two visitors the formatter uses (`tracing_serde::SerdeMapVisitor` for the event, `JsonVisitor` for spans),
//! down to their differences: a span's `r#` field prefix is dropped and its `log.*` fields skipped, an event's are
//! not. The tests below compare against tracing-subscriber's own formatter line for line.

use std::cell::RefCell;
use std::fmt;
use std::io::Write as _;
use std::ops::Range;

use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent as _;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A buffer that grew past this (a line with a long message) is given back rather than kept by its thread.
const KEPT_CAPACITY: usize = 16 * 1024;

/// Writes one JSON line per event to `make_writer`.
pub struct JsonLine<W> {
    make_writer: W,
    /// tracing-subscriber's default clock, for the years `timestamp` does not write.
    timer: SystemTime,
}

impl<W> JsonLine<W> {
    /// Each line goes to `make_writer` in one `write_all`, as the fmt layer writes it.
    pub fn new(make_writer: W) -> Self {
        Self {
            make_writer,
            timer: SystemTime,
        }
    }
}

/// A span's fields as JSON: each value's text in one buffer, indexed by field name in byte order, the order of
/// the `BTreeMap` tracing-subscriber keeps them in. A re-recorded field's old text stays behind, unused: spans
/// record a field or two after creation, not in a loop.
#[derive(Default)]
struct SpanFields {
    text: Vec<u8>,
    by_name: Vec<(&'static str, Range<usize>)>,
}

impl SpanFields {
    /// Appends one value, encoded by `write`, under `name`, replacing an earlier one.
    fn set(&mut self, name: &'static str, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.text.len();
        write(&mut self.text);
        let range = start..self.text.len();
        match self.by_name.binary_search_by(|(known, _)| known.cmp(&name)) {
            Ok(at) => self.by_name[at].1 = range,
            Err(at) => self.by_name.insert(at, (name, range)),
        }
    }
}

/// Records span fields as `JsonVisitor` does.
struct SpanVisitor<'a>(&'a mut SpanFields);

impl Visit for SpanVisitor<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // Non-finite floats become `null`, as `serde_json::Value::from(f64)` makes them.
        self.0.set(field.name(), |out| put(out, &value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.set(field.name(), |out| put(out, &value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.set(field.name(), |out| put(out, &value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.set(field.name(), |out| put(out, &value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.set(field.name(), |out| put(out, &value));
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        // `Value::from(&[u8])`: an array of numbers.
        self.0.set(field.name(), |out| put(out, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        // The `log` crate's metadata (`log.target`, …) is already in `target`; a raw identifier loses its `r#`.
        if name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.0.set(name, |out| put(out, &format_args!("{value:?}")));
    }
}

/// Writes event fields as `SerdeMapVisitor` does: each one `,"name":value`, in the order they were given.
struct EventVisitor<'a>(&'a mut Vec<u8>);

impl EventVisitor<'_> {
    fn entry(&mut self, field: &Field, value: &(impl Serialize + ?Sized)) {
        self.0.push(b',');
        put(self.0, field.name());
        self.0.push(b':');
        put(self.0, value);
    }
}

impl Visit for EventVisitor<'_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entry(field, &format_args!("{value:?}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, &value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, &value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.entry(field, &value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, value);
    }
}

/// Appends `value` as compact JSON, strings escaped by serde_json; writing to a `Vec` cannot fail.
fn put(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// The timer's text as a JSON string, for the instants `timestamp::utc_micros` leaves to it.
struct Timestamp<'a, T>(&'a T);

impl<T: FormatTime> fmt::Display for Timestamp<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.format_time(&mut Writer::new(f))
    }
}

impl<T: FormatTime> Serialize for Timestamp<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<S, W> Layer<S> for JsonLine<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = SpanFields::default();
        attrs.record(&mut SpanVisitor(&mut fields));
        span.extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if let Some(fields) = span.extensions_mut().get_mut::<SpanFields>() {
            values.record(&mut SpanVisitor(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        thread_local! {
            static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        LINE.with(|line| {
            // An event logged while this thread writes a line (by the writer itself) gets a buffer of its own.
            let mut own = Vec::new();
            let mut borrowed = line.try_borrow_mut();
            let out = match borrowed.as_deref_mut() {
                Ok(line) => line,
                Err(_) => &mut own,
            };
            self.write_line(out, event, &ctx);
            // A failed write has nowhere to be reported; the fmt layer drops it too.
            let _ = self
                .make_writer
                .make_writer_for(event.metadata())
                .write_all(out);
            out.clear();
            if out.capacity() > KEPT_CAPACITY {
                out.shrink_to(KEPT_CAPACITY / 4);
            }
        });
    }
}

impl<W> JsonLine<W> {
    fn write_line<S>(&self, out: &mut Vec<u8>, event: &Event<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        // Events bridged from the `log` crate carry their real target and level in fields; the formatter prints
        // those, as here.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());

        out.extend_from_slice(b"{\"timestamp\":");
        match super::timestamp::utc_micros(std::time::SystemTime::now()) {
            Some(text) => {
                out.push(b'"');
                out.extend_from_slice(&text);
                out.push(b'"');
            }
            None => put(out, &Timestamp(&self.timer)),
        }
        out.extend_from_slice(b",\"level\":");
        put(out, meta.level().as_str());
        event.record(&mut EventVisitor(out));
        out.extend_from_slice(b",\"target\":");
        put(out, meta.target());

        // As the formatter: the explicit parent, else the current span, even for an event marked as a root.
        let span = event
            .parent()
            .and_then(|id| ctx.span(id))
            .or_else(|| ctx.lookup_current());
        if let Some(span) = span {
            out.extend_from_slice(b",\"span\":{");
            if let Some(fields) = span.extensions().get::<SpanFields>() {
                for (name, range) in &fields.by_name {
                    put(out, name);
                    out.push(b':');
                    out.extend_from_slice(&fields.text[range.clone()]);
                    out.push(b',');
                }
            }
            out.extend_from_slice(b"\"name\":");
            put(out, span.name());
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
    }
}

#[cfg(test)]
mod tests;
