//! Subcommands besides `serve`: applying migrations and managing API clients.

use sqlx::PgPool;

use crate::config::ClientsCommand;
use crate::domain::scopes::Scope;
use crate::keys;
use crate::storage::{self, StorageError, clients};

/// What a subcommand can fail with; printed to the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Usage(String),
}

pub async fn clients(pool: &PgPool, command: ClientsCommand) -> Result<(), CommandError> {
    match command {
        ClientsCommand::Add {
            name,
            scopes,
            tenant,
        } => add_client(pool, &name, &tenant, &scopes).await,
        ClientsCommand::List => list_clients(pool).await,
        ClientsCommand::Revoke { name } => {
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
    pool: &PgPool,
    name: &str,
    tenant: &str,
    scopes: &[Scope],
) -> Result<(), CommandError> {
    let valid = |text: &str| {
        !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
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

async fn list_clients(pool: &PgPool) -> Result<(), CommandError> {
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

/// Connects and migrates: every subcommand works on an up-to-date schema.
pub async fn open_database(config: &crate::config::Config) -> Result<PgPool, StorageError> {
    let pool = storage::connect(&storage::PoolSettings {
        database_url: config.database_url.expose().to_owned(),
        max_connections: config.database_pool_size,
        acquire_timeout: config.acquire_timeout(),
        statement_timeout: config.statement_timeout(),
    })
    .await?;
    storage::migrate(&pool).await?;
    Ok(pool)
}
