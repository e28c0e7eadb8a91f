//! The HTTP layer: one module per resource. Handlers extract, call `domain`, `resume` and `storage`, and map the
//! outcome to a response. Only this layer knows status codes.

pub mod approvals;
pub mod body;
pub mod body_budget;
pub mod body_ledger;
pub mod charged_body;
pub mod claims;
pub mod cors;
pub mod decision_body;
pub mod decision_credential;
pub mod decision_tokens;
pub mod decisions;
pub mod detach;
pub mod error;
pub mod events_feed;
pub mod extract;
pub mod format_members;
pub mod integer;
pub mod json_pieces;
pub mod large_body_threads;
pub mod ops;
pub mod remembered_rules;
pub mod request_id;
pub mod results;
pub mod run_events;
pub mod runs;
pub mod turns;
pub mod ui;
pub mod users;
pub mod views;
pub mod visible;
pub mod webhooks;
pub mod worker_state;
