//! What encryption at rest (docs/design.md §11) adds to a decision: the values a deny and an approve open and seal,
//! with ENCRYPTION_KEYS and without (where the same steps only choose the clear column). Run with
//! `cargo bench --bench sealing`; BENCHMARKS.md puts the figures beside the service's CPU per decision.

use std::hint::black_box;

use approval_resume::sealing::Sealer;
use approval_resume::storage::sealed::{self, Column, Row};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use uuid::Uuid;

#[path = "decisions/transcript.rs"]
#[allow(dead_code)]
mod synthetic;

const KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// One decision's stored values: the transcript, one call's arguments, its result content and its tool event.
struct Values {
    transcript: String,
    arguments: String,
    content: String,
}

fn values(messages: usize) -> Values {
    let transcript = synthetic::transcript(messages, 1, "r");
    let arguments = transcript
        .last()
        .and_then(|turn| turn["tool_calls"][0]["function"]["arguments"].as_str())
        .unwrap_or("{}")
        .to_owned();
    Values {
        transcript: serde_json::to_string(&transcript).unwrap(),
        arguments,
        content: "The run owner declined this call; do not retry it.".repeat(2),
    }
}

/// A deny: opens the transcript and the call's arguments, seals the denial result and the tool event (level
/// `full`: arguments and result).
fn deny(sealer: &Sealer, stored: &[sealed::Stored; 2], values: &Values, run: Uuid) {
    let at = Row::call(run, 0, 0);
    let [transcript, arguments] = stored;
    black_box(
        sealed::open(
            sealer,
            Column::Transcript,
            Row::run(run),
            transcript.clear.clone(),
            transcript.sealed.as_deref(),
        )
        .unwrap(),
    );
    black_box(
        sealed::open(
            sealer,
            Column::CallArguments,
            at,
            arguments.clear.clone(),
            arguments.sealed.as_deref(),
        )
        .unwrap(),
    );
    black_box(sealed::seal(
        sealer,
        Column::CallContent,
        at,
        &values.content,
    ));
    black_box(sealed::seal(
        sealer,
        Column::EventArguments,
        at,
        &values.arguments,
    ));
    black_box(sealed::seal(
        sealer,
        Column::EventResult,
        at,
        &values.content,
    ));
}

/// An approve: as a deny, plus the calls read once more before the executors run and the result stored apart.
fn approve(sealer: &Sealer, stored: &[sealed::Stored; 2], values: &Values, run: Uuid) {
    let at = Row::call(run, 0, 0);
    let arguments = &stored[1];
    black_box(
        sealed::open(
            sealer,
            Column::CallArguments,
            at,
            arguments.clear.clone(),
            arguments.sealed.as_deref(),
        )
        .unwrap(),
    );
    deny(sealer, stored, values, run);
}

fn per_decision(c: &mut Criterion) {
    let run = Uuid::new_v4();
    for (name, step) in [
        (
            "deny",
            deny as fn(&Sealer, &[sealed::Stored; 2], &Values, Uuid),
        ),
        ("approve", approve),
    ] {
        let mut group = c.benchmark_group(format!("sealing_per_{name}"));
        for messages in [10, 100, 1000] {
            let values = values(messages);
            group.throughput(Throughput::Bytes(values.transcript.len() as u64));
            for (keys, sealer) in [
                ("no_keys", Sealer::none()),
                ("keys", Sealer::parse(KEYS).unwrap()),
            ] {
                let stored = [
                    sealed::seal(
                        &sealer,
                        Column::Transcript,
                        Row::run(run),
                        &values.transcript,
                    ),
                    sealed::seal(
                        &sealer,
                        Column::CallArguments,
                        Row::call(run, 0, 0),
                        &values.arguments,
                    ),
                ];
                group.bench_with_input(
                    BenchmarkId::new(keys, format!("{messages}_messages")),
                    &stored,
                    |b, stored| b.iter(|| step(&sealer, stored, &values, run)),
                );
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = per_decision
}
criterion_main!(benches);
