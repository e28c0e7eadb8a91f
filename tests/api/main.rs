//! API tests against a real Postgres: each `#[sqlx::test]` gets a fresh, migrated database.

mod approvals;
mod auth;
mod concurrency;
mod decisions;
mod executors;
mod formats;
mod logs;
mod notifications;
mod openapi;
mod ops;
mod public_surface;
mod registration;
mod support;
mod turns;
