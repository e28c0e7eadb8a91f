//! The straightforward floor of issue 43: the tables of a straightforward implementation (schema `straight`) and
//! their seeding for bench/deny_floor_straightforward.sql, which pgbench runs with one connection per client of the
//! service phase it is alternated with.
//!
//! The tables hold what the script reads and writes, with their primary keys and an index on `run_id` where
//! events are read by run; no foreign keys (the issue names none, and each would make the floor slower, i.e. the
//! target easier). They are logged tables: the floor commits with the server's own durability, like the service.

use std::path::Path;

use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::floor::{Floor, FloorOutcome, Length};
use crate::seed::OWNERS;

type Error = Box<dyn std::error::Error + Send + Sync>;

const SCHEMA: [&str; 9] = [
    "create schema if not exists straight",
    "drop table if exists straight.outbox, straight.tool_events, straight.approval_events, straight.runs,
         straight.users",
    "create table straight.users (
         tenant text not null, uid bigint not null, username text not null, is_admin boolean not null,
         can_approve_others boolean not null, disabled boolean not null, approvable_tools text[],
         primary key (tenant, uid))",
    "create table straight.runs (
         id uuid primary key, tenant text not null, owner_uid bigint not null, status text not null,
         turn_index integer not null, messages jsonb not null,
         created_at timestamptz not null default now(), updated_at timestamptz not null default now())",
    "create table straight.approval_events (
         id bigint generated always as identity primary key, run_id uuid not null, turn_index integer not null,
         approved boolean not null, decider_uid bigint not null, decided_by text not null, reason text,
         decided_at timestamptz not null default now())",
    "create table straight.tool_events (
         id bigint generated always as identity primary key, run_id uuid not null, turn_index integer not null,
         position integer not null, call_id text not null, tool text not null, outcome text not null,
         is_error boolean not null, arguments_bytes integer not null, result_bytes integer not null,
         created_at timestamptz not null default now())",
    "create table straight.outbox (
         id bigint generated always as identity primary key, tenant text not null, run_id uuid not null,
         type text not null, data jsonb not null, created_at timestamptz not null default now())",
    "create index on straight.approval_events (run_id)",
    "create index on straight.tool_events (run_id)",
];

/// The floor's tables, made afresh, with the backend users 1..=OWNERS the service phases decide as.
pub async fn create(pool: &PgPool) -> Result<(), Error> {
    let mut tx = pool.begin().await?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&mut *tx).await?;
    }
    sqlx::query(
        "insert into straight.users (tenant, uid, username, is_admin, can_approve_others, disabled)
         select 'default', uid, 'user' || uid, false, false, false from generate_series(1, $1::bigint) as uid",
    )
    .bind(OWNERS)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Seeds `count` waiting runs holding `messages` (ids `md5('floor' || n)`, from the floor's next unused `n`);
/// returns the first `n`.
pub async fn seed(
    floor: &mut Floor,
    pool: &PgPool,
    count: i64,
    messages: &str,
) -> Result<i64, Error> {
    let (from, to) = (floor.next_n, floor.next_n + count - 1);
    floor.next_n = to + 1;
    sqlx::query(
        "insert into straight.runs (id, tenant, owner_uid, status, turn_index, messages)
         select md5('floor' || n)::uuid, 'default', n % $3 + 1, 'waiting_for_approval', 0, $4::jsonb
         from generate_series($1::bigint, $2::bigint) as n",
    )
    .bind(from)
    .bind(to)
    .bind(OWNERS)
    .bind(messages)
    .execute(pool)
    .await?;
    sqlx::query("analyze straight.runs").execute(pool).await?;
    Ok(from)
}

/// Which transaction a deny of the floor makes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// bench/deny_floor_straightforward.sql: the transcript rewritten with the results appended (the floor).
    Rewritten,
    /// bench/deny_floor_straightforward_kept.sql: the same transaction with the transcript left in place (the most
    /// that not rewriting it can gain).
    Kept,
}

impl Script {
    pub fn path(self) -> &'static str {
        match self {
            Script::Rewritten => "bench/deny_floor_straightforward.sql",
            Script::Kept => "bench/deny_floor_straightforward_kept.sql",
        }
    }
}

/// pgbench with `script` on `clients` connections for `length`, walking the runs seeded from `base`, whose transcript
/// is `messages`.
pub fn run(
    floor: &Floor,
    script: Script,
    name: &str,
    messages: &[Value],
    clients: usize,
    base: i64,
    length: Length,
) -> Result<FloorOutcome, Error> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(script.path());
    let calls = crate::agent::pending_calls(messages);
    let arguments: Vec<usize> = messages
        .last()
        .and_then(|turn| turn["tool_calls"].as_array())
        .map(|calls| {
            calls
                .iter()
                .map(|call| {
                    call["function"]["arguments"]
                        .as_str()
                        .unwrap_or_default()
                        .len()
                })
                .collect()
        })
        .unwrap_or_default();
    if calls.len() != 2 || arguments.len() != 2 {
        return Err("the straightforward floor's script denies turns of exactly two calls".into());
    }
    let results = crate::agent::denials(messages);
    let result_bytes: Vec<usize> = results
        .iter()
        .map(|result| result["content"].as_str().unwrap_or_default().len())
        .collect();
    let payload = json!({"approved": false, "run_id": Uuid::nil().to_string(), "tenant": "default", "turn_index": 0});
    let variables = [
        ("base", base.to_string()),
        ("nc", clients.to_string()),
        ("i", "0".into()),
        ("tenant", "default".into()),
        ("turn", "0".into()),
        ("callid0", calls[0].0.clone()),
        ("tool0", calls[0].1.clone()),
        ("callid1", calls[1].0.clone()),
        ("tool1", calls[1].1.clone()),
        ("argbytes0", arguments[0].to_string()),
        ("argbytes1", arguments[1].to_string()),
        ("resbytes0", result_bytes[0].to_string()),
        ("resbytes1", result_bytes[1].to_string()),
        ("results", Value::from(results).to_string()),
        ("payload", payload.to_string()),
    ];
    floor.run_script(name, &script, clients, length, &variables)
}
