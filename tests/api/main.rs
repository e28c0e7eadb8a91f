//! API tests against a real Postgres: each test gets a fresh, migrated database of its own (`TestDatabase`).

mod approvals;
mod auth;
mod concurrency;
mod cors;
#[path = "../common/database.rs"]
mod database;
mod decisions;
mod executors;
mod formats;
mod hostile;
mod logs;
mod notifications;
mod openapi;
mod ops;
mod public_surface;
mod registration;
mod spec_shape;
mod support;
mod tokens;
mod turns;
