//! `GET` and `POST /approve/{run id}/{secret}`: the page of an approval link (docs/design.md §20), rendered on the
//! server, working without JavaScript.
//!
//! Opening the page decides nothing and uses nothing up: mail scanners fetch links, some running JavaScript, so only
//! a POST from the page's own form decides, carrying the link's nonce and an `Origin` equal to PUBLIC_URL's. It
//! decides as the link's person, exactly as a decision token of theirs limited to the run would (`resume::posted`:
//! §4, §5 and §18 alike, remembered decisions included), and answers 303 to the page, which then shows the verdict.
//! The link itself is the credential: the page reads and shows the run as that token would see it (§17).

mod html;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::header::{LOCATION, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use self::html::{CallLine, FormPage, ModelText, OutcomePage, RefusedPage};
use super::error::ApiError;
use super::runs::run_view;
use super::views::RunView;
use crate::approval_links;
use crate::domain::authorize::{DecisionAsk, authorize};
use crate::domain::gate::{self, ApprovedCall, Approver};
use crate::domain::remembered::RuleVerdict;
use crate::domain::remembered::{Remember, RuleScope};
use crate::domain::token_view::Reader;
use crate::domain::verdicts::DecisionForm;
use crate::domain::vocabulary::{DecidedBy, DenialReason, Outcome, RunStatus};
use crate::resume::{self, Actor, Posted, Poster, ResumeError};
use crate::state::AppState;
use crate::storage::links::{self, LinkRow};
use crate::storage::runs::{self, RunRow};
use crate::storage::users::{self, UserRow};

/// The name a link's decisions are recorded under as their client (the audit's `client_name`).
pub const CLIENT_NAME: &str = "approval-link";

/// What the page's form posts.
#[derive(Debug, Deserialize)]
pub struct Submitted {
    nonce: Option<String>,
    action: Option<String>,
}

/// A link as the page finds it.
enum Found {
    /// The link decides, or shows what was decided.
    Live(LinkRow),
    /// It decides nothing, for the reason the page says.
    Refused(StatusCode, &'static str, &'static str),
}

pub async fn show(
    State(state): State<AppState>,
    Path((run_id, secret)): Path<(String, String)>,
) -> Response {
    let page = Page::of(&state);
    let link = match find(&state, &run_id, &secret).await {
        Ok(Found::Live(link)) => link,
        Ok(Found::Refused(status, title, explanation)) => {
            return page.refused(status, title, explanation);
        }
        Err(response) => return response,
    };
    match shown(&state, &page, &link).await {
        Ok(response) => response,
        Err(response) => response,
    }
}

pub async fn submit(
    State(state): State<AppState>,
    Path((run_id, secret)): Path<(String, String)>,
    headers: HeaderMap,
    form: Result<Form<Submitted>, axum::extract::rejection::FormRejection>,
) -> Response {
    let page = Page::of(&state);
    // First what needs no lookup: a post from anywhere but the page itself decides nothing.
    let from_the_page = headers
        .get(ORIGIN)
        .and_then(|origin| origin.to_str().ok())
        .is_some_and(|origin| Some(origin) == page.origin.as_deref());
    if !from_the_page {
        return page.refused(
            StatusCode::FORBIDDEN,
            "Not decided",
            "This decision was not sent from the approval page, so nothing was recorded. Open the link and \
             decide there.",
        );
    }
    let link = match find(&state, &run_id, &secret).await {
        Ok(Found::Live(link)) => link,
        Ok(Found::Refused(status, title, explanation)) => {
            return page.refused(status, title, explanation);
        }
        Err(response) => return response,
    };
    if link.used_at.is_some() {
        return page.refused(StatusCode::GONE, "Link already used", USED);
    }
    let Ok(Form(submitted)) = form else {
        return page.refused(StatusCode::FORBIDDEN, "Not decided", NO_NONCE);
    };
    // Compared in constant time: the nonce is not the link's secret, but nothing about it should leak either.
    let nonce_matches = submitted.nonce.as_deref().is_some_and(|nonce| {
        nonce.len() == link.nonce.len()
            && nonce
                .bytes()
                .zip(link.nonce.bytes())
                .fold(0u8, |differ, (a, b)| differ | (a ^ b))
                == 0
    });
    if !nonce_matches {
        return page.refused(StatusCode::FORBIDDEN, "Not decided", NO_NONCE);
    }
    let Some((approved, remember, reason)) = submitted.action.as_deref().and_then(action) else {
        return page.refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Not decided",
            "The page sent no decision that it offers, so nothing was recorded. Open the link again.",
        );
    };
    let poster = Poster::Token {
        actor: Actor {
            tenant: link.tenant.clone(),
            client_name: CLIENT_NAME.to_owned(),
            may_decide_anonymously: false,
            token_kid: None,
        },
        uid: link.uid,
        run: Some(link.run_id),
    };
    let posted = Posted {
        turn_digest: link.turn_digest.clone(),
        form: DecisionForm::WholeTurn { approved, reason },
        remember: remember.then(|| Remember {
            calls: Vec::new(),
            every_call: Some(RuleScope::Run),
            until: None,
        }),
    };
    let decided = resume::posted::decide_posted::<ResumeError>(
        &state.resumer,
        poster,
        link.run_id,
        Ok(posted),
        None,
    )
    .await;
    match decided {
        Ok(_) => {
            state.events.committed();
            if let Err(error) = links::mark_used(&state.pool, link.run_id, link.id).await {
                // The decision stands; the page then shows it as the turn's, whether or not the link says it made it.
                tracing::warn!(run_id = %link.run_id, error = %error, "an approval link's use was not recorded");
            }
            see_the_page()
        }
        // The turn moved on or was decided meanwhile: the page shows what happened.
        Err(
            ResumeError::AlreadyDecided
            | ResumeError::StaleTurn(_)
            | ResumeError::NotAwaitingApproval
            | ResumeError::ResumeInProgress
            | ResumeError::Expired
            | ResumeError::RunCancelled,
        ) => see_the_page(),
        Err(ResumeError::Refused(refusal)) => page.refused(
            StatusCode::FORBIDDEN,
            "Not decided",
            refusal_text(refusal.code()),
        ),
        Err(ResumeError::DeniedByRule { .. }) => page.refused(
            StatusCode::CONFLICT,
            "Not decided",
            "A remembered decision denies a call of this turn, so it cannot be approved. Nothing was recorded.",
        ),
        Err(ResumeError::RunNotFound) => page.refused(StatusCode::FORBIDDEN, "Not decided", NOT_YOURS),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// What the form's button asks: approved, remembered for the run, and a denial's reason (a "never" carries `skip`,
/// as the card's does: docs/design.md §18).
fn action(text: &str) -> Option<(bool, bool, Option<DenialReason>)> {
    match text {
        "approve" => Some((true, false, None)),
        "approve_for_conversation" => Some((true, true, None)),
        "deny" => Some((false, false, None)),
        "never_in_conversation" => Some((false, true, Some(DenialReason::Skip))),
        _ => None,
    }
}

const USED: &str = "This link already decided its request. Nothing more was recorded.";
const NO_NONCE: &str = "This decision did not come from the approval page's own form, so nothing was recorded. \
                        Open the link and decide there.";
const NOT_YOURS: &str =
    "The person this link is for may no longer decide this run. Nothing was recorded.";

fn refusal_text(code: &str) -> &'static str {
    match code {
        "second_approver_required" => {
            "This run needs a second approver: you may deny it, but someone else must approve it. Nothing was \
             recorded."
        }
        "tool_not_approvable" => {
            "A call of this turn is of a tool you may not approve. You may deny it. Nothing was recorded."
        }
        _ => NOT_YOURS,
    }
}

/// 303 to the page itself (a relative `Location`: the same URL), which then shows the verdict.
fn see_the_page() -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::from_static("?decided"));
    response
}

/// The link named by the URL, or why it decides nothing. A secret of the wrong form, or a run id that is no UUID,
/// is an unknown link: no lookup tells a guesser anything.
async fn find(state: &AppState, run_id: &str, secret: &str) -> Result<Found, Response> {
    let unknown = Found::Refused(
        StatusCode::GONE,
        "Unknown link",
        "This approval link is not known. Check that it was copied whole.",
    );
    let Ok(run_id) = Uuid::parse_str(run_id) else {
        return Ok(unknown);
    };
    if !approval_links::is_well_formed(secret) {
        return Ok(unknown);
    }
    let hash = approval_links::secret_hash(secret);
    let link = links::find_by_secret(&state.pool, run_id, &hash)
        .await
        .map_err(|error| ApiError::from(error).into_response())?;
    Ok(match link {
        None => unknown,
        Some(link) if link.revoked_at.is_some() => Found::Refused(
            StatusCode::GONE,
            "Link revoked",
            "This approval link was revoked. Ask for a new one if you still need to decide.",
        ),
        // A link that decided shows what it decided, however late.
        Some(link) if link.used_at.is_some() => Found::Live(link),
        Some(link) if link.expired => Found::Refused(
            StatusCode::GONE,
            "Link expired",
            "This approval link has expired. Ask for a new one if you still need to decide.",
        ),
        Some(link) => Found::Live(link),
    })
}

/// The page of a live link: the form while its turn waits and it is unused, else what became of the turn.
async fn shown(state: &AppState, page: &Page, link: &LinkRow) -> Result<Response, Response> {
    let internal = |error: crate::storage::StorageError| ApiError::from(error).into_response();
    let run = runs::find(&state.pool, &link.tenant, link.run_id)
        .await
        .map_err(internal)?;
    let Some(run) = run else {
        return Ok(page.refused(
            StatusCode::GONE,
            "Unknown link",
            "This run is no longer kept.",
        ));
    };
    let waits = run.status() == RunStatus::WaitingForApproval
        && run.turn_index == link.turn_index
        && run.turn_digest == link.turn_digest
        && link.used_at.is_none();
    if !waits {
        return outcome(state, page, link, &run).await;
    }
    let decider = users::find(&state.pool, &link.tenant, link.uid)
        .await
        .map_err(internal)?;
    let may_decide = authorize(&DecisionAsk {
        decider_uid: Some(link.uid),
        decider: decider.as_ref().map(UserRow::facts),
        owner_uid: run.owner_uid,
        require_second_approver: false,
        approved: false,
        client_may_decide_anonymously: false,
    })
    .is_ok();
    let Some(decider) = decider.filter(|_| may_decide) else {
        return Ok(page.refused(StatusCode::FORBIDDEN, "Not yours to decide", NOT_YOURS));
    };
    let view = run_view(state, &run, Reader::Token)
        .await
        .map_err(IntoResponse::into_response)?;
    let owner = owner_name(state, &run).await.map_err(internal)?;
    let (may_approve, why_no_approve) = approval_offered(&view, &decider, run.owner_uid);
    Ok(page.render(
        StatusCode::OK,
        &FormPage {
            title: "Approval requested",
            stylesheet: page.stylesheet.clone(),
            decider: decider.username,
            owner,
            source: run.source.clone(),
            run_id: run.id.to_string(),
            expires_at: view.expires_at.map(|at| at.to_rfc3339()),
            calls: view
                .turn
                .pending_calls
                .iter()
                .map(|call| CallLine {
                    name: call.name.clone(),
                    effect: call.effect.as_str(),
                    arguments: call.arguments.clone(),
                    rule: call.rule.as_ref().map(|rule| match rule.verdict {
                        RuleVerdict::Approve => "A remembered decision would approve this call.",
                        RuleVerdict::Deny => "A remembered decision would deny this call.",
                    }),
                })
                .collect(),
            nonce: link.nonce.clone(),
            may_approve,
            why_no_approve,
        },
    ))
}

/// Whether the page offers Approve (and "Allow for this conversation") to `decider` now: §4's four-eyes rule, the
/// approver gate over the turn's calls, and no call denied by a remembered decision. Deny is always offered.
fn approval_offered(view: &RunView, decider: &UserRow, owner_uid: i64) -> (bool, &'static str) {
    let four_eyes = authorize(&DecisionAsk {
        decider_uid: Some(decider.uid),
        decider: Some(decider.facts()),
        owner_uid,
        require_second_approver: view.require_second_approver,
        approved: true,
        client_may_decide_anonymously: false,
    });
    if four_eyes.is_err() {
        return (
            false,
            "This run needs a second approver: you may deny it, but someone else must approve it.",
        );
    }
    let calls = &view.turn.pending_calls;
    let approved: Vec<ApprovedCall<'_>> = calls
        .iter()
        .map(|call| ApprovedCall {
            tool: &call.name,
            effect: call.effect,
            edited: false,
        })
        .collect();
    let approver = Approver::User {
        approvable_tools: decider.approvable_tools.as_deref(),
    };
    if gate::check(approver, &approved).is_err() {
        return (
            false,
            "A call of this turn is of a tool you may not approve. You may deny it.",
        );
    }
    let denied_by_rule = calls.iter().any(|call| {
        call.rule
            .as_ref()
            .is_some_and(|rule| rule.verdict == RuleVerdict::Deny)
    });
    if denied_by_rule {
        return (
            false,
            "A remembered decision denies a call of this turn, so it cannot be approved here.",
        );
    }
    (true, "")
}

/// What became of the link's turn: its verdict, and the fixed texts the model reads for denied and expired calls.
/// Never arguments, an edit note or a tool's results.
async fn outcome(
    state: &AppState,
    page: &Page,
    link: &LinkRow,
    run: &RunRow,
) -> Result<Response, Response> {
    let internal = |error: crate::storage::StorageError| ApiError::from(error).into_response();
    let calls = runs::calls(
        &state.pool,
        state.pool.sealer(),
        link.run_id,
        link.turn_index,
    )
    .await
    .map_err(internal)?;
    let decision = crate::storage::decision_record::find(&state.pool, link.run_id, link.turn_index)
        .await
        .map_err(internal)?;
    let outcomes: Vec<Option<Outcome>> = calls
        .iter()
        .map(|call| call.outcome().ok().flatten())
        .collect();
    let texts = calls
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| matches!(outcome, Some(Outcome::Denied | Outcome::Expired)))
        .filter_map(|(call, _)| {
            call.content.clone().map(|text| ModelText {
                tool: call.tool.clone(),
                text,
            })
        })
        .collect();
    let (title, summary) = match &decision {
        Some(decision) => {
            let by = match (decision.decider_uid, decision.decided_by()) {
                (Some(uid), _) if uid == link.uid => "you".to_owned(),
                (_, Ok(DecidedBy::RunOwner)) => "the person who started the run".to_owned(),
                (_, Ok(DecidedBy::OtherUser)) => "another person".to_owned(),
                _ => "a reviewer".to_owned(),
            };
            match decision.approved {
                Some(true) => ("Approved", format!("Approved by {by}.")),
                Some(false) => ("Denied", format!("Denied by {by}.")),
                None => ("Decided", format!("Decided call by call by {by}.")),
            }
        }
        None if outcomes.contains(&Some(Outcome::Expired)) => (
            "Expired",
            "Nobody decided before the request expired.".to_owned(),
        ),
        None if run.status() == RunStatus::Cancelled => (
            "Withdrawn",
            "The request was withdrawn before anyone decided it.".to_owned(),
        ),
        None => (
            "No longer waiting",
            "This request no longer waits for a decision.".to_owned(),
        ),
    };
    Ok(page.render(
        StatusCode::OK,
        &OutcomePage {
            title,
            stylesheet: page.stylesheet.clone(),
            summary,
            texts,
        },
    ))
}

/// The name of the person who started the run, as the host application told it; a service run has none.
async fn owner_name(
    state: &AppState,
    run: &RunRow,
) -> Result<String, crate::storage::StorageError> {
    if run.owner_uid == 0 {
        return Ok("a service run (no person)".to_owned());
    }
    let owner = users::find(&state.pool, &run.tenant, run.owner_uid).await?;
    Ok(owner.map_or_else(|| format!("user {}", run.owner_uid), |owner| owner.username))
}

/// Where the page's assets come from, and the origin its form must be posted from: PUBLIC_URL's.
struct Page {
    origin: Option<String>,
    stylesheet: String,
    style_origin: String,
}

impl Page {
    fn of(state: &AppState) -> Page {
        let base = state
            .links
            .public_url
            .as_ref()
            .map_or_else(String::new, |url| {
                url.as_str().trim_end_matches('/').to_owned()
            });
        let origin = state.links.origin();
        Page {
            style_origin: origin.clone().unwrap_or_else(|| "'self'".to_owned()),
            origin,
            stylesheet: format!("{base}/ui/approval-page.css"),
        }
    }

    fn render(&self, status: StatusCode, page: &impl askama::Template) -> Response {
        html::respond(status, page, &self.style_origin)
    }

    fn refused(
        &self,
        status: StatusCode,
        title: &'static str,
        explanation: &'static str,
    ) -> Response {
        self.render(
            status,
            &RefusedPage {
                title,
                stylesheet: self.stylesheet.clone(),
                explanation,
            },
        )
    }
}
