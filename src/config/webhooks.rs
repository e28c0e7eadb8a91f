//! The `webhooks` subcommands, which manage subscriptions in the database as the API does.

use clap::{Args, Subcommand};

use super::{DatabaseCommand, EncryptionConfig};

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Subscribe a URL to a tenant's events and print the signing secret, once.
    Add {
        /// An http(s) URL that receives a signed POST per event.
        #[arg(long)]
        url: String,
        /// An event type to send (run.waiting, run.resumed, run.expired, run.cancelled, run.completed); repeat
        /// the flag for several; without it, all of them.
        #[arg(long = "event")]
        events: Vec<String>,
        /// The tenant whose events are sent.
        #[arg(long, default_value = "default")]
        tenant: String,
        #[command(flatten)]
        policy: WebhookAddPolicy,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List subscriptions with their state and backlog; secrets are never shown.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Remove a subscription.
    Remove {
        id: uuid::Uuid,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Give a subscription a new signing secret and print it, once; the old one keeps signing beside it for the
    /// overlap, then retires.
    RotateSecret {
        id: uuid::Uuid,
        /// Seconds the old secret keeps signing beside the new one (0: it retires at once).
        #[arg(long, env = "WEBHOOK_SECRET_OVERLAP_SECS", value_name = "WEBHOOK_SECRET_OVERLAP_SECS",
              default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(0..=2_592_000))]
        overlap_secs: u64,
        #[command(flatten)]
        encryption: EncryptionConfig,
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

/// What `webhooks add` checks as the API does (docs/design.md §17): the same variables as `serve`.
#[derive(Debug, Clone, Args)]
pub struct WebhookAddPolicy {
    /// Most webhook subscriptions one tenant may have.
    #[arg(long, env = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT", value_name = "WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT",
          default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub webhook_max_subscriptions_per_tenant: u64,
    /// Let the URL's host be or resolve to loopback, link-local and private addresses.
    #[arg(long, env = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", value_name = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
          default_value_t = false, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub webhook_allow_private_addresses: bool,
}

impl WebhooksCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            WebhooksCommand::Add { common, .. }
            | WebhooksCommand::List { common, .. }
            | WebhooksCommand::Remove { common, .. }
            | WebhooksCommand::RotateSecret { common, .. } => common,
        }
    }

    /// The keys a new or rotated secret is sealed with; `None` for the commands that store no secret.
    pub fn encryption(&self) -> Option<&EncryptionConfig> {
        match self {
            WebhooksCommand::Add { encryption, .. }
            | WebhooksCommand::RotateSecret { encryption, .. } => Some(encryption),
            WebhooksCommand::List { .. } | WebhooksCommand::Remove { .. } => None,
        }
    }
}
