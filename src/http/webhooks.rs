//! `/v1/webhooks`: a tenant's webhook subscriptions (DESIGN.md §10). The signing secret is in the answer to the
//! creation only; it is never shown again.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ApiError;
use super::extract::{Authorized, Json, scope};
use crate::events::webhooks::sign;
use crate::events::webhooks::subscription::{self, Invalid};
use crate::state::AppState;
use crate::storage::webhooks::{self, NewSubscription, SubscriptionRow};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscription {
    url: String,
    /// The event types to send; absent: all of them.
    event_types: Option<Vec<String>>,
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
    let secret = sign::new_secret();
    let row = webhooks::insert(
        &state.pool,
        &NewSubscription {
            id: Uuid::new_v4(),
            tenant: &caller.tenant,
            url: &body.url,
            event_types: &event_types,
            secret: &secret,
        },
    )
    .await?;
    tracing::info!(subscription = %row.id, "webhook subscription created");
    Ok((
        StatusCode::CREATED,
        axum::Json(Created {
            subscription: row,
            secret,
        }),
    ))
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
