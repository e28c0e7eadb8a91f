//! Remembered decisions as stored (docs/design.md §18; migrations/0017): writing, revoking and listing them, and the
//! one read a turn's registration makes of the rules that may decide it.
//!
//! The arguments a rule matches are payload: sealed like every argument when keys are configured (`sealed`).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgExecutor, Row as _};
use uuid::Uuid;

use super::sealed::{self, Column, Row};
use super::{StorageError, sql};
use crate::domain::authorize::DeciderFacts;
use crate::domain::json_equality::JsonValue;
use crate::domain::remembered::{Author, LiveRule, RuleScope, RuleVerdict};
use crate::domain::vocabulary::DenialReason;
use crate::sealing::Sealer;

/// A rule to write.
#[derive(Debug, Clone)]
pub struct NewRule<'a> {
    pub id: Uuid,
    pub tenant: &'a str,
    pub scope: RuleScope,
    /// The run of a `run` scope rule.
    pub run_id: Option<Uuid>,
    pub owner_uid: i64,
    pub tool: &'a str,
    /// The exact arguments matched (a JSON object's text); `None`: any call of the tool.
    pub arguments: Option<&'a str>,
    pub verdict: RuleVerdict,
    pub reason: Option<DenialReason>,
    pub created_by: i64,
    pub client_name: &'a str,
    pub token_kid: Option<&'a str>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A rule as stored, its arguments opened.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRow {
    pub id: Uuid,
    pub tenant: String,
    pub scope: RuleScope,
    pub run_id: Option<Uuid>,
    pub owner_uid: i64,
    pub tool: String,
    pub arguments: Option<String>,
    pub verdict: RuleVerdict,
    pub reason: Option<DenialReason>,
    pub created_by: i64,
    pub client_name: String,
    pub token_kid: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_by: Option<i64>,
    /// Neither revoked nor expired, by the database's clock when it was read.
    pub live: bool,
}

const RULE_COLUMNS: &str =
    "id, tenant, scope, run_id, owner_uid, tool, arguments, arguments_sealed, verdict, reason,
     created_by, client_name, token_kid, created_at, expires_at, revoked_at, revoked_by,
     (revoked_at is null and (expires_at is null or expires_at > now())) as live";

/// Writes a rule, and answers it as stored.
pub async fn insert(
    conn: &mut PgConnection,
    sealer: &Sealer,
    rule: &NewRule<'_>,
) -> Result<RuleRow, StorageError> {
    let arguments = sealed::seal_optional(
        sealer,
        Column::RuleArguments,
        Row::rule(rule.id),
        rule.arguments,
    );
    let row = sql::query(sqlx::AssertSqlSafe(format!(
        "insert into remembered_rules (id, tenant, scope, run_id, owner_uid, tool, arguments, arguments_sealed,
                                       verdict, reason, created_by, client_name, token_kid, expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         returning {RULE_COLUMNS}"
    )))
    .bind(rule.id)
    .bind(rule.tenant)
    .bind(rule.scope.as_str())
    .bind(rule.run_id)
    .bind(rule.owner_uid)
    .bind(rule.tool)
    .bind(arguments.clear)
    .bind(arguments.sealed)
    .bind(rule.verdict.as_str())
    .bind(rule.reason.map(DenialReason::as_str))
    .bind(rule.created_by)
    .bind(rule.client_name)
    .bind(rule.token_kid)
    .bind(rule.expires_at)
    .fetch_one(conn)
    .await?;
    rule_row(sealer, &row)
}

/// The rule `id` of the tenant, under its row lock when `lock` (a revocation); another tenant's is `None`.
pub async fn find(
    conn: &mut PgConnection,
    sealer: &Sealer,
    tenant: &str,
    id: Uuid,
    lock: bool,
) -> Result<Option<RuleRow>, StorageError> {
    let row = sql::query(sqlx::AssertSqlSafe(format!(
        "select {RULE_COLUMNS} from remembered_rules where id = $1 and tenant = $2{}",
        if lock { " for update" } else { "" }
    )))
    .bind(id)
    .bind(tenant)
    .fetch_optional(conn)
    .await?;
    row.map(|row| rule_row(sealer, &row)).transpose()
}

/// Revokes a live rule (the caller holds its lock); a rule already revoked keeps its first revocation.
pub async fn revoke(
    conn: &mut PgConnection,
    sealer: &Sealer,
    id: Uuid,
    revoked_by: i64,
) -> Result<RuleRow, StorageError> {
    let row = sql::query(sqlx::AssertSqlSafe(format!(
        "update remembered_rules set revoked_at = now(), revoked_by = $2
         where id = $1 and revoked_at is null
         returning {RULE_COLUMNS}"
    )))
    .bind(id)
    .bind(revoked_by)
    .fetch_one(conn)
    .await?;
    rule_row(sealer, &row)
}

/// The rules of one run (`run` scope), newest first, revoked and expired ones included (the audit).
pub async fn of_run(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    tenant: &str,
    run_id: Uuid,
) -> Result<Vec<RuleRow>, StorageError> {
    let rows = sql::query(sqlx::AssertSqlSafe(format!(
        "select {RULE_COLUMNS} from remembered_rules where run_id = $1 and tenant = $2
         order by created_at desc, id"
    )))
    .bind(run_id)
    .bind(tenant)
    .fetch_all(db)
    .await?;
    rows.iter().map(|row| rule_row(sealer, row)).collect()
}

/// The rules for an owner's runs (both scopes), newest first, revoked and expired ones included.
pub async fn of_owner(
    db: impl PgExecutor<'_>,
    sealer: &Sealer,
    tenant: &str,
    owner_uid: i64,
) -> Result<Vec<RuleRow>, StorageError> {
    let rows = sql::query(sqlx::AssertSqlSafe(format!(
        "select {RULE_COLUMNS} from remembered_rules where tenant = $1 and owner_uid = $2
         order by created_at desc, id"
    )))
    .bind(tenant)
    .bind(owner_uid)
    .fetch_all(db)
    .await?;
    rows.iter().map(|row| rule_row(sealer, row)).collect()
}

/// What a new run's registration needs to know of its owner, in one statement: whether the owner is a known user,
/// and whether any live `owner`-scope rule of theirs names one of `tools` (a new run has no `run`-scope rule). When
/// none does, the registration reads no rule at all: a registration without rules costs the statements it did before
/// rules existed (docs/design.md §18, "Cost"). A rule made or revoked after this read and before the registration
/// commits is a race either outcome of which §18 allows; a revocation's guarantee holds because a registration that
/// finds rules reads them again, share-locked ([`live_for_turn`]).
pub async fn owner_of_new_run(
    conn: &mut PgConnection,
    tenant: &str,
    owner_uid: i64,
    tools: &[&str],
) -> Result<OwnerOfNewRun, StorageError> {
    let (known, ruled) = sql::query_as::<(bool, bool)>(
        "select exists (select 1 from backend_users where tenant = $1 and uid = $2),
                exists (select 1 from remembered_rules r
                        where r.scope = 'owner' and r.tenant = $1 and r.owner_uid = $2 and r.tool = any($3)
                          and r.revoked_at is null and r.expires_at > now())",
    )
    .bind(tenant)
    .bind(owner_uid)
    .bind(tools)
    .fetch_one(conn)
    .await?;
    Ok(OwnerOfNewRun { known, ruled })
}

/// The answer of [`owner_of_new_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerOfNewRun {
    /// The owner is a user of the tenant.
    pub known: bool,
    /// Some live owner-scope rule of theirs names a tool of the turn.
    pub ruled: bool,
}

/// The live rules that may decide a turn of `run_id` (none yet at a registration) owned by `owner_uid`, for these
/// tools, each with its author's row: one indexed read (`remembered_rules_run`, `remembered_rules_owner`), never a
/// scan of the tenant's rules. The rules found are share-locked until the caller's transaction ends, so a revocation
/// waits for a turn that uses the rule to commit, and a turn that reads after a revocation committed does not see it:
/// a registration that commits after the revocation's answer never uses the rule (docs/design.md §18).
pub async fn live_for_turn(
    conn: &mut PgConnection,
    sealer: &Sealer,
    tenant: &str,
    run_id: Option<Uuid>,
    owner_uid: i64,
    tools: &[&str],
) -> Result<Vec<LiveRule>, StorageError> {
    let rows = sql::query(
        "select r.id, r.tool, r.arguments, r.arguments_sealed, r.verdict, r.reason, r.created_by, r.created_at,
                u.uid is not null as author_found, u.is_admin, u.can_approve_others, u.disabled,
                u.approvable_tools
         from remembered_rules r
         left join backend_users u on u.tenant = r.tenant and u.uid = r.created_by
         where r.revoked_at is null and (r.expires_at is null or r.expires_at > now()) and r.tool = any($4)
           and ((r.scope = 'run' and r.run_id = $2)
                or (r.scope = 'owner' and r.tenant = $1 and r.owner_uid = $3))
         for share of r",
    )
    .bind(tenant)
    .bind(run_id)
    .bind(owner_uid)
    .bind(tools)
    .fetch_all(conn)
    .await?;
    rows.iter().map(|row| live_rule(sealer, row)).collect()
}

fn live_rule(sealer: &Sealer, row: &PgRow) -> Result<LiveRule, StorageError> {
    live_rule_named(sealer, row, "")
}

/// A live rule read from columns named as [`live_for_turn`] names them, each with `prefix` before its name (so that
/// a statement reading calls with their rules tells a rule's columns from a call's).
pub(super) fn live_rule_named(
    sealer: &Sealer,
    row: &PgRow,
    prefix: &str,
) -> Result<LiveRule, StorageError> {
    let column = |name: &str| format!("{prefix}{name}");
    let id: Uuid = row.try_get(column("id").as_str())?;
    let arguments = open_arguments(sealer, id, row, prefix)?
        .map(|text| {
            JsonValue::parse(&text)
                .ok_or_else(|| StorageError::Corrupt(format!("the arguments of rule {id}")))
        })
        .transpose()?;
    let facts = if row.try_get(column("author_found").as_str())? {
        Some(DeciderFacts {
            is_admin: row.try_get(column("is_admin").as_str())?,
            can_approve_others: row.try_get(column("can_approve_others").as_str())?,
            disabled: row.try_get(column("disabled").as_str())?,
        })
    } else {
        None
    };
    Ok(LiveRule {
        id,
        tool: row.try_get(column("tool").as_str())?,
        arguments,
        verdict: verdict(id, row, prefix)?,
        reason: reason(id, row, prefix)?,
        created_by: row.try_get(column("created_by").as_str())?,
        created_at: row.try_get(column("created_at").as_str())?,
        author: Author {
            facts,
            approvable_tools: row.try_get(column("approvable_tools").as_str())?,
        },
    })
}

fn rule_row(sealer: &Sealer, row: &PgRow) -> Result<RuleRow, StorageError> {
    let id: Uuid = row.try_get("id")?;
    let scope: String = row.try_get("scope")?;
    Ok(RuleRow {
        id,
        tenant: row.try_get("tenant")?,
        scope: RuleScope::parse(&scope)
            .ok_or_else(|| StorageError::Corrupt(format!("the scope of rule {id}")))?,
        run_id: row.try_get("run_id")?,
        owner_uid: row.try_get("owner_uid")?,
        tool: row.try_get("tool")?,
        arguments: open_arguments(sealer, id, row, "")?,
        verdict: verdict(id, row, "")?,
        reason: reason(id, row, "")?,
        created_by: row.try_get("created_by")?,
        client_name: row.try_get("client_name")?,
        token_kid: row.try_get("token_kid")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
        revoked_by: row.try_get("revoked_by")?,
        live: row.try_get("live")?,
    })
}

fn open_arguments(
    sealer: &Sealer,
    id: Uuid,
    row: &PgRow,
    prefix: &str,
) -> Result<Option<String>, StorageError> {
    let sealed: Option<Vec<u8>> = row.try_get(format!("{prefix}arguments_sealed").as_str())?;
    sealed::open(
        sealer,
        Column::RuleArguments,
        Row::rule(id),
        row.try_get(format!("{prefix}arguments").as_str())?,
        sealed.as_deref(),
    )
}

fn verdict(id: Uuid, row: &PgRow, prefix: &str) -> Result<RuleVerdict, StorageError> {
    let text: String = row.try_get(format!("{prefix}verdict").as_str())?;
    RuleVerdict::parse(&text)
        .ok_or_else(|| StorageError::Corrupt(format!("the verdict of rule {id}")))
}

fn reason(id: Uuid, row: &PgRow, prefix: &str) -> Result<Option<DenialReason>, StorageError> {
    let text: Option<String> = row.try_get(format!("{prefix}reason").as_str())?;
    text.map(|text| {
        DenialReason::parse(&text)
            .ok_or_else(|| StorageError::Corrupt(format!("the reason of rule {id}")))
    })
    .transpose()
}
