//! A run's `source` (docs/design.md §2): an optional label saying where the run came from (`mcp:github`, `chat`,
//! `ai-tasks`). It is shown in the run view, the inbox, events and the approval mail and page, so it is held to a
//! narrow alphabet: nothing in it can start a header, a line or markup.

/// The longest label.
pub const MAX_LEN: usize = 64;

/// Whether `label` matches `^[A-Za-z0-9_.:-]{1,64}$`.
pub fn is_valid_source(label: &str) -> bool {
    (1..=MAX_LEN).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_letters_digits_and_four_marks_up_to_64() {
        for label in ["mcp:github", "chat", "ai-tasks", "a.b_c", &"x".repeat(64)] {
            assert!(is_valid_source(label), "{label:?}");
        }
        for label in [
            "",
            &"x".repeat(65),
            "mcp github",
            "chat\r\nBcc: x",
            "<b>",
            "café",
            "a/b",
        ] {
            assert!(!is_valid_source(label), "{label:?}");
        }
    }
}
