//! Micro-benchmarks of the pure core (criterion): the denial text, the turn digest, the privacy filter and the
//! model-input formats. Run with `cargo bench --bench core`; `bash bench/run.sh` runs them too, briefly.

use std::hint::black_box;

use approval_resume::domain::model_input::{self, ModelInputFormat};
use approval_resume::domain::privacy;
use approval_resume::domain::results::{self, ToolResult};
use approval_resume::domain::transcript::{self, PendingCall};
use approval_resume::domain::transcript_text::TranscriptText;
use approval_resume::vocabulary::{DecidedBy, DenialReason, Effect, PrivacyLevel};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;

#[path = "decisions/transcript.rs"]
#[allow(dead_code)]
mod synthetic;

fn denial_text(c: &mut Criterion) {
    let mut group = c.benchmark_group("denial_text");
    let cases = [
        ("run_owner", Effect::Write, DecidedBy::RunOwner, None),
        (
            "other_user_variant",
            Effect::Write,
            DecidedBy::OtherUser,
            Some(DenialReason::Variant),
        ),
        (
            "unknown_read_skip",
            Effect::Read,
            DecidedBy::Unknown,
            Some(DenialReason::Skip),
        ),
    ];
    for (name, effect, decided_by, reason) in cases {
        group.bench_function(name, |b| {
            b.iter(|| {
                results::denial_text(black_box(synthetic::WRITE_TOOL), effect, decided_by, reason)
            })
        });
    }
    group.finish();
}

fn pending_calls(messages: &[Value]) -> Vec<PendingCall> {
    transcript::validate(messages, &Default::default()).expect("the synthetic transcript is valid")
}

fn turn_digest(c: &mut Criterion) {
    let mut group = c.benchmark_group("turn_digest");
    for calls in [1, 4, 16] {
        let pending = pending_calls(&synthetic::transcript(3, calls, "r"));
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(calls),
            &pending,
            |b, pending| b.iter(|| transcript::turn_digest(black_box(pending))),
        );
    }
    group.finish();
}

fn denied(pending: &[PendingCall]) -> Vec<ToolResult> {
    pending
        .iter()
        .map(|call| {
            results::denied(
                &call.id,
                &call.name,
                Effect::Write,
                DecidedBy::RunOwner,
                None,
            )
        })
        .collect()
}

fn privacy_filter(c: &mut Criterion) {
    let mut group = c.benchmark_group("privacy_tool_event");
    let pending = pending_calls(&synthetic::transcript(3, 1, "r"));
    let denial = denied(&pending).remove(0);
    // A long executor answer with secrets in it: what redaction is for (and where it cuts at 2,000 characters).
    let long_answer = ToolResult {
        content: "Deployed with key sk-proj-abcdefghijklmnopqrstuvwxyz0123 for ops@example.org. "
            .repeat(120),
        ..denial.clone()
    };
    for (name, result) in [("denial", &denial), ("answer_10kb", &long_answer)] {
        for level in [PrivacyLevel::Redacted, PrivacyLevel::Full] {
            group.bench_with_input(
                BenchmarkId::new(level.as_str(), name),
                result,
                |b, result| {
                    b.iter(|| {
                        privacy::tool_event(
                            level,
                            black_box(&pending[0].arguments),
                            black_box(result),
                            DecidedBy::RunOwner,
                        )
                    })
                },
            );
        }
    }
    group.finish();
}

fn render(c: &mut Criterion) {
    let mut group = c.benchmark_group("model_input_render");
    for messages in [10, 1_000, 10_000] {
        let transcript = synthetic::transcript(messages, 1, "r");
        let results = denied(&pending_calls(&transcript));
        group.throughput(Throughput::Elements(messages as u64));
        if messages >= 10_000 {
            // Milliseconds per render: ten samples are enough, and keep the run within its measurement time.
            group.sample_size(10);
        }
        for format in [
            ModelInputFormat::OpenAiChat,
            ModelInputFormat::Anthropic,
            ModelInputFormat::OpenAiResponses,
        ] {
            group.bench_with_input(
                BenchmarkId::new(format.as_str(), messages),
                &(&transcript, &results),
                |b, (transcript, results)| {
                    b.iter(|| model_input::render(format, black_box(transcript), results, &[]))
                },
            );
        }
    }
    group.finish();
}

/// What a deny's answer costs: the model input as the handler sends it, JSON text pieces rendered from the stored
/// transcript's text (`render_text`; `openai-chat` splices the text in, the other formats parse and translate it),
/// for the large transcript.
fn render_and_serialize(c: &mut Criterion) {
    let mut group = c.benchmark_group("model_input_render_to_json");
    group.sample_size(10);
    let messages = 10_000;
    let transcript = synthetic::transcript(messages, 1, "r");
    let stored = TranscriptText::of(&transcript);
    let results = denied(&pending_calls(&transcript));
    group.throughput(Throughput::Elements(messages as u64));
    for format in [
        ModelInputFormat::OpenAiChat,
        ModelInputFormat::Anthropic,
        ModelInputFormat::OpenAiResponses,
    ] {
        group.bench_with_input(
            BenchmarkId::new(format.as_str(), messages),
            &(&stored, &results),
            |b, (stored, results)| {
                b.iter(|| {
                    let pieces = model_input::render_text(format, black_box(stored), results, &[])
                        .expect("a stored transcript renders");
                    pieces.iter().map(|piece| piece.len()).sum::<usize>()
                })
            },
        );
    }
    group.finish();
}

/// What a decision with an API key checks before its body (src/http/decision_credential.rs): the
/// key's form and whether this instance found it live lately, among 1,000 remembered keys.
fn key_before_body(c: &mut Criterion) {
    use approval_resume::admitted_keys::AdmittedKeys;
    use approval_resume::keys;
    let admitted = AdmittedKeys::default();
    let mut found = Vec::new();
    for _ in 0..1_000 {
        let (key, _) = keys::generate();
        admitted.admitted(keys::hash(&key));
        found.push(key);
    }
    let key = &found[500];
    let hash = keys::hash(key);
    c.bench_function("key_before_body/admitted", |b| {
        b.iter(|| {
            keys::is_well_formed(black_box(key))
                && AdmittedKeys::clone(black_box(&admitted)).recently_admitted(black_box(&hash))
        })
    });
}

criterion_group!(
    core,
    key_before_body,
    denial_text,
    turn_digest,
    privacy_filter,
    render,
    render_and_serialize
);
criterion_main!(core);
