//! `/v1/webhooks`: a tenant's webhook subscriptions (docs/design.md §10, §17). A signing secret is in the answer to the
//! creation or the rotation that made it only; it is never shown again.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Json, scope};
use crate::delivery::webhooks::subscription::{self, Invalid};
use crate::delivery::webhooks::{sign, ssrf};
use crate::state::AppState;
use crate::storage::webhooks::{self, Inserted, NewSubscription, SubscriptionRow};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscription {
    url: String,
    /// The event types to send; absent: all of them.
    event_types: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateSecret {
    /// Seconds the old secret keeps signing beside the new one; absent or null: WEBHOOK_SECRET_OVERLAP_SECS, its most.
    /// An integer as JSON Schema reads one: `60.0` is 60 (`http::integer`).
    #[serde(default, deserialize_with = "super::integer::json_or_null")]
    overlap_secs: Option<i64>,
}

#[derive(Debug, Serialize)]
struct Created {
    #[serde(flatten)]
    subscription: SubscriptionRow,
    /// `whsec_…`: verify requests with it. Shown in this answer only.
    secret: String,
}

#[derive(Debug, Serialize)]
struct Listed {
    subscriptions: Vec<SubscriptionRow>,
}

pub async fn create(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::WebhooksWrite>,
    Json(body): Json<CreateSubscription>,
) -> Result<impl IntoResponse, ApiError> {
    let event_types = subscription::event_types(body.event_types.as_deref()).map_err(invalid)?;
    subscription::check_url(&body.url).map_err(invalid)?;
    let url = reqwest::Url::parse(&body.url).map_err(|_| invalid(Invalid::Url))?;
    let policy = state.webhooks;
    if let Err(refusal) = ssrf::check_url_resolves(&url, policy.allow_private).await {
        if let ssrf::Refusal::Busy(_) = refusal {
            // Not checked: the name lookups of this instance are all taken (503, with Retry-After).
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "webhook_url_lookups_busy",
                refusal.told(),
            ));
        }
        // The detail (an address, what a name resolved to) is for ops; the tenant is told only that it is refused.
        tracing::info!(detail = %refusal, "a webhook URL was refused at creation");
        return Err(ApiError::unprocessable(
            "webhook_url_refused",
            refusal.told(),
        ));
    }
    let secret = sign::new_secret();
    let inserted = webhooks::insert(
        &state.pool,
        &NewSubscription {
            id: Uuid::new_v4(),
            tenant: &caller.tenant,
            url: &body.url,
            event_types: &event_types,
            secret: &secret,
        },
        policy.max_per_tenant,
    )
    .await?;
    let Inserted::Created(row) = inserted else {
        return Err(ApiError::conflict(
            "too_many_subscriptions",
            format!(
                "the tenant already has {} webhook subscriptions, the most it may have; remove one first",
                policy.max_per_tenant
            ),
        ));
    };
    tracing::info!(subscription = %row.id, "webhook subscription created");
    Ok((
        StatusCode::CREATED,
        axum::Json(Created {
            subscription: *row,
            secret,
        }),
    ))
}

/// Gives a subscription a new secret, answered once; the old one signs beside it for the overlap asked (at most,
/// and by default, WEBHOOK_SECRET_OVERLAP_SECS), then retires.
pub async fn rotate_secret(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::WebhooksWrite>,
    Path(id): Path<String>,
    Json(body): Json<RotateSecret>,
) -> Result<impl IntoResponse, ApiError> {
    let not_found = || ApiError::not_found("webhook subscription");
    let id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let most = state.webhooks.secret_overlap;
    let overlap = match body.overlap_secs.map(u64::try_from) {
        None => most,
        Some(Ok(secs)) if secs <= most.as_secs() => std::time::Duration::from_secs(secs),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "invalid_overlap",
                format!("overlap_secs must be 0 to {}", most.as_secs()),
            ));
        }
    };
    let secret = sign::new_secret();
    let row = webhooks::rotate_secret(&state.pool, Some(&caller.tenant), id, &secret, overlap)
        .await?
        .ok_or_else(not_found)?;
    tracing::info!(subscription = %id, overlap_secs = overlap.as_secs(), "webhook secret rotated");
    Ok(axum::Json(Created {
        subscription: row,
        secret,
    }))
}

pub async fn list(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::WebhooksWrite>,
) -> Result<impl IntoResponse, ApiError> {
    let subscriptions = webhooks::list(&state.pool, Some(&caller.tenant)).await?;
    Ok(axum::Json(Listed { subscriptions }))
}

pub async fn remove(
    State(state): State<AppState>,
    Authorized(caller, _): Authorized<scope::WebhooksWrite>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let not_found = || ApiError::not_found("webhook subscription");
    let id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    if webhooks::remove(&state.pool, Some(&caller.tenant), id).await? {
        tracing::info!(subscription = %id, "webhook subscription removed");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found())
    }
}

fn invalid(error: Invalid) -> ApiError {
    ApiError::unprocessable("invalid_subscription", error.to_string())
}
