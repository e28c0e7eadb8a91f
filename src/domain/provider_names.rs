//! The model providers' rule for tool names, narrower than the service's (docs/design.md §3, §19): a run may call
//! `github.create_issue` (the MCP gate's `{server}.{tool}`), which OpenAI, Anthropic and Google refuse. A run answers
//! in its own format with the names it was registered with; a translation (`?format=` another format) would hand a
//! provider a name it refuses, so it is refused instead, naming the tool.

use std::sync::LazyLock;

use regex::Regex;

use super::model_format::{ModelInputFormat, RenderError};

/// The rule every provider format shares for a function's name (OpenAI chat and Responses, Anthropic, Gemini).
pub const PROVIDER_TOOL_NAME_RULE: &str = "^[A-Za-z0-9_-]{1,64}$";

static PROVIDER_TOOL_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(PROVIDER_TOOL_NAME_RULE).expect("the providers' tool-name pattern compiles")
});

/// Whether a provider accepts `name` as a tool's name.
pub fn fits_providers(name: &str) -> bool {
    PROVIDER_TOOL_NAME.is_match(name)
}

/// `NotRepresentable` naming the first of `names` that `target`'s provider refuses; `Ok` when it takes them all.
pub fn refuse_unfit_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
    target: ModelInputFormat,
) -> Result<(), RenderError> {
    match names.into_iter().find(|name| !fits_providers(name)) {
        Some(name) => Err(RenderError::NotRepresentable(format!(
            "tool name {name:?} does not match {PROVIDER_TOOL_NAME_RULE}, the rule for tool names in {}; ask for the \
             run's own format",
            target.as_str()
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotted_or_longer_name_breaks_the_providers_rule_and_the_refusal_names_it() {
        assert!(fits_providers(&"x".repeat(64)));
        for name in ["github.create_issue", &"x".repeat(65)] {
            assert!(!fits_providers(name));
            let error = refuse_unfit_names(["read_page", name], ModelInputFormat::Gemini)
                .unwrap_err()
                .to_string();
            assert!(
                error.starts_with(&format!("tool name {name:?} does not match"))
                    && error.contains("in gemini"),
                "{error}"
            );
        }
    }

    #[test]
    fn names_within_the_providers_rule_pass() {
        assert!(
            refuse_unfit_names(["read_page", "send-mail"], ModelInputFormat::Anthropic).is_ok()
        );
    }
}
