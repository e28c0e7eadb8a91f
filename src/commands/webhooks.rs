//! `approval-resume webhooks add|list|remove`: webhook subscriptions from the command line, as the API manages
//! them. The signing secret is printed once, by `add`, alone on standard output.

use crate::storage::Database;
use uuid::Uuid;

use super::CommandError;
use crate::config::WebhooksCommand;
use crate::events::webhooks::{sign, subscription};
use crate::storage::webhooks::{self, NewSubscription};

pub async fn run(pool: &Database, command: WebhooksCommand) -> Result<(), CommandError> {
    match command {
        WebhooksCommand::Add {
            url,
            events,
            tenant,
            ..
        } => add(pool, &tenant, &url, &events).await,
        WebhooksCommand::List { tenant, .. } => list(pool, tenant.as_deref()).await,
        WebhooksCommand::Remove { id, .. } => {
            if webhooks::remove(pool, None, id).await? {
                println!("removed {id}");
                Ok(())
            } else {
                Err(CommandError::Usage(format!("no webhook subscription {id}")))
            }
        }
    }
}

async fn add(
    pool: &Database,
    tenant: &str,
    url: &str,
    events: &[String],
) -> Result<(), CommandError> {
    let usage = |error: subscription::Invalid| CommandError::Usage(error.to_string());
    let given = (!events.is_empty()).then_some(events);
    let event_types = subscription::event_types(given).map_err(usage)?;
    subscription::check_url(url).map_err(usage)?;
    if !super::is_valid_name(tenant) {
        return Err(CommandError::Usage(format!(
            "tenant {tenant:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )));
    }
    let secret = sign::new_secret();
    let row = webhooks::insert(
        pool,
        &NewSubscription {
            id: Uuid::new_v4(),
            tenant,
            url,
            event_types: &event_types,
            secret: &secret,
        },
    )
    .await?;
    eprintln!(
        "created webhook subscription {} (tenant {tenant}, events {}); its signing secret, shown only this once:",
        row.id,
        event_types.join(" ")
    );
    println!("{secret}");
    Ok(())
}

async fn list(pool: &Database, tenant: Option<&str>) -> Result<(), CommandError> {
    println!(
        "{:<36} {:<16} {:<8} {:>8} {:>9}  {:<40} events / last error",
        "id", "tenant", "state", "backlog", "delivered", "url"
    );
    for row in webhooks::list(pool, tenant).await? {
        println!(
            "{:<36} {:<16} {:<8} {:>8} {:>9}  {:<40} {}{}",
            row.id,
            row.tenant,
            row.state,
            row.backlog,
            row.delivered_total,
            row.url,
            row.event_types.join(" "),
            row.last_error
                .map(|error| format!(" / {error} (attempts: {})", row.attempts))
                .unwrap_or_default()
        );
    }
    Ok(())
}
