//! Redaction of tool arguments and results stored at the `redacted` privacy level (docs/design.md §6, ADR-064).
//!
//! Secrets with a known shape (provider API keys, tokens, JWTs, private keys, credentials in URLs) are masked,
//! e-mail addresses become `***`, and long texts are cut. This is a heuristic, not a guarantee: a secret without a
//! recognisable shape (a password in prose, a key of an unknown provider) passes through unchanged. Where that
//! matters, store events at the `metadata` level instead.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// Longest text kept, in characters (chars, not bytes).
pub const MAX_CHARS: usize = 2000;
/// Ends every text that was cut.
pub const TRUNCATION_MARK: &str = "… [truncated]";

const MASK: &str = "[REDACTED]";
const EMAIL_MASK: &str = "***";

/// Characters masked before cutting. Masks shrink text, so this is ample for MAX_CHARS of output while sparing a
/// large tool result a full scan; when masks shrink the window below MAX_CHARS the whole text is read after all.
const WINDOW_CHARS: usize = 4 * MAX_CHARS;

/// Masking is repeated until nothing changes, because a mask can give the text after it a word boundary it did not
/// have (`AKIA…sk-…`). Real texts settle in two rounds; the bound only guards against a pathological input.
const MAX_ROUNDS: usize = 8;

/// The secret shapes, each anchored on an ASCII word boundary: cheaper than a Unicode one and just as good here.
const TOKENS: &str = r"(?x)
    (?-u:\b)(?:
        sk-[A-Za-z0-9_-]{20,}                                       # OpenAI, Anthropic (sk-proj-, sk-ant-)
      | gh[pousr]_[A-Za-z0-9]{20,}                                  # GitHub tokens
      | github_pat_[A-Za-z0-9_]{20,}                                # GitHub fine-grained tokens
      | (?:AKIA|ASIA)[A-Z0-9]{16}                                   # AWS access key ids
      | AIza[A-Za-z0-9_-]{30,}                                      # Google API keys
      | xox[abposr]-[A-Za-z0-9-]{10,}                               # Slack tokens
      | eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*     # JWTs
    )";

/// Applied in this order. No pattern ends in an assertion (`\b`, `$`) but the PEM block's `\z`, whose header masked
/// text never holds, so a prefix of masked text holds no match the whole did not: this is what makes `redact`
/// idempotent on its own output.
static PATTERNS: LazyLock<[(Regex, &str); 6]> = LazyLock::new(|| {
    [
        // The whole userinfo goes: the user part is often a token itself (`https://x-access-token:…@`).
        (
            r"(?i)([a-z][a-z0-9+.-]*://)[^\s/?#@:]+:[^\s/?#@]+@",
            "${1}[REDACTED]@",
        ),
        // An unterminated block (a cut text) is masked to its end.
        (
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            MASK,
        ),
        // The parameter name stays so a reader still sees what was there; `_key`, `-signature`… count too.
        (
            r#"(?i)([?&;#](?:[a-z0-9]+[_.-])*(?:token|key|apikey|secret|password|passwd|pwd|pass|sig|signature|credential|auth|session|sessionid)=)[^&;#\s"'<>]+"#,
            "${1}[REDACTED]",
        ),
        (
            r"((?:Bearer|bearer|BEARER)\s+)[A-Za-z0-9._~+/-]{20,}=*",
            "${1}[REDACTED]",
        ),
        (TOKENS, MASK),
        // Last, so that the userinfo of a URL is not mistaken for an address.
        (
            r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
            EMAIL_MASK,
        ),
    ]
    .map(|(pattern, mask)| {
        let regex = Regex::new(pattern).expect("the redaction patterns are valid regexes");
        (regex, mask)
    })
});

/// Masks secret shapes, replaces e-mail addresses with `***`, and cuts text over MAX_CHARS characters to MAX_CHARS
/// characters followed by TRUNCATION_MARK.
///
/// Masking comes first, so a secret straddling the cut is never half-shown, and the cut never splits a mask.
/// Redacting an already redacted text changes nothing.
pub fn redact(text: &str) -> String {
    // Our own output: its body is masked already and within the limit, so it is not cut a second time.
    if let Some(body) = text.strip_suffix(TRUNCATION_MARK)
        && body.chars().count() <= MAX_CHARS
    {
        let masked = mask(body);
        return match cut(&masked) {
            Some(kept) => kept,
            None => masked + TRUNCATION_MARK,
        };
    }
    let window = window(text);
    let masked = mask(window);
    if let Some(kept) = cut(&masked) {
        return kept;
    }
    if window.len() == text.len() {
        return masked;
    }
    let masked = mask(text);
    cut(&masked).unwrap_or(masked)
}

/// The first WINDOW_CHARS characters, extended to the next whitespace. Every shape but a PEM block is free of
/// whitespace, so none straddles the window's end, and a PEM block cut there is masked to the end anyway.
fn window(text: &str) -> &str {
    let Some((start, _)) = text.char_indices().nth(WINDOW_CHARS) else {
        return text;
    };
    match text[start..].find(char::is_whitespace) {
        Some(offset) => &text[..start + offset],
        None => text,
    }
}

/// Applies every pattern until the text no longer changes.
fn mask(text: &str) -> String {
    let mut current = match mask_once(text) {
        Cow::Borrowed(_) => return text.to_owned(),
        Cow::Owned(masked) => masked,
    };
    for _ in 0..MAX_ROUNDS {
        match mask_once(&current) {
            Cow::Owned(next) if next != current => current = next,
            _ => break,
        }
    }
    current
}

fn mask_once(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for (pattern, mask) in PATTERNS.iter() {
        if let Cow::Owned(replaced) = pattern.replace_all(&out, *mask) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// The text cut to MAX_CHARS characters and marked, or `None` when it is short enough. A cut that would fall inside
/// a mask moves to before it: half a mask (`?token=[RED`) would be masked again by a second pass.
fn cut(text: &str) -> Option<String> {
    let (mut end, _) = text.char_indices().nth(MAX_CHARS)?;
    for mask in [MASK, EMAIL_MASK] {
        let inside = (1..mask.len()).find(|&back| {
            end.checked_sub(back)
                .and_then(|start| text.get(start..))
                .is_some_and(|rest| rest.starts_with(mask))
        });
        if let Some(back) = inside {
            end -= back;
            break;
        }
    }
    Some(format!("{}{TRUNCATION_MARK}", &text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn masks(secret: &str) {
        let out = redact(&format!("before {secret} after"));
        assert_eq!(out, "before [REDACTED] after", "{secret}");
    }

    #[test]
    fn an_openai_or_anthropic_key_is_masked() {
        masks("sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD");
        masks("sk-proj-Ab3dEfGh1jKlMnOpQrStUvWx_yz-0123456789");
        masks("sk-ant-api03-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789-AbCdEf");
    }

    #[test]
    fn a_github_token_is_masked() {
        for prefix in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"] {
            masks(&format!("{prefix}16C7e42F292c6912E7710c838347Ae178B4a"));
        }
        masks(
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01",
        );
    }

    #[test]
    fn an_aws_access_key_id_is_masked() {
        masks("AKIAIOSFODNN7EXAMPLE");
        masks("ASIAY34FZKBOKMUTVV7A");
    }

    #[test]
    fn a_google_api_key_is_masked() {
        masks("AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe");
    }

    #[test]
    fn a_slack_token_is_masked() {
        masks("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx");
        masks("xoxp-123456789012-abcdefghij");
    }

    #[test]
    fn a_jwt_is_masked() {
        masks(
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        );
    }

    #[test]
    fn a_credential_in_a_query_string_is_masked_and_its_name_kept() {
        let url =
            "https://x.test/cb?page=2&token=abc123&api_key=k1;X-Amz-Signature=f00#access_token=zz";
        assert_eq!(
            redact(url),
            "https://x.test/cb?page=2&token=[REDACTED]&api_key=[REDACTED];X-Amz-Signature=[REDACTED]#access_token=[REDACTED]"
        );
        assert_eq!(redact("\"u\":\"/a?sig=s1\""), "\"u\":\"/a?sig=[REDACTED]\"");
    }

    #[test]
    fn a_user_and_password_in_a_url_are_masked() {
        assert_eq!(
            redact("postgres://app:hunter2@db.internal:5432/main"),
            "postgres://[REDACTED]@db.internal:5432/main"
        );
    }

    #[test]
    fn a_private_key_block_is_masked() {
        masks("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----");
        assert_eq!(
            redact("k: -----BEGIN PRIVATE KEY-----\nMIIE"),
            "k: [REDACTED]"
        );
    }

    #[test]
    fn a_bearer_token_is_masked() {
        assert_eq!(
            redact("Authorization: Bearer abcDEF123456ghiJKL789mno=="),
            "Authorization: Bearer [REDACTED]"
        );
    }

    #[test]
    fn an_email_address_becomes_three_stars() {
        assert_eq!(
            redact("write to jane.doe+x@mail.example.org."),
            "write to ***."
        );
    }

    #[test]
    fn ordinary_prose_is_left_alone() {
        let prose = "Risk-assessment and task-based sk-learn notes: ask @maria, see https://example.com/docs?page=2#key \
                     or the monkey=banana key. The AKIA prefix, eyJ, and ghp_ alone are harmless. Größe: 3 × 4.";
        assert_eq!(redact(prose), prose);
    }

    #[test]
    fn text_over_two_thousand_characters_is_cut_and_marked() {
        let out = redact(&"a".repeat(MAX_CHARS + 1));
        assert_eq!(out, format!("{}{TRUNCATION_MARK}", "a".repeat(MAX_CHARS)));
        assert_eq!(redact(&"a".repeat(MAX_CHARS)), "a".repeat(MAX_CHARS));
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character_boundary() {
        let out = redact(&"ü€😀".repeat(MAX_CHARS));
        assert_eq!(
            out.chars().count(),
            MAX_CHARS + TRUNCATION_MARK.chars().count()
        );
        assert!(out.starts_with("ü€😀ü€😀"));
    }

    #[test]
    fn a_secret_straddling_the_cut_is_never_half_shown() {
        let text = format!(
            "{} ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "a".repeat(MAX_CHARS - 6)
        );
        assert_eq!(
            redact(&text),
            format!("{} {TRUNCATION_MARK}", "a".repeat(MAX_CHARS - 6))
        );
    }

    #[test]
    fn a_long_text_that_masking_shrinks_is_read_past_the_window() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let out = redact(&vec![jwt; 400].join(" "));
        assert!(out.ends_with(TRUNCATION_MARK) && !out.contains("eyJ"));
        assert!(out.chars().count() >= MAX_CHARS);
    }

    /// A secret in some shape; `§` marks where its secret part starts. Yields the secret and a fragment (what precedes
    /// `§` plus one character) that must never appear in the output: surrounding text is drawn from `[a-z ,.!\n]`.
    fn planted() -> impl Strategy<Value = (String, String)> {
        prop_oneof![
            "sk-§[A-Z0-9][A-Za-z0-9]{23,47}",
            "sk-proj-§[A-Z0-9][A-Za-z0-9_-]{40,80}",
            "sk-ant-api03-§[A-Z0-9][A-Za-z0-9_-]{80,95}",
            "gh[pousr]_§[A-Za-z0-9]{36}",
            "github_pat_§[A-Za-z0-9_]{70,82}",
            "(AKIA|ASIA)§[A-Z0-9]{16}",
            "AIza§[A-Za-z0-9_-]{35}",
            "xox[abposr]-§[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}",
            "eyJ§[A-Za-z0-9_-]{10,40}\\.eyJ[A-Za-z0-9_-]{10,80}\\.[A-Za-z0-9_-]{20,60}",
            "https://api\\.example\\.com/v1\\?(token|api_key|access_token|sig|X-Amz-Signature|client_secret)=§[A-Za-z0-9%]{8,40}",
            "https://§[A-Z][a-z]{2,8}:[A-Za-z0-9]{6,12}@db\\.example\\.com/",
            "[a-z]{1,8}(\\.[a-z]{1,8})?§@[a-z]{2,8}\\.(com|org|ch)",
        ]
        .prop_map(|marked: String| {
            let (head, tail) = marked.split_once('§').expect("every shape marks its secret part");
            let first = tail.chars().next().expect("the secret part is not empty");
            (format!("{head}{tail}"), format!("{head}{first}"))
        })
    }

    /// Any text: printable ASCII (rich in `@ : / ? = &`), any Unicode, and planted secrets, glued together.
    fn any_text() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            "[ -~\n]{0,400}",
            "\\PC{0,60}",
            planted().prop_map(|(secret, _)| secret),
            Just(TRUNCATION_MARK.to_owned()),
        ];
        prop::collection::vec(part, 0..30).prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn a_planted_secret_never_survives(
            (secret, fragment) in planted(),
            before in "[a-z ,.!\n]{0,2100}",
            after in "[a-z ,.!\n]{0,300}",
        ) {
            let out = redact(&format!("{before} {secret} {after}"));
            prop_assert!(!out.contains(&fragment), "{fragment:?} survived in {out:?}");
        }

        #[test]
        fn the_output_is_never_longer_than_the_limit_and_the_mark(text in any_text()) {
            let limit = MAX_CHARS + TRUNCATION_MARK.chars().count();
            prop_assert!(redact(&text).chars().count() <= limit);
        }

        #[test]
        fn redacting_redacted_text_changes_nothing(text in any_text()) {
            let once = redact(&text);
            prop_assert_eq!(redact(&once), once);
        }
    }
}
