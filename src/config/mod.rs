//! The command line and the configuration: every setting is an environment variable and also a flag.
//!
//! Values are parsed once, at start-up; an invalid value stops the start with a message that names the variable.
//! One file per concern: the command tree (`cli`), `serve`'s own settings (`serve`), the database (`database`),
//! logging (`logging`), event delivery (`event_delivery`), approval links and mail (`links`), encryption at rest (`encryption`), each group of
//! subcommands (`clients`, `webhooks`, `watch`), and the checks of settings against each other (`validate`).
//! Everything is re-exported here, so callers name `config::…` whatever file a type lives in.

mod cli;
mod clients;
mod database;
mod encryption;
mod event_delivery;
mod links;
mod logging;
mod serve;
#[cfg(test)]
mod testing;
mod validate;
mod watch;
mod webhooks;

pub use cli::{Cli, Command};
pub use clients::{ClientsCommand, TokenKeyCommand};
pub use database::{DatabaseCommand, DatabaseConfig};
pub use encryption::{EncryptionConfig, KeysCommand};
pub use event_delivery::EventsConfig;
pub use links::{LinksConfig, MailConfig};
pub use logging::{LogConfig, LogFormat};
pub use serve::Config;
pub use validate::ConfigError;
pub use watch::WatchArgs;
pub use webhooks::{WebhookAddPolicy, WebhooksCommand};

/// Kept here for the callers that named it `config::Secret` before it moved below the executors.
pub use crate::domain::secret::Secret;
