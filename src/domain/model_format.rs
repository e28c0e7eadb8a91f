//! The formats a model input is rendered in, and why rendering in one may fail: what every module of the model
//! input (`model_input`, `native_input`, `native_turn`, `translate`, `transcript_text`) names, kept below all of them.

use serde::{Deserialize, Serialize};

/// The shape of the resumed model input; `openai-chat` is what the loop registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ModelInputFormat {
    #[default]
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "gemini")]
    Gemini,
}

impl ModelInputFormat {
    pub const ALL: [ModelInputFormat; 4] = [
        ModelInputFormat::OpenAiChat,
        ModelInputFormat::Anthropic,
        ModelInputFormat::OpenAiResponses,
        ModelInputFormat::Gemini,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelInputFormat::OpenAiChat => "openai-chat",
            ModelInputFormat::Anthropic => "anthropic",
            ModelInputFormat::OpenAiResponses => "openai-responses",
            ModelInputFormat::Gemini => "gemini",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.as_str() == s)
    }
}

/// Why a model input could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Corrupt(#[from] NotATranscript),
    /// The transcript holds something the asked format has no counterpart for (docs/design.md §14).
    #[error("{0}")]
    NotRepresentable(String),
}

/// The stored text is not a JSON array of messages: the row was written by something other than this service.
#[derive(Debug, thiserror::Error)]
#[error("the stored transcript is not a JSON array of messages: {0}")]
pub struct NotATranscript(pub String);
