//! API tests against a real Postgres: each test gets a fresh, migrated database of its own (`TestDatabase`).

mod approvals;
mod auth;
mod batched_denies;
mod concurrency;
mod cors;
#[path = "../common/database.rs"]
mod database;
mod decisions;
mod encryption;
mod events;
mod executors;
mod expiry;
mod feed_fairness;
mod formats;
mod gate;
mod hostile;
mod logs;
mod native_formats;
mod openapi;
mod ops;
mod public_surface;
mod registration;
mod retention;
mod schema_rules;
mod spec_shape;
mod support;
mod tokens;
mod transcript_text;
mod turns;
mod verdicts;
mod webhook_fairness;
mod webhook_secrets;
mod webhook_statements;
mod webhooks;
mod worker_state;
