//! The text of the mail that tells a person of a waiting turn (docs/design.md §20). It names who started the run,
//! where it came from (its `source`), the tools and when the turn expires, and carries the person's link; never
//! arguments or results: a mail leaves the reach of encryption at rest and of the purge.

use chrono::{DateTime, Utc};

/// What a mail says.
pub struct MailFacts<'a> {
    /// The run owner's username, or `None` for a service run or an owner the service does not know.
    pub owner: Option<&'a str>,
    pub owner_uid: i64,
    /// Where the run came from (docs/design.md §2), if it said: a label of `^[A-Za-z0-9_.:-]{1,64}$`
    /// (`domain::run_source`), so it can neither end a header nor start a line.
    pub source: Option<&'a str>,
    /// The turn's tools, in its order, each as often as it is called.
    pub tools: &'a [String],
    pub run_id: &'a str,
    pub turn_expires_at: Option<DateTime<Utc>>,
    pub link: &'a str,
    pub link_expires_at: DateTime<Utc>,
}

/// A name a person chose (a username) as one line of a mail: every control character (CR and LF included, which
/// would start a header or a line of the body's own) becomes a space.
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

/// How many tool names a subject line names before "and n more".
const TOOLS_IN_SUBJECT: usize = 3;

/// The mail's subject and plain-text body.
pub fn compose(facts: &MailFacts<'_>) -> (String, String) {
    let tools = distinct(facts.tools);
    let named: Vec<&str> = tools.iter().take(TOOLS_IN_SUBJECT).copied().collect();
    let more = tools.len().saturating_sub(TOOLS_IN_SUBJECT);
    let from = facts
        .source
        .map_or_else(String::new, |source| format!(" ({source})"));
    let subject = if more == 0 {
        format!("Approval requested{from}: {}", named.join(", "))
    } else {
        format!(
            "Approval requested{from}: {} and {more} more",
            named.join(", ")
        )
    };
    let source_line = facts
        .source
        .map_or_else(String::new, |source| format!("Source: {source}\r\n"));
    let who = match (facts.owner, facts.owner_uid) {
        (_, 0) => "A service run (no person)".to_owned(),
        (Some(owner), _) => one_line(owner),
        (None, uid) => format!("User {uid}"),
    };
    let expires = facts
        .turn_expires_at
        .map_or_else(|| "never".to_owned(), |at| at.to_rfc3339());
    let body = format!(
        "{who} started a run that waits for a decision before it calls: {tools}.\r\n\
         \r\n\
         Open this link to see the request and decide. It is yours alone: whoever holds it decides as you, so do \
         not forward it.\r\n\
         {link}\r\n\
         \r\n\
         Run: {run}\r\n\
         {source_line}\
         The request expires: {expires}\r\n\
         The link expires: {link_expires}\r\n\
         \r\n\
         You get this mail because the request named you. It holds no arguments or results: the page shows what \
         you may see of them.\r\n",
        tools = tools.join(", "),
        link = facts.link,
        run = facts.run_id,
        link_expires = facts.link_expires_at.to_rfc3339(),
    );
    (subject, body)
}

/// The tool names once each, in their first order.
fn distinct(tools: &[String]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::with_capacity(tools.len());
    for tool in tools {
        if !seen.contains(&tool.as_str()) {
            seen.push(tool);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(tools: &'a [String], owner: Option<&'a str>, owner_uid: i64) -> MailFacts<'a> {
        MailFacts {
            owner,
            owner_uid,
            source: None,
            tools,
            run_id: "0b0e9c9e-1f4e-4a57-9c59-3c0c5c7f1d10",
            turn_expires_at: None,
            link: "https://approvals.example.com/approve/0b0e9c9e-1f4e-4a57-9c59-3c0c5c7f1d10/secret",
            link_expires_at: DateTime::from_timestamp(1_800_000_000, 0).expect("a time"),
        }
    }

    #[test]
    fn a_mail_names_the_owner_the_tools_once_each_and_the_link() {
        let tools = vec![
            "update_page".to_owned(),
            "update_page".to_owned(),
            "github.merge".to_owned(),
        ];
        let (subject, body) = compose(&facts(&tools, Some("ada"), 7));
        assert_eq!(subject, "Approval requested: update_page, github.merge");
        assert!(body.starts_with("ada started a run that waits for a decision before it calls: update_page, github.merge.\r\n"));
        assert!(body.contains("\r\nhttps://approvals.example.com/approve/"));
        assert!(body.contains("The request expires: never\r\n"));
    }

    #[test]
    fn a_username_with_line_breaks_stays_on_its_line() {
        let tools = vec!["x".to_owned()];
        let owner = "Mallory\r\n\r\nUrgent: open http://evil.example/approve/x/y";
        let (_, body) = compose(&facts(&tools, Some(owner), 7));
        assert!(
            body.starts_with(
                "Mallory    Urgent: open http://evil.example/approve/x/y started a run"
            )
        );
        assert_eq!(
            body.matches("\r\nhttp").count(),
            1,
            "one link on a line of its own: {body}"
        );
        assert_eq!(
            one_line("arne\r\nBcc: victim@evil.test"),
            "arne  Bcc: victim@evil.test"
        );
    }

    #[test]
    fn a_mail_names_the_runs_source_in_its_subject_and_body() {
        let tools = vec!["github.merge".to_owned()];
        let labelled = MailFacts {
            source: Some("mcp:github"),
            ..facts(&tools, Some("ada"), 7)
        };
        let (subject, body) = compose(&labelled);
        assert_eq!(subject, "Approval requested (mcp:github): github.merge");
        assert!(body.contains("\r\nSource: mcp:github\r\n"), "{body}");
        let (subject, body) = compose(&facts(&tools, Some("ada"), 7));
        assert_eq!(subject, "Approval requested: github.merge");
        assert!(!body.contains("Source:"), "{body}");
    }

    #[test]
    fn a_subject_names_three_tools_then_counts_the_rest() {
        let tools: Vec<String> = ["a", "b", "c", "d", "e"].map(str::to_owned).to_vec();
        let (subject, _) = compose(&facts(&tools, None, 0));
        assert_eq!(subject, "Approval requested: a, b, c and 2 more");
    }

    #[test]
    fn a_service_run_and_an_unknown_owner_are_named_without_a_username() {
        let tools = vec!["x".to_owned()];
        assert!(
            compose(&facts(&tools, None, 0))
                .1
                .starts_with("A service run (no person) started")
        );
        assert!(
            compose(&facts(&tools, None, 9))
                .1
                .starts_with("User 9 started")
        );
    }
}
