//! The `clients` subcommands: API clients, their scopes, origins and decision-token keys.

use std::path::PathBuf;

use clap::Subcommand;

use super::DatabaseCommand;
use crate::domain::scopes::Scope;

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Create a client and print its key, once.
    Add {
        /// A unique name: letters, digits, `_`, `.`, `-`.
        name: String,
        /// A scope the client holds; repeat the flag for several.
        #[arg(long = "scope", required = true, value_name = "SCOPE", value_parser = scope_parser())]
        scopes: Vec<Scope>,
        /// The tenant (host application installation) whose users and runs the client sees.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// A web origin (`https://chat.example.com`) whose pages may call the routes a decision token may use;
        /// repeat the flag for several.
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Replace the web origins a client allows (none given: no origin).
    SetOrigins {
        name: String,
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allowed_origins: Vec<String>,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List clients with their scopes; keys are never shown.
    List {
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Revoke a client's key.
    Revoke {
        name: String,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Manage the Ed25519 public keys a client's decision tokens are signed with.
    #[command(subcommand, name = "token-key")]
    TokenKey(TokenKeyCommand),
}

/// `clients token-key …`: several keys may be live at once, so a key is rotated by adding the next one, moving the
/// host's signer to it, and retiring the old one once its last token has expired (15 minutes at most).
#[derive(Debug, Subcommand)]
pub enum TokenKeyCommand {
    /// Register a public key for a client's decision tokens under a `kid`.
    Add {
        /// The client whose backend signs the tokens (their `iss`).
        name: String,
        /// The key id the tokens name in their header: letters, digits, `_`, `.`, `-`.
        #[arg(long)]
        kid: String,
        /// A file with the Ed25519 public key: PEM (`-----BEGIN PUBLIC KEY-----`, as `openssl pkey -pubout`
        /// writes it) or its 32 bytes in base64 (as libsodium gives them).
        #[arg(long, value_name = "FILE")]
        public_key: PathBuf,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// Retire a key: tokens signed with it are refused from now on.
    Retire {
        name: String,
        #[arg(long)]
        kid: String,
        #[command(flatten)]
        common: DatabaseCommand,
    },
    /// List every client's token keys, retired ones included.
    List {
        #[command(flatten)]
        common: DatabaseCommand,
    },
}

impl ClientsCommand {
    pub fn common(&self) -> &DatabaseCommand {
        match self {
            ClientsCommand::Add { common, .. }
            | ClientsCommand::List { common }
            | ClientsCommand::Revoke { common, .. }
            | ClientsCommand::SetOrigins { common, .. } => common,
            ClientsCommand::TokenKey(
                TokenKeyCommand::Add { common, .. }
                | TokenKeyCommand::Retire { common, .. }
                | TokenKeyCommand::List { common },
            ) => common,
        }
    }
}

/// The scopes as clap's possible values, each with what it allows, so that `clients add --help` lists them.
fn scope_parser() -> impl clap::builder::TypedValueParser<Value = Scope> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        Scope::ALL.map(|scope| PossibleValue::new(scope.as_str()).help(scope.allows())),
    )
    .try_map(|name| Scope::parse(&name).ok_or(format!("{name:?} is not a scope")))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::parse;
    use crate::config::{Cli, Command};

    #[test]
    fn clients_add_help_lists_every_scope_with_what_it_allows() {
        use clap::CommandFactory;
        let mut command = Cli::command();
        let help = command
            .find_subcommand_mut("clients")
            .and_then(|clients| clients.find_subcommand_mut("add"))
            .expect("clients add")
            .render_long_help()
            .to_string();
        for scope in Scope::ALL {
            let listed = help.lines().any(|line| {
                line.trim_start()
                    .strip_prefix(&format!("- {}:", scope.as_str()))
                    .is_some_and(|rest| rest.trim() == scope.allows())
            });
            assert!(
                listed,
                "{} not listed with what it allows:\n{help}",
                scope.as_str()
            );
        }
        assert!(!help.contains("LISTEN_ADDR"), "{help}");
    }

    #[test]
    fn an_unknown_scope_is_refused_naming_the_known_ones() {
        let error = parse(&["clients", "add", "chat", "--scope", "runs:delete"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("decisions:anonymous"), "{error}");
    }

    #[test]
    fn clients_add_takes_repeated_scopes() {
        let cli = parse(&[
            "clients",
            "add",
            "chat",
            "--scope",
            "runs:read",
            "--scope",
            "decisions:write",
        ])
        .unwrap();
        match cli.into_command() {
            Command::Clients(ClientsCommand::Add { scopes, tenant, .. }) => {
                assert_eq!(scopes, vec![Scope::RunsRead, Scope::DecisionsWrite]);
                assert_eq!(tenant, "default");
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
