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
    /// Follow the tenant's events (`GET /v1/events`).
    #[serde(rename = "events:read")]
    EventsRead,
    /// Create, list and remove the tenant's webhook subscriptions.
    #[serde(rename = "webhooks:write")]
    WebhooksWrite,
}

impl Scope {
    pub const ALL: [Scope; 9] = [
        Scope::RunsWrite,
        Scope::RunsRead,
        Scope::UsersWrite,
        Scope::DecisionsWrite,
        Scope::DecisionsAnonymous,
        Scope::ApprovalsRead,
        Scope::MetricsRead,
        Scope::EventsRead,
        Scope::WebhooksWrite,
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
            Scope::EventsRead => "events:read",
            Scope::WebhooksWrite => "webhooks:write",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == text)
    }
}
