//! Making and revoking remembered decisions (docs/design.md §18), each in one transaction with its audit and its
//! event: who may make one is who could make the decision it stands for (§4), checked against the run under its row
//! lock (`run` scope); `owner` scope is the owner's or an admin's.
//!
//! A run-scope rule is written under its run's row lock, the lock a turn's registration holds while it reads the
//! rules: a rule made while another instance registers a turn of that run either commits first and is read by the
//! registration, or waits for it and decides later turns only.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::resumer::Resumer;
use crate::domain::authorize::{self, DeciderFacts, DecisionAsk, Refusal};
use crate::domain::event_payloads::{EventType, RuleEventData};
use crate::domain::gate::{self, ApprovedCall, Approver};
use crate::domain::remembered::{self, RuleScope, RuleVerdict};
use crate::domain::vocabulary::{DenialReason, Effect};
use crate::storage::StorageError;
use crate::storage::outbox;
use crate::storage::remembered_rules::{self, NewRule, RuleRow};
use crate::storage::runs::{self, RunRow};
use crate::storage::users;

/// Why a rule is not made or not revoked; nothing is written.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("no such run")]
    RunNotFound,
    #[error("no such rule")]
    RuleNotFound,
    #[error("the owner uid names no backend user")]
    UnknownOwner,
    /// The author could not make the decision the rule stands for (§4).
    #[error("rule refused: {0}")]
    Refused(#[from] Refusal),
    #[error("an owner-scope rule is made by the owner or an admin")]
    NotOwnerOrAdmin,
    #[error("a rule is revoked by its author, the run's owner (run scope) or an admin")]
    NotRevocable,
    #[error("remember: \"owner\" makes rules that end: give remember_until")]
    OwnerWithoutEnd,
    #[error("a decision without a decider uid remembers nothing: no rule is anonymous")]
    Anonymous,
    #[error("a decision token remembers a verdict for its run only (remember: \"run\")")]
    TokenOwnerScope,
    #[error("the verdict on call {0:?} edits its arguments: an edited verdict is not remembered")]
    Edited(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<sqlx::Error> for RuleError {
    fn from(error: sqlx::Error) -> Self {
        RuleError::Storage(error.into())
    }
}

/// Who a rule is made through: the API client, and a decision token's key when a token made it.
#[derive(Debug, Clone, Copy)]
pub struct Through<'a> {
    pub tenant: &'a str,
    pub client_name: &'a str,
    pub token_kid: Option<&'a str>,
}

/// What a rule says, as asked.
#[derive(Debug, Clone)]
pub struct RuleAsk<'a> {
    pub created_by: i64,
    pub tool: &'a str,
    pub arguments: Option<&'a str>,
    pub verdict: RuleVerdict,
    pub reason: Option<DenialReason>,
}

/// Makes a `run` scope rule on the run `run_id`, which the caller has shown the credential may see. `may_see` judges
/// the locked run once more for a decision token (its user may decide it), so a run the user lost meanwhile is 404.
pub async fn make_run_rule(
    resumer: &Resumer,
    through: Through<'_>,
    run_id: Uuid,
    ask: &RuleAsk<'_>,
    may_see: impl Fn(&RunRow, Option<&DeciderFacts>) -> bool,
) -> Result<RuleRow, RuleError> {
    let mut tx = resumer.pool.begin().await?;
    let run = runs::lock(&mut tx, through.tenant, run_id)
        .await?
        .ok_or(RuleError::RunNotFound)?;
    let rule = make_on_locked_run(&mut tx, resumer, through, &run, ask, &may_see).await?;
    tx.commit().await?;
    Ok(rule)
}

/// Makes a `run` scope rule inside the caller's transaction, which holds `run`'s row lock: the route's, or the
/// decision's that remembers its verdicts.
pub(super) async fn make_on_locked_run(
    conn: &mut PgConnection,
    resumer: &Resumer,
    through: Through<'_>,
    run: &RunRow,
    ask: &RuleAsk<'_>,
    may_see: &impl Fn(&RunRow, Option<&DeciderFacts>) -> bool,
) -> Result<RuleRow, RuleError> {
    let author = users::find(&mut *conn, through.tenant, ask.created_by).await?;
    let facts = author.as_ref().map(facts_of);
    if !may_see(run, facts.as_ref()) {
        return Err(RuleError::RunNotFound);
    }
    let declared = run.declared(ask.tool).map(|tool| tool.effect);
    let effect = resumer.executors.effect(ask.tool, declared);
    authorize::authorize(&DecisionAsk {
        decider_uid: Some(ask.created_by),
        decider: facts,
        owner_uid: run.owner_uid,
        require_second_approver: run.require_second_approver,
        approved: ask.verdict.approves(),
        client_may_decide_anonymously: false,
    })?;
    gated(
        ask,
        author.as_ref().and_then(|a| a.approvable_tools.as_deref()),
        effect,
    )?;
    let new_rule = NewRule {
        id: Uuid::new_v4(),
        tenant: through.tenant,
        scope: RuleScope::Run,
        run_id: Some(run.id),
        owner_uid: run.owner_uid,
        tool: ask.tool,
        arguments: ask.arguments,
        verdict: ask.verdict,
        reason: ask.reason,
        created_by: ask.created_by,
        client_name: through.client_name,
        token_kid: through.token_kid,
        expires_at: None,
    };
    write(conn, resumer, &new_rule).await
}

/// Makes an `owner` scope rule: for the owner's runs of one tool until `expires_at` (already bounded by the caller),
/// by the owner or an admin, under §4 (enabled; an approve rule of a write within the author's approvable tools).
pub async fn make_owner_rule(
    resumer: &Resumer,
    through: Through<'_>,
    owner_uid: i64,
    ask: &RuleAsk<'_>,
    expires_at: DateTime<Utc>,
) -> Result<RuleRow, RuleError> {
    let mut tx = resumer.pool.begin().await?;
    let rule = make_owner_on(&mut tx, resumer, through, owner_uid, ask, expires_at).await?;
    tx.commit().await?;
    Ok(rule)
}

/// Makes an `owner` scope rule inside the caller's transaction: the route's, or the decision's that remembers it.
pub(super) async fn make_owner_on(
    conn: &mut PgConnection,
    resumer: &Resumer,
    through: Through<'_>,
    owner_uid: i64,
    ask: &RuleAsk<'_>,
    expires_at: DateTime<Utc>,
) -> Result<RuleRow, RuleError> {
    if users::find(&mut *conn, through.tenant, owner_uid)
        .await?
        .is_none()
    {
        return Err(RuleError::UnknownOwner);
    }
    let author = users::find(&mut *conn, through.tenant, ask.created_by).await?;
    let facts = author
        .as_ref()
        .map(facts_of)
        .ok_or(Refusal::UnknownDecider)?;
    if facts.disabled {
        return Err(Refusal::DisabledDecider.into());
    }
    if ask.created_by != owner_uid && !facts.is_admin {
        return Err(RuleError::NotOwnerOrAdmin);
    }
    // The configuration's effect: each run's own declaration is held to the gate again when the rule is used.
    let effect = resumer.executors.effect(ask.tool, None);
    gated(
        ask,
        author.as_ref().and_then(|a| a.approvable_tools.as_deref()),
        effect,
    )?;
    let new_rule = NewRule {
        id: Uuid::new_v4(),
        tenant: through.tenant,
        scope: RuleScope::Owner,
        run_id: None,
        owner_uid,
        tool: ask.tool,
        arguments: ask.arguments,
        verdict: ask.verdict,
        reason: ask.reason,
        created_by: ask.created_by,
        client_name: through.client_name,
        token_kid: through.token_kid,
        expires_at: Some(expires_at),
    };
    write(conn, resumer, &new_rule).await
}

/// Who asks to revoke a rule.
#[derive(Debug, Clone, Copy)]
pub enum Revoker {
    /// A key with `decisions:write`, naming the backend user on whose behalf it revokes.
    Key { uid: i64 },
    /// A decision token: its user's own rules only (on its one run, when it names one); any other is not found.
    Token { uid: i64, run: Option<Uuid> },
}

/// Revokes the rule `id`: by its author, an admin, or the run's owner for `run` scope ([`remembered::may_revoke`]). A
/// rule already revoked is answered as it stands. Under the run's row lock first for a run-scope rule (the order every writer of a run keeps), then the
/// rule's: a turn registering with the rule holds it share-locked, so the revocation answers only once that turn
/// committed, and every turn after it reads the rule revoked.
pub async fn revoke(
    resumer: &Resumer,
    tenant: &str,
    id: Uuid,
    revoker: Revoker,
) -> Result<RuleRow, RuleError> {
    let sealer = resumer.pool.sealer();
    let mut tx = resumer.pool.begin().await?;
    let seen = remembered_rules::find(&mut tx, sealer, tenant, id, false)
        .await?
        .ok_or(RuleError::RuleNotFound)?;
    if let Some(run_id) = seen.run_id {
        runs::lock(&mut tx, tenant, run_id)
            .await?
            .ok_or(RuleError::RuleNotFound)?;
    }
    let rule = remembered_rules::find(&mut tx, sealer, tenant, id, true)
        .await?
        .ok_or(RuleError::RuleNotFound)?;
    let uid = match revoker {
        Revoker::Token { uid, run } => {
            if rule.created_by != uid || run.is_some_and(|bound| Some(bound) != rule.run_id) {
                return Err(RuleError::RuleNotFound);
            }
            uid
        }
        Revoker::Key { uid } => uid,
    };
    let facts = users::find(&mut *tx, tenant, uid)
        .await?
        .as_ref()
        .map(facts_of)
        .ok_or(Refusal::UnknownDecider)?;
    if facts.disabled {
        return Err(Refusal::DisabledDecider.into());
    }
    if !remembered::may_revoke(
        rule.scope,
        rule.created_by,
        rule.owner_uid,
        uid,
        facts.is_admin,
    ) {
        return Err(RuleError::NotRevocable);
    }
    if rule.revoked_at.is_some() {
        tx.rollback().await?;
        return Ok(rule);
    }
    let revoked = remembered_rules::revoke(&mut tx, sealer, id, uid).await?;
    outbox::insert_rule_event(&mut tx, EventType::RuleRevoked, &event_data(&revoked)).await?;
    tx.commit().await?;
    tracing::info!(rule_id = %id, revoked_by = uid, "rule revoked");
    Ok(revoked)
}

/// The approver gate of §4 over the call an approve rule releases; a deny rule releases nothing.
fn gated(
    ask: &RuleAsk<'_>,
    approvable_tools: Option<&[String]>,
    effect: Effect,
) -> Result<(), Refusal> {
    if !ask.verdict.approves() {
        return Ok(());
    }
    gate::check(
        Approver::User { approvable_tools },
        &[ApprovedCall {
            tool: ask.tool,
            effect,
            edited: false,
        }],
    )
}

async fn write(
    conn: &mut PgConnection,
    resumer: &Resumer,
    new_rule: &NewRule<'_>,
) -> Result<RuleRow, RuleError> {
    let rule = remembered_rules::insert(&mut *conn, resumer.pool.sealer(), new_rule).await?;
    outbox::insert_rule_event(&mut *conn, EventType::RuleCreated, &event_data(&rule)).await?;
    tracing::info!(rule_id = %rule.id, scope = rule.scope.as_str(), verdict = rule.verdict.as_str(),
                   created_by = rule.created_by, "rule made");
    Ok(rule)
}

fn facts_of(user: &users::UserRow) -> DeciderFacts {
    DeciderFacts {
        is_admin: user.is_admin,
        can_approve_others: user.can_approve_others,
        disabled: user.disabled,
    }
}

/// A rule's event: ids, tool, verdict and scope, and who made or revoked it; never its arguments.
fn event_data(rule: &RuleRow) -> RuleEventData {
    RuleEventData {
        rule_id: rule.id,
        tenant: rule.tenant.clone(),
        scope: rule.scope.as_str(),
        run_id: rule.run_id,
        owner_uid: rule.owner_uid,
        tool: rule.tool.clone(),
        verdict: rule.verdict.as_str(),
        created_by: rule.created_by,
        revoked_by: rule.revoked_by,
    }
}
