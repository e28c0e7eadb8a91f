//! `approval-resume webhooks add|list|remove|rotate-secret`: webhook subscriptions from the command line, as the
//! API manages them, under the same checks (docs/design.md §17). A signing secret is printed once, by `add` or
//! `rotate-secret`, alone on standard output.

use std::time::Duration;

use crate::storage::Database;
use uuid::Uuid;

use super::CommandError;
use super::table::{Align, Table};
use crate::config::{WebhookAddPolicy, WebhooksCommand};
use crate::delivery::webhooks::{sign, ssrf, subscription};
use crate::storage::webhooks::{self, Inserted, NewSubscription};

pub async fn run(pool: &Database, command: WebhooksCommand) -> Result<(), CommandError> {
    match command {
        WebhooksCommand::Add {
            url,
            events,
            tenant,
            policy,
            ..
        } => add(pool, &tenant, &url, &events, &policy).await,
        WebhooksCommand::RotateSecret {
            id, overlap_secs, ..
        } => {
            let secret = sign::new_secret();
            let overlap = Duration::from_secs(overlap_secs);
            let Some(row) = webhooks::rotate_secret(pool, None, id, &secret, overlap).await? else {
                return Err(CommandError::Usage(format!("no webhook subscription {id}")));
            };
            let until = row
                .previous_secret_expires_at
                .map_or("now".to_owned(), |until| until.to_rfc3339());
            eprintln!(
                "rotated the signing secret of webhook subscription {id}; the old one signs beside it until \
                 {until}; the new one, shown only this once:"
            );
            println!("{secret}");
            Ok(())
        }
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
    policy: &WebhookAddPolicy,
) -> Result<(), CommandError> {
    let usage = |error: subscription::Invalid| CommandError::Usage(error.to_string());
    let given = (!events.is_empty()).then_some(events);
    let event_types = subscription::event_types(given).map_err(usage)?;
    subscription::check_url(url).map_err(usage)?;
    let parsed = reqwest::Url::parse(url).map_err(|_| usage(subscription::Invalid::Url))?;
    // Ops may read what was refused and why.
    ssrf::check_url_resolves(&parsed, policy.webhook_allow_private_addresses)
        .await
        .map_err(|refusal| match refusal {
            ssrf::Refusal::Busy(_) => CommandError::Usage(refusal.to_string()),
            _ => CommandError::Usage(format!("{}: {refusal}", ssrf::REFUSED)),
        })?;
    if !super::is_valid_name(tenant) {
        return Err(CommandError::Usage(format!(
            "tenant {tenant:?}: use 1 to 64 of A-Z a-z 0-9 _ . -"
        )));
    }
    let secret = sign::new_secret();
    let max = i64::try_from(policy.webhook_max_subscriptions_per_tenant).unwrap_or(i64::MAX);
    let inserted = webhooks::insert(
        pool,
        &NewSubscription {
            id: Uuid::new_v4(),
            tenant,
            url,
            event_types: &event_types,
            secret: &secret,
        },
        max,
    )
    .await?;
    let Inserted::Created(row) = inserted else {
        return Err(CommandError::Usage(format!(
            "tenant {tenant} already has {max} webhook subscriptions (WEBHOOK_MAX_SUBSCRIPTIONS_PER_TENANT)"
        )));
    };
    eprintln!(
        "created webhook subscription {} (tenant {tenant}, events {}); its signing secret, shown only this once:",
        row.id,
        event_types.join(" ")
    );
    println!("{secret}");
    Ok(())
}

async fn list(pool: &Database, tenant: Option<&str>) -> Result<(), CommandError> {
    let mut table = Table::new(&[
        ("id", Align::Left),
        ("tenant", Align::Left),
        ("state", Align::Left),
        ("backlog", Align::Right),
        ("delivered", Align::Right),
        ("url", Align::Left),
        ("events / last error", Align::Left),
    ]);
    for row in webhooks::list(pool, tenant).await? {
        let last_error = row
            .last_error
            .map(|error| format!(" / {error} (attempts: {})", row.attempts))
            .unwrap_or_default();
        table.row(vec![
            row.id.to_string(),
            row.tenant,
            row.state,
            row.backlog.to_string(),
            row.delivered_total.to_string(),
            row.url,
            format!("{}{last_error}", row.event_types.join(" ")),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
