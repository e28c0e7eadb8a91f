//! The scopes an API client may hold; each route requires one.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Scope {
    /// Register runs, append turns, cancel and complete them.
    #[serde(rename = "runs:write")]
    RunsWrite,
    /// Read runs, their model input and their events.
    #[serde(rename = "runs:read")]
    RunsRead,
    /// Keep backend users in step with the host application.
    #[serde(rename = "users:write")]
    UsersWrite,
    /// Post decisions on behalf of a named backend user.
    #[serde(rename = "decisions:write")]
    DecisionsWrite,
    /// Post decisions with no decider uid (`decided_by: unknown`).
    #[serde(rename = "decisions:anonymous")]
    DecisionsAnonymous,
    /// List the runs waiting for a user's approval.
    #[serde(rename = "approvals:read")]
    ApprovalsRead,
    /// Scrape `/metrics`.
    #[serde(rename = "metrics:read")]
    MetricsRead,
}

impl Scope {
    pub const ALL: [Scope; 7] = [
        Scope::RunsWrite,
        Scope::RunsRead,
        Scope::UsersWrite,
        Scope::DecisionsWrite,
        Scope::DecisionsAnonymous,
        Scope::ApprovalsRead,
        Scope::MetricsRead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::RunsWrite => "runs:write",
            Scope::RunsRead => "runs:read",
            Scope::UsersWrite => "users:write",
            Scope::DecisionsWrite => "decisions:write",
            Scope::DecisionsAnonymous => "decisions:anonymous",
            Scope::ApprovalsRead => "approvals:read",
            Scope::MetricsRead => "metrics:read",
        }
    }

    /// What holding the scope allows, in words for the command line's help and the README.
    pub fn allows(self) -> &'static str {
        match self {
            Scope::RunsWrite => "register runs, append turns, cancel and complete runs",
            Scope::RunsRead => "read runs, their resumed model input and their audit events",
            Scope::UsersWrite => "create and update backend users (PUT /v1/users/{uid})",
            Scope::DecisionsWrite => "post decisions on behalf of a named backend user",
            Scope::DecisionsAnonymous => "post decisions with no decider uid (decided_by: unknown)",
            Scope::ApprovalsRead => {
                "list the runs waiting for a user's approval (GET /v1/approvals)"
            }
            Scope::MetricsRead => "scrape GET /metrics",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == text)
    }
}
