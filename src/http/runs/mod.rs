//! Runs (`/v1/runs`): registration, reading, and the loop's cancel and complete, one module each; what registering a
//! turn shares with a later turn's (`http::turns`) is `registered_turn`.

mod reading;
mod register;
mod registered_turn;
mod status;

pub use reading::{get_run, run_view};
pub use register::{DeclaredToolBody, RegisterRun, register_run};
pub use registered_turn::{
    ExpiryBody, actor_of, answer_after_rules, meaning_hash, with_effects, within_limits,
};
pub use status::{cancel_run, complete_run};
