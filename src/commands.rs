//! Subcommands besides `serve`: migrations, API clients, retention; webhook subscriptions and `watch` in their own
//! modules.

pub mod watch;
pub mod webhooks;

use crate::config::{ClientsCommand, Command, DatabaseConfig};
use crate::domain::scopes::Scope;
use crate::keys;
use crate::storage::{self, Database, StorageError, clients, events, retention};

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
            let deleted = events::purge_older_than(&pool, max_age).await?;
            println!("purged {deleted} events older than {event_retention_hours} hours");
            Ok(())
        }
        Command::Watch(_) => Err(CommandError::Usage(
            "watch reads the feed over HTTP, not the database".into(),
        )),
        Command::Webhooks(command) => {
            let pool = open_database(&command.common().database).await?;
            webhooks::run(&pool, command).await
        }
    }
}

async fn clients(pool: &Database, command: ClientsCommand) -> Result<(), CommandError> {
    match command {
        ClientsCommand::Add {
            name,
            scopes,
            tenant,
            ..
        } => add_client(pool, &name, &tenant, &scopes).await,
        ClientsCommand::List { .. } => list_clients(pool).await,
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
) -> Result<(), CommandError> {
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
    eprintln!(
        "created client {name} (tenant {tenant}, scopes {}); its key, shown only this once:",
        scope_names.join(" ")
    );
    println!("{key}");
    Ok(())
}

async fn list_clients(pool: &Database) -> Result<(), CommandError> {
    println!(
        "{:<24} {:<16} {:<12} {:<10} scopes",
        "name", "tenant", "key id", "state"
    );
    for client in clients::list(pool).await? {
        let state = if client.revoked_at.is_some() {
            "revoked"
        } else {
            "active"
        };
        println!(
            "{:<24} {:<16} {:<12} {:<10} {}",
            client.name,
            client.tenant,
            client.key_prefix,
            state,
            client.scopes.join(" ")
        );
    }
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

/// Migrates (over the direct migration URL) and connects: every subcommand works on an up-to-date schema.
pub async fn open_database(config: &DatabaseConfig) -> Result<Database, StorageError> {
    let settings = config.pool_settings();
    storage::migrate(&settings).await?;
    storage::connect(&settings).await
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
    match events::purge_older_than(pool, event_max_age).await {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(events_deleted = deleted, "purged old events"),
        Err(error) => tracing::warn!(error = %error, "event purge failed; will retry"),
    }
}
