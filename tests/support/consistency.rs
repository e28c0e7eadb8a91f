//! What the database must hold after a fault, given what the service answered: every decision answered 200 is
//! stored whole; a decision answered 5xx is stored whole or not at all, never half; a registration is a run with
//! all its calls or no run; a run nobody decided is untouched.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use super::load::{Answer, CALLS_PER_RUN, Kind};

/// A run's state as stored: its row and the counts of what hangs off it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
struct Stored {
    id: Uuid,
    status: String,
    calls: i64,
    results: i64,
    started: i64,
    tool_events: i64,
    approval_events: i64,
    approved: Option<bool>,
}

impl Stored {
    /// Decided whole: one approval event of this decision, a result and a tool event per call, resumed.
    fn decided_whole(&self, approved: bool) -> bool {
        self.status == "resumed"
            && self.approval_events == 1
            && self.approved == Some(approved)
            && self.calls == CALLS_PER_RUN
            && self.results == CALLS_PER_RUN
            && self.tool_events == CALLS_PER_RUN
    }

    /// Exactly as registered.
    fn untouched(&self) -> bool {
        self.status == "waiting_for_approval"
            && self.approval_events == 0
            && self.calls == CALLS_PER_RUN
            && self.results == 0
            && self.started == 0
            && self.tool_events == 0
    }
}

/// Waits (at most `within`) until no approved turn is left `resuming`: a turn whose approval was answered 5xx
/// after it was recorded is finished by the recovery task once its lease runs out.
pub async fn wait_until_no_turn_is_resuming(database_url: &str, within: Duration) {
    let mut connection = PgConnection::connect(database_url)
        .await
        .expect("the test database accepts connections again");
    let deadline = Instant::now() + within;
    loop {
        let resuming: i64 =
            sqlx::query_scalar("select count(*) from runs where status = 'resuming'")
                .fetch_one(&mut connection)
                .await
                .expect("runs can be counted");
        if resuming == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{resuming} approved turns still resuming {within:?} after the load"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    connection.close().await.expect("the connection closes");
}

/// Checks every run the load touched, and every seeded run it did not, against the answers it got.
/// Answers a one-line summary of what was found.
pub async fn check(database_url: &str, seeded: &[Uuid], answers: &[Answer]) -> String {
    let mut decisions: HashMap<Uuid, &Answer> = HashMap::new();
    let mut registrations: HashMap<Uuid, &Answer> = HashMap::new();
    for answer in answers {
        let map = match answer.kind {
            Kind::Register => &mut registrations,
            Kind::Deny | Kind::Approve => &mut decisions,
        };
        assert!(
            map.insert(answer.run, answer).is_none(),
            "the load sent one request twice for run {}",
            answer.run
        );
    }
    let mut ids: Vec<Uuid> = seeded.to_vec();
    ids.extend(registrations.keys());
    let mut connection = PgConnection::connect(database_url)
        .await
        .expect("the test database accepts connections");
    let stored: HashMap<Uuid, Stored> = sqlx::query_as::<_, Stored>(
        "select r.id, r.status,
                (select count(*) from turn_calls c where c.run_id = r.id) as calls,
                (select count(*) from turn_calls c where c.run_id = r.id and c.outcome is not null) as results,
                (select count(*) from turn_calls c where c.run_id = r.id and c.started_at is not null) as started,
                (select count(*) from tool_events e where e.run_id = r.id) as tool_events,
                (select count(*) from approval_events a where a.run_id = r.id) as approval_events,
                (select bool_or(a.approved) from approval_events a where a.run_id = r.id) as approved
         from runs r where r.id = any($1)",
    )
    .bind(&ids)
    .fetch_all(&mut connection)
    .await
    .expect("the runs can be read")
    .into_iter()
    .map(|row| (row.id, row))
    .collect();
    connection.close().await.expect("the connection closes");

    let mut problems = Vec::new();
    let (mut whole, mut untouched, mut absent) = (0, 0, 0);
    for id in &ids {
        let registration = registrations.get(id);
        let Some(run) = stored.get(id) else {
            // Only a registration that was not answered 201 may have left no run.
            match registration {
                Some(answer) if !answer.succeeded() => absent += 1,
                _ => problems.push(format!("run {id} is missing: {registration:?}")),
            }
            continue;
        };
        if run.calls != CALLS_PER_RUN {
            problems.push(format!("run {id} was registered half: {run:?}"));
            continue;
        }
        match decisions.get(id) {
            None if run.untouched() => untouched += 1,
            None => problems.push(format!("run {id} was never decided but changed: {run:?}")),
            Some(answer) => {
                let approved = answer.kind == Kind::Approve;
                if run.decided_whole(approved) {
                    whole += 1;
                } else if run.untouched() && !answer.succeeded() {
                    untouched += 1;
                } else {
                    problems.push(format!(
                        "run {id}: decision answered {:?} {:?}, stored {run:?}",
                        answer.status, answer.code
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} runs are not what the answers say:\n{}",
        problems.len(),
        problems.join("\n")
    );
    format!(
        "{} runs checked: {whole} decided whole, {untouched} untouched, {absent} registrations left no run",
        ids.len()
    )
}
