//! The application: the router over the handlers, its layers, and serving with a bounded graceful shutdown. The
//! state the handlers share lives in `state`, which both this module and the handlers depend on.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use tokio::net::TcpListener;
use tower::util::MapRequestLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::http::error::{ApiError, REQUEST_ID};
use crate::http::{
    approvals, body, body_budget, claims, cors, decisions, detach, events_feed, link_page, links,
    ops, remembered_rules, request_id, results, run_events, runs, turns, ui, users, webhooks,
    worker_state,
};
use crate::listen::{self, ConnectionLimits};
use crate::metrics;
use crate::state::{AppState, Limits};
use crate::telemetry;

/// Every route of docs/design.md §8, with the layers each request passes through.
pub fn router(state: AppState) -> Router {
    layered(
        routes(cors::layer(state.pool.clone()), &state.limits),
        state,
    )
}

/// The routes of `router`, and its answers for paths and methods it does not serve.
fn routes(cors: CorsLayer, limits: &Limits) -> Router<AppState> {
    // The two routes that take a worker state read a body of MAX_BODY_BYTES beside it (`http::worker_state`); the
    // innermost body limit is the one that applies.
    let with_state = DefaultBodyLimit::max(worker_state::body_limit(limits));
    // The routes a decision token may use: the only ones a page calls from another origin, so the only ones that
    // answer CORS preflights.
    let token_routes = Router::new()
        .route("/v1/runs/{id}", get(runs::get_run))
        .route("/v1/runs/{id}/decision", post(decisions::decide))
        .route("/v1/runs/{id}/model-input", get(decisions::model_input))
        .route(
            "/v1/runs/{id}/rules",
            get(remembered_rules::list_run_rules).post(remembered_rules::make_run_rule),
        )
        .route("/v1/rules/{id}", delete(remembered_rules::revoke))
        // Inside CORS, as on every other route, and only on the methods each route serves.
        .route_layer(middleware::from_fn(refuse_unread_body))
        // Set before the layer, so that CORS wraps it and answers a preflight (OPTIONS) before it would.
        .method_not_allowed_fallback(method_not_allowed)
        .layer(cors);
    Router::new()
        .route("/v1/users/{uid}", put(users::put_user))
        .route("/v1/runs", post(runs::register_run).layer(with_state))
        .route(
            "/v1/runs/{id}/turns",
            post(turns::append_turn).layer(with_state),
        )
        .route("/v1/runs/{id}/events", get(run_events::list_events))
        .route("/v1/runs/{id}/cancel", post(runs::cancel_run))
        .route("/v1/runs/{id}/complete", post(runs::complete_run))
        .route("/v1/runs/{id}/results", post(results::post))
        .route("/v1/runs/{id}/claim", post(claims::post))
        .route("/v1/runs/{id}/links", post(links::make))
        .route("/v1/runs/{id}/links/{link_id}", delete(links::revoke))
        // The approval page: its link is its credential (docs/design.md §20), so it takes no key.
        .route(
            "/approve/{run_id}/{secret}",
            get(link_page::show).post(link_page::submit),
        )
        .route("/ui/approval-page.css", get(ui::approval_page_css))
        .route("/v1/approvals", get(approvals::inbox))
        .route(
            "/v1/rules",
            get(remembered_rules::list_owner_rules).post(remembered_rules::make_owner_rule),
        )
        .route("/v1/events", get(events_feed::feed))
        .route("/v1/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/v1/webhooks/{id}", delete(webhooks::remove))
        .route(
            "/v1/webhooks/{id}/rotate-secret",
            post(webhooks::rotate_secret),
        )
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/openapi.yaml", get(ops::openapi))
        .route("/ui/approval-card.js", get(ui::approval_card))
        .route("/metrics", get(ops::metrics))
        // Before the token routes are merged: they carry the same layer inside their CORS layer, where a route
        // layer still sees which methods each route serves.
        .route_layer(middleware::from_fn(refuse_unread_body))
        .merge(token_routes)
        .fallback(|| async { ApiError::not_found("route") })
        .method_not_allowed_fallback(method_not_allowed)
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// `routes` inside the layers every request passes through (outermost last). Public so that a test can send a
/// route of its own, one that panics say, through exactly these layers.
pub fn layered(routes: Router<AppState>, state: AppState) -> Router {
    let limits = state.limits;
    // One budget for every request this router serves.
    let budget = body_budget::BodyBudget::new(&limits);
    // Middleware written as one function each where the order allows it: every `from_fn` layer costs each request
    // a clone of the service below it and a boxed future (BENCHMARKS.md, "Lighter writes per decision").
    routes
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            within_bounds(limits, budget.clone(), request, next)
        }))
        // Inside `counted_with_request_id`, so that the 500 of a panic carries the request id like every other
        // problem, and is counted.
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::internal("a handler panicked").into_response()
        }))
        .layer(middleware::from_fn(counted_with_request_id))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(telemetry::request_span)
                .on_response(telemetry::on_response)
                // `on_response` logs a 5xx with its cause; the default `on_failure` would log it a second time.
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        // Outermost: a client's own id is kept only in a short, safe form, else the layer above makes one. A plain
        // `MapRequest` (no boxed future, no clone of the service) since it runs on every request.
        .layer(MapRequestLayer::new(request_id::keep_if_acceptable))
        .with_state(state)
}

/// Counts every request in the metrics by its matched route, never by its raw path (unbounded), and makes the
/// request id available to errors built anywhere while the request is served.
async fn counted_with_request_id(request: Request, next: Next) -> Response {
    // A `MatchedPath` clone shares its text; no copy of the route per request.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let id = request
        .headers()
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let started = Instant::now();
    let response = REQUEST_ID.scope(id, next.run(request)).await;
    metrics::http_request(
        route.as_ref().map_or("unmatched", MatchedPath::as_str),
        method.as_str(),
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The bounds of serving one request, outermost first: a body on a route that takes none, or declared over its
/// route's limit, is refused at once, and any other is charged against MAX_BODY_BYTES_IN_FLIGHT as its bytes arrive
/// (`body_budget`), 503 if they find no room; it must arrive within BODY_READ_TIMEOUT_MS, and a slow body is the
/// client's fault (408), not a slow service's (503), so that answer wins; the answer must come within
/// REQUEST_TIMEOUT_MS, which is longer (Config::validate); and the handler runs in a task of its own (`detach`), so a
/// timeout or a client that goes away stops the wait, never the handler. The feed's long poll is the exception: it
/// opens no transaction, and a reader that hangs up must stop waiting and give its slot back (docs/design.md §17,
/// `events_feed`), so it is served attached to its connection; it takes no body, so hyper watches its connection.
async fn within_bounds(
    limits: Limits,
    budget: body_budget::BodyBudget,
    mut request: Request,
    next: Next,
) -> Response {
    let route = request.extensions().get::<MatchedPath>();
    let attached = route.is_some_and(|route| route.as_str() == events_feed::ROUTE);
    let route_limit = if route.is_some_and(|route| worker_state::ROUTES.contains(&route.as_str())) {
        worker_state::body_limit(&limits)
    } else {
        limits.max_body_bytes
    };
    // A body of a bodiless method is neither read nor charged here: the route refuses it (`refuse_unread_body`), or,
    // where the route does not serve the method, the answer is 405 as for any request of it.
    let admitted = if takes_body(request.method()) {
        match budget.admit(&mut request, route_limit) {
            Ok(admitted) => admitted,
            Err(refused) => return body_budget::closing(refused),
        }
    } else {
        body_budget::Admitted::Bodiless
    };
    let held = admitted.held();
    body::read_within_timeout(limits.body_read_timeout, request, |request| {
        within_timeout(limits.request_timeout, async move {
            let response = if attached {
                let response = next.run(request).await;
                drop(admitted);
                response
            } else {
                detach::run_to_completion(request, next, admitted).await
            };
            if held.is_some_and(|held| held.refused()) {
                return body_budget::closing(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_body_bytes",
                    "the bodies being read take MAX_BODY_BYTES_IN_FLIGHT; retry after the time in Retry-After",
                ));
            }
            response
        })
    })
    .await
}

/// A body sent to a route that takes none (`GET`, `HEAD`, `DELETE`, `OPTIONS`) is refused 413 at once, unread, and
/// the connection closed (docs/design.md §17): a declared length never holds anything. A route layer, so that a
/// method a route does not serve is answered 405 whatever its body.
async fn refuse_unread_body(request: Request, next: Next) -> Response {
    if !takes_body(request.method()) && !axum::body::HttpBody::is_end_stream(request.body()) {
        return body_budget::closing(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "this route takes no body; send none",
        ));
    }
    next.run(request).await
}

/// Whether requests of `method` carry a body on any route here: none of the `GET`, `HEAD`, `DELETE` or `OPTIONS`
/// routes reads one, so a body sent with one is refused unread rather than left on the connection.
fn takes_body(method: &Method) -> bool {
    !matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
    )
}

/// Answers 503 when a request takes longer than the configured bound. The handler keeps running in its own task
/// (`detach`), so giving up here never cuts a transaction short; the client may ask again and gets its outcome.
async fn within_timeout(timeout: Duration, response: impl Future<Output = Response>) -> Response {
    match tokio::time::timeout(timeout, response).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took longer than REQUEST_TIMEOUT_MS; a decision may still complete, so ask again",
        )
        .into_response(),
    }
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish for at most `grace`; connections are
/// bounded as `connections` says.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    connections: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    listen::serve(listener, router(state), connections, shutdown, grace).await
}
