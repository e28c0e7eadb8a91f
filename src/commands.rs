//! Subcommands besides `serve`: migrations, API clients, retention; webhook subscriptions, encryption keys and
//! `watch` in their own modules.

pub mod encryption_keys;
mod table;
pub mod watch;
pub mod webhooks;

use table::{Align, Table};

use crate::config::{ClientsCommand, Command, DatabaseConfig, TokenKeyCommand};
use crate::domain::scopes::Scope;
use crate::keys;
use crate::storage::{self, Database, StorageError, clients, outbox, retention, token_keys};

/// What a subcommand can fail with; printed to the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Http(String),
}

/// Runs a subcommand other than `serve`, on a migrated database.
pub async fn run(command: Command) -> Result<(), CommandError> {
    match command {
        Command::Serve(_) => Err(CommandError::Usage(
            "serve is not a database command".into(),
        )),
        Command::Migrate(common) => {
            open_database(&common.database).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Clients(command) => {
            let pool = open_database(&command.common().database).await?;
            clients(&pool, command).await
        }
        Command::Purge {
            older_than_days,
            event_retention_hours,
            common,
        } => {
            let pool = open_database(&common.database).await?;
            purge(&pool, older_than_days).await?;
            let max_age = std::time::Duration::from_secs(event_retention_hours * 3600);
            let deleted = outbox::purge_older_than(&pool, max_age).await?;
            println!("purged {deleted} events older than {event_retention_hours} hours");
            Ok(())
        }
        Command::Watch(_) => Err(CommandError::Usage(
            "watch reads the feed over HTTP, not the database".into(),
        )),
        Command::Webhooks(command) => {
            let sealer = match command.encryption() {
                Some(encryption) => encryption
                    .sealer()
                    .map_err(|error| CommandError::Usage(error.to_string()))?,
                None => crate::sealing::Sealer::none(),
            };
            let pool = open_database(&command.common().database)
                .await?
                .with_sealer(sealer);
            webhooks::run(&pool, command).await
        }
        Command::Keys(command) => {
            let sealer = command
                .encryption()
                .sealer()
                .map_err(|error| CommandError::Usage(error.to_string()))?;
            let pool = open_database(&command.common().database).await?;
            encryption_keys::run(&pool, &sealer, command).await
        }
    }
}

async fn clients(pool: &Database, command: ClientsCommand) -> Result<(), CommandError> {
    match command {
        ClientsCommand::Add {
            name,
            scopes,
            tenant,
            allowed_origins,
            ..
        } => add_client(pool, &name, &tenant, &scopes, &allowed_origins).await,
        ClientsCommand::SetOrigins {
            name,
            allowed_origins,
            ..
        } => {
            let origins = checked_origins(&allowed_origins)?;
            if clients::set_origins(pool, &name, &origins).await? {
                println!("{name} allows: {}", origins.join(" "));
                Ok(())
            } else {
                Err(CommandError::Usage(format!(
                    "no live client is named {name:?}"
                )))
            }
        }
        ClientsCommand::List { .. } => list_clients(pool).await,
        ClientsCommand::TokenKey(command) => token_key(pool, command).await,
        ClientsCommand::Revoke { name, .. } => {
            if clients::revoke(pool, &name).await? {
                println!("revoked {name}");
                Ok(())
            } else {
                Err(CommandError::Usage(format!(
                    "no live client is named {name:?}"
                )))
            }
        }
    }
}

async fn add_client(
    pool: &Database,
    name: &str,
    tenant: &str,
    scopes: &[Scope],
    allowed_origins: &[String],
) -> Result<(), CommandError> {
    let origins = checked_origins(allowed_origins)?;
    let valid = is_valid_name;
    if !valid(name) {
        return Err(CommandError::Usage(format!(
            "client name {name:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )));
    }
    if !valid(tenant) {
        return Err(CommandError::Usage(format!(
            "tenant {tenant:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )));
    }
    let mut scope_names: Vec<String> = scopes
        .iter()
        .map(|scope| scope.as_str().to_owned())
        .collect();
    scope_names.sort();
    scope_names.dedup();
    let (key, shown) = keys::generate();
    if !clients::insert(pool, name, tenant, &keys::hash(&key), &shown, &scope_names).await? {
        return Err(CommandError::Usage(format!(
            "a client named {name:?} exists already"
        )));
    }
    if !origins.is_empty() {
        clients::set_origins(pool, name, &origins).await?;
    }
    eprintln!(
        "created client {name} (tenant {tenant}, scopes {}); its key, shown only this once:",
        scope_names.join(" ")
    );
    println!("{key}");
    Ok(())
}

async fn list_clients(pool: &Database) -> Result<(), CommandError> {
    let mut table = Table::new(&[
        ("name", Align::Left),
        ("tenant", Align::Left),
        ("key id", Align::Left),
        ("state", Align::Left),
        ("scopes", Align::Left),
        ("origins", Align::Left),
    ]);
    for client in clients::list(pool).await? {
        let state = if client.revoked_at.is_some() {
            "revoked"
        } else {
            "active"
        };
        table.row(vec![
            client.name,
            client.tenant,
            client.key_prefix,
            state.to_owned(),
            client.scopes.join(" "),
            client.allowed_origins.join(" "),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// Whether a client or tenant name is 1 to 64 of `A-Z a-z 0-9 _ . -`.
fn is_valid_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

async fn token_key(pool: &Database, command: TokenKeyCommand) -> Result<(), CommandError> {
    match command {
        TokenKeyCommand::Add {
            name,
            kid,
            public_key,
            ..
        } => {
            let pem = std::fs::read_to_string(&public_key).map_err(|error| {
                CommandError::Usage(format!("{}: {error}", public_key.display()))
            })?;
            let key = public_key_of_pem(&pem).map_err(|message| {
                CommandError::Usage(format!("{}: {message}", public_key.display()))
            })?;
            if kid.is_empty()
                || kid.len() > 64
                || !kid
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            {
                return Err(CommandError::Usage(format!(
                    "kid {kid:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"
                )));
            }
            match token_keys::add(pool, &name, &kid, &key).await? {
                token_keys::Added::Added => {
                    println!("added token key {kid} to {name}");
                    Ok(())
                }
                token_keys::Added::NoSuchClient => Err(CommandError::Usage(format!(
                    "no live client is named {name:?}"
                ))),
                token_keys::Added::KidTaken => Err(CommandError::Usage(format!(
                    "{name} has a key {kid:?} already; pick another kid"
                ))),
                token_keys::Added::ClientMayNotDecide => Err(CommandError::Usage(format!(
                    "{name} does not hold {}: a decision token decides as its user, so only a client that may \
                     decide may have token keys",
                    token_keys::TOKEN_SCOPE.as_str()
                ))),
            }
        }
        TokenKeyCommand::Retire { name, kid, .. } => {
            if token_keys::retire(pool, &name, &kid).await? {
                println!("retired token key {kid} of {name}");
                Ok(())
            } else {
                Err(CommandError::Usage(format!(
                    "{name:?} has no live token key {kid:?}"
                )))
            }
        }
        TokenKeyCommand::List { .. } => {
            let mut table = Table::new(&[
                ("client", Align::Left),
                ("kid", Align::Left),
                ("state", Align::Left),
                ("created", Align::Left),
            ]);
            for key in token_keys::list(pool).await? {
                let state = if key.retired_at.is_some() {
                    "retired"
                } else {
                    "live"
                };
                table.row(vec![
                    key.client_name,
                    key.kid,
                    state.to_owned(),
                    key.created_at.to_rfc3339(),
                ]);
            }
            print!("{}", table.render());
            Ok(())
        }
    }
}

/// The raw Ed25519 public key of a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) text, as `openssl pkey -pubout`
/// writes it, or of the key's 32 bytes in base64, as libsodium's `sodium_crypto_sign_publickey` gives them.
pub fn public_key_of_pem(text: &str) -> Result<[u8; 32], String> {
    use base64::Engine;
    use ed25519_dalek::pkcs8::DecodePublicKey;
    let text = text.trim();
    if text.starts_with("-----BEGIN") {
        return ed25519_dalek::VerifyingKey::from_public_key_pem(text)
            .map(|key| key.to_bytes())
            .map_err(|error| format!("not an Ed25519 public key in PEM: {error}"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| "neither a PEM public key nor base64".to_owned())?;
    let raw: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "an Ed25519 public key in base64 is 32 bytes".to_owned())?;
    ed25519_dalek::VerifyingKey::from_bytes(&raw)
        .map(|key| key.to_bytes())
        .map_err(|error| format!("not an Ed25519 public key: {error}"))
}

/// The origins as a browser sends them in `Origin`: `http` or `https`, a host, an optional port, nothing else.
/// Refuses any other form, which no browser would ever match.
pub fn checked_origins(origins: &[String]) -> Result<Vec<String>, CommandError> {
    let mut checked = Vec::new();
    for origin in origins {
        let url = reqwest::Url::parse(origin)
            .map_err(|error| CommandError::Usage(format!("origin {origin:?}: {error}")))?;
        let serialized = url.origin().ascii_serialization();
        if !matches!(url.scheme(), "http" | "https") || &serialized != origin {
            return Err(CommandError::Usage(format!(
                "origin {origin:?}: write it as a browser sends it, e.g. {serialized:?} (scheme, host, port; no path)"
            )));
        }
        checked.push(serialized);
    }
    checked.sort();
    checked.dedup();
    Ok(checked)
}

/// Migrates (over the direct migration URL) and connects: every subcommand works on an up-to-date schema.
pub async fn open_database(config: &DatabaseConfig) -> Result<Database, StorageError> {
    let settings = config.pool_settings();
    storage::connect::migrate(&settings).await?;
    storage::connect::connect(&settings).await
}

/// Purges what is older than `days` (or RETENTION_DAYS) and prints what was removed.
async fn purge(pool: &Database, days: Option<u32>) -> Result<(), CommandError> {
    let days = days.ok_or_else(|| {
        CommandError::Usage(
            "say how many days to keep: --older-than-days N, or set RETENTION_DAYS".into(),
        )
    })?;
    let report = retention::purge(pool, days).await?;
    println!(
        "purged data older than {days} days: {} tool-event payloads cleared, {} finished runs deleted",
        report.tool_event_payloads_cleared, report.finished_runs_deleted
    );
    Ok(())
}

/// Purges every `interval` while the service runs: old events always (EVENT_RETENTION_HOURS), and payloads and
/// finished runs when a retention period (`days`) is configured.
pub fn spawn_periodic_purge(
    pool: Database,
    days: Option<u32>,
    event_max_age: std::time::Duration,
    interval: std::time::Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        loop {
            tokio::select! {
                _ = ticker.tick() => purge_once(&pool, days, event_max_age).await,
                _ = shutdown.changed() => return,
            }
        }
    })
}

async fn purge_once(pool: &Database, days: Option<u32>, event_max_age: std::time::Duration) {
    if let Some(days) = days {
        match retention::purge(pool, days).await {
            Ok(report) => tracing::info!(
                days,
                tool_event_payloads_cleared = report.tool_event_payloads_cleared,
                finished_runs_deleted = report.finished_runs_deleted,
                "purged old data"
            ),
            Err(error) => tracing::warn!(error = %error, "purge failed; will retry"),
        }
    }
    match outbox::purge_older_than(pool, event_max_age).await {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(events_deleted = deleted, "purged old events"),
        Err(error) => tracing::warn!(error = %error, "event purge failed; will retry"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";

    #[test]
    fn a_public_key_is_read_from_pem_or_from_base64_alike() {
        let from_pem = public_key_of_pem(PEM).unwrap();
        let from_base64 =
            public_key_of_pem("Gb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=").unwrap();
        assert_eq!(from_pem, from_base64);
        assert!(public_key_of_pem("c2hvcnQ=").is_err());
        assert!(
            public_key_of_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
                .is_err()
        );
    }

    #[test]
    fn an_origin_is_taken_only_as_a_browser_sends_it() {
        let ok = checked_origins(&[
            "https://chat.example.com".into(),
            "http://127.0.0.1:3000".into(),
        ]);
        assert_eq!(ok.unwrap().len(), 2);
        for bad in [
            "https://chat.example.com/",
            "https://chat.example.com/app",
            "ftp://x.example",
            "chat.example.com",
        ] {
            assert!(checked_origins(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
