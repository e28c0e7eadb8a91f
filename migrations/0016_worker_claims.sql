-- Claims on released calls (docs/design.md §15, "Claims"): before a worker runs the calls a decision released to it,
-- it claims the run's released turn (POST /v1/runs/{id}/claim) for a lease that lasts until `until`, on the database's
-- clock. While the lease lives every other claim is refused and results are taken only under it; a lease that lapsed
-- with calls still unposted ends them with the `interrupted` result, once.
--
-- One row per released turn that was ever claimed. The primary key (run_id, turn_index) is the backstop of "one
-- claimant at a time": a turn is claimed once, and its claim either ends the turn (every result posted, or the
-- lapse) or the run is cancelled; neither leaves anything to claim again. Every writer takes the run's row lock
-- first (as for results and cancels), so the key is never the thing that decides; it only refuses a second claim
-- that a mistake in that order would let through.
--
-- `claim_id` is what the worker names in a renewal and in its results; unique across runs, so a claim is known by
-- its id alone. `until` moves forward at each renewal. `lapsed_at` is set, exactly once (the statement that sets it
-- requires it null), by whoever wrote the lapse: the sweeper, or the claim or results post that found it first.
-- `ended_at` is set when the claim stops being live for any reason (the turn's last result, the lapse, a cancel), so
-- that the sweeper's index holds only the claims that may still lapse, not every claim ever made.

create table worker_claims (
    run_id      uuid not null references runs (id) on delete cascade,
    turn_index  non_negative_integer not null,
    claim_id    uuid not null unique,
    claimed_at  timestamptz not null default now(),
    until       timestamptz not null,
    lapsed_at   timestamptz,
    ended_at    timestamptz,
    primary key (run_id, turn_index),
    -- A lapse ends the claim in the same statement.
    constraint worker_claims_lapse_ends check (lapsed_at is null or ended_at is not null)
);

-- The sweeper's read: live claims in the order they lapse.
create index worker_claims_due on worker_claims (until) where ended_at is null;
