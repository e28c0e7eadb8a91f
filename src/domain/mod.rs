//! The pure core: texts, digests, rules and formats. No I/O, no clock, nothing of HTTP or SQL.

pub mod authorize;
pub mod event_payloads;
pub mod exact_numbers;
pub mod gate;
pub mod json_equality;
pub mod limits;
pub mod model_format;
pub mod model_input;
pub mod native_input;
pub mod native_turn;
pub mod privacy;
pub mod redact;
pub mod released;
pub mod remembered;
pub mod results;
pub mod scopes;
pub mod secret;
pub mod steps;
pub mod token_view;
pub mod transcript;
pub mod transcript_text;
pub mod translate;
pub mod value_text;
pub mod verdicts;
pub mod vocabulary;
