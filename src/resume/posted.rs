//! The decision route's one call: a decision as it was posted, decided from the start. It reads the run (for an API
//! key not looked up yet, the key's client in the same statement), checks the key's holder or the token's user,
//! refuses a model input the run's transcript cannot be shown in, then decides ([`decide`]) and hands back what the
//! answer is rendered from. Every refusal is the one a key checked first would get, in the same order.

use uuid::Uuid;

use super::decide::decide;
use super::error::ResumeError;
use super::resumer::Resumer;
use super::rules::{Actor, DecisionRequest};
use super::turn::Resumed;
use crate::domain::authorize;
use crate::domain::model_input::{self, ModelInputFormat, RenderError};
use crate::domain::remembered::Remember;
use crate::domain::scopes::Scope;
use crate::domain::token_view::{self, Audience};
use crate::domain::transcript_text::TranscriptText;
use crate::domain::verdicts::DecisionForm;
use crate::storage::StorageError;
use crate::storage::run_snapshot::{self, KeyHolder, Reader, Snapshot};

/// The scopes that let a client decide at all, as the decision route requires them of a key looked up first
/// (`http::extract::scope::Decisions`): one of them, whichever decider the body names.
const DECISION_SCOPES: [Scope; 2] = [Scope::DecisionsWrite, Scope::DecisionsAnonymous];

/// Who posted a decision, and the decider it names.
pub enum Poster<'a> {
    /// An API key found live lately and not looked up for this request: the run's read looks up its client, which
    /// must hold a decision scope and the one the decider calls for (without it the run is not even read).
    Key {
        hash: &'a [u8],
        decider_uid: Option<i64>,
    },
    /// A client whose key was looked up and whose scope for the decider was checked.
    Client {
        actor: Actor,
        decider_uid: Option<i64>,
    },
    /// A verified decision token: its user decides, and only a run that user may decide (the one the token names,
    /// when it names one); any other is answered like a missing one.
    Token {
        actor: Actor,
        uid: i64,
        run: Option<Uuid>,
    },
}

impl Poster<'_> {
    fn decider_uid(&self) -> Option<i64> {
        match self {
            Poster::Key { decider_uid, .. } | Poster::Client { decider_uid, .. } => *decider_uid,
            Poster::Token { uid, .. } => Some(*uid),
        }
    }
}

/// A decision's body, once the checks that need no run passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub turn_digest: String,
    pub form: DecisionForm,
    /// The verdicts to remember as rules (docs/design.md §18).
    pub remember: Option<Remember>,
}

/// A posted decision, decided: the resumed turn, and who reads the answer: a key whole, a decision token at the run's
/// privacy level (the stricter of the service's and the run's, docs/design.md §13).
pub struct Decided {
    pub resumed: Resumed,
    pub audience: Audience,
}

/// Decides the decision `poster` posted on `run_id`, and resumes the run. `posted` is the body as the route checked
/// it, refused (if it is) only once the poster is known to see the run: after a key's client, as a key looked up
/// first is, and after a token's user. With a `format`, a native run that cannot be shown in it is refused before
/// anything is recorded.
pub async fn decide_posted<E: From<ResumeError>>(
    resumer: &Resumer,
    poster: Poster<'_>,
    run_id: Uuid,
    posted: Result<Posted, E>,
    format: Option<ModelInputFormat>,
) -> Result<Decided, E> {
    if let Poster::Token {
        run: Some(bound), ..
    } = poster
        && bound != run_id
    {
        return Err(ResumeError::RunNotFound.into());
    }
    let decider_uid = poster.decider_uid();
    // The scope the named decider (or nobody) calls for: without it a key's client is not even read the run.
    let scope = match decider_uid {
        Some(_) => Scope::DecisionsWrite,
        None => Scope::DecisionsAnonymous,
    };
    let reader = match &poster {
        Poster::Key { hash, .. } => Reader::KeyHash {
            hash,
            scope: scope.as_str(),
        },
        Poster::Client { actor, .. } | Poster::Token { actor, .. } => Reader::Tenant(&actor.tenant),
    };
    let mut snapshot = read(resumer, reader, run_id, decider_uid).await?;
    let (actor, audience) = match poster {
        Poster::Key { .. } => (key_actor(snapshot.key_holder.take(), scope)?, Audience::KEY),
        Poster::Client { actor, .. } => (actor, Audience::KEY),
        Poster::Token { actor, uid, .. } => {
            // Judged from the run and the user's row as this read found them.
            let Some(found) = snapshot.run.as_ref().filter(|found| {
                let facts = &found.facts;
                authorize::token_user_may_decide(uid, facts.run.owner_uid, facts.decider.as_ref())
            }) else {
                return Err(ResumeError::RunNotFound.into());
            };
            let level = resumer
                .privacy_floor
                .stricter(found.facts.run.privacy_level());
            (actor, Audience::of(token_view::Reader::Token, level))
        }
    };
    let Posted {
        turn_digest,
        form,
        remember,
    } = posted?;
    if let (Some(run), Some(format)) = (&snapshot.run, format) {
        representable(format, &run.facts.transcript, run_id)?;
    }
    let request = DecisionRequest {
        run_id,
        decider_uid,
        turn_digest,
        form,
        remember,
    };
    let resumed = decide(resumer, &actor, &request, snapshot).await?;
    Ok(Decided { resumed, audience })
}

/// Reads the run for a decision without its lock, and the key's client with it ([`decide`]'s first statement).
pub async fn read(
    resumer: &Resumer,
    reader: Reader<'_>,
    run_id: Uuid,
    decider_uid: Option<i64>,
) -> Result<Snapshot, ResumeError> {
    Ok(run_snapshot::read(&resumer.pool, reader, run_id, decider_uid).await?)
}

/// The key's client as the run's read found it (`None`: no live client holds the key): it must hold a decision
/// scope (401, then 403, as a key looked up first is refused), then `scope`, which the body's decider calls for.
fn key_actor(holder: Option<KeyHolder>, scope: Scope) -> Result<Actor, ResumeError> {
    let holder = holder.ok_or(ResumeError::UnknownKey)?;
    tracing::Span::current().record("client", holder.name.as_str());
    let has = |wanted: Scope| holder.scopes.iter().any(|held| held == wanted.as_str());
    if !DECISION_SCOPES.iter().any(|any| has(*any)) {
        let names: Vec<&str> = DECISION_SCOPES.iter().map(|any| any.as_str()).collect();
        return Err(ResumeError::MissingScope(names.join(" or ")));
    }
    if !has(scope) {
        return Err(ResumeError::MissingScope(scope.as_str().to_owned()));
    }
    let may_decide_anonymously = has(Scope::DecisionsAnonymous);
    Ok(Actor {
        tenant: holder.tenant,
        client_name: holder.name,
        may_decide_anonymously,
        token_kid: None,
    })
}

/// Refuses a model input in `format` that would drop something of a native transcript, or name a tool in a way
/// `format`'s provider refuses (an OpenAI chat run's too: `domain::provider_names`). Only a run asked for in another
/// format than its own is read for this: the results never decide it.
fn representable(
    format: ModelInputFormat,
    transcript: &TranscriptText,
    run_id: Uuid,
) -> Result<(), ResumeError> {
    if format == transcript.format() {
        return Ok(());
    }
    match model_input::render_text(format, transcript, &[], &[]) {
        Ok(_) => Ok(()),
        Err(RenderError::NotRepresentable(detail)) => Err(ResumeError::NotRepresentable(detail)),
        Err(RenderError::Corrupt(error)) => {
            Err(StorageError::Corrupt(format!("run {run_id}: {error}")).into())
        }
    }
}
