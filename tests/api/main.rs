//! API tests against a real Postgres: each test gets a fresh, migrated database of its own (`TestDatabase`).

mod approvals;
mod auth;
mod batched_denies;
mod body_budget;
mod claims;
mod concurrency;
mod cors;
mod decision_tokens;
mod decisions;
mod encryption;
mod error_table;
mod event_feed;
mod executors;
mod expiry;
mod feed_fairness;
mod formats;
mod gate;
mod hostile;
mod link_page;
mod links;
mod logs;
mod long_texts;
mod native_formats;
mod notify;
mod null_members;
mod openapi;
mod ops;
mod public_surface;
mod registration;
mod remembered_races;
mod remembered_rules;
mod retention;
mod rule_holes;
mod rule_keys;
mod rule_views;
mod run_keys;
mod schema_rules;
mod session_settings;
mod spec_shape;
mod token_privacy;
mod tool_names;
mod transcript_text;
mod turns;
mod verdicts;
mod webhook_fairness;
mod webhook_secrets;
mod webhook_statements;
mod webhooks;
mod worker_calls;
mod worker_races;
mod worker_state;

/// The support every test binary shares (tests/support/), included once.
#[path = "../support/mod.rs"]
mod shared;
/// The in-process service every module here tests, as `crate::support`.
use shared::app as support;
use shared::database;
