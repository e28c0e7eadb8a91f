//! approval-resume: resumes AI-agent runs suspended for human approval, telling the model who declined.

/// The API keys found live lately, whose decision bodies are read before their check.
pub mod admitted_keys;
/// The allocator's settings, applied by the binary before it starts.
pub mod allocator;
/// The router, its layers, and serving.
pub mod app;
/// One instance wired together: what `main` and the API tests build the service through.
pub mod application;
/// Approval links: made for a person who may decide a waiting turn, found again from their URL.
pub mod approval_links;
/// The `clients` and `migrate` subcommands.
pub mod commands;
/// The command line and every setting.
pub mod config;
/// Delivering events after commit: the feed's wake-ups and cursor, webhooks.
pub mod delivery;
/// The pure core: texts, digest, rules, privacy, formats.
pub mod domain;
/// The tool-executor client of the approve path.
pub mod executor;
/// Handlers, extractors and the problem+json error.
pub mod http;
/// API keys: generation and hashing.
pub mod keys;
/// Accepting connections, bounded in number and in how long a request header may take.
pub mod listen;
/// Prometheus metrics.
pub mod metrics;
/// Recording decisions and resuming runs.
pub mod resume;
/// Encryption at rest: the key ring and the sealing of one value.
pub mod sealing;
/// The state every handler shares, apart from the router so that neither depends on the other.
pub mod state;
/// Postgres: pool, migrations, queries.
pub mod storage;
/// Logging and the request span.
pub mod telemetry;

/// The public tokens (docs/design.md §3), at the crate root for consumers that match on them.
pub use domain::vocabulary;
