#!/usr/bin/env bash
# The webhook listing's backlog count and the claim, before and after their bounded reads (docs/design.md §17), on a
# database of their own: 500,100 events of six tenants, 20 subscriptions of tenant `t` with cursors spread over its
# first 100,000 events, 3 of a tenant `small` with 100 events, and 977 of four other tenants. Prints each statement's
# execution time and shared buffers, three runs each, with JIT off (JIT's compile time depends on the cost estimate, not
# the work).
#
#   cargo build --bin approval-resume && bash bench/webhook_listing_explain.sh
#
# Needs psql and the Postgres of the tests (127.0.0.1:5432, user postgres). Drops and recreates its database.
set -euo pipefail
cd "$(dirname "$0")/.."

db=webhook_listing_explain
url="postgres://postgres@127.0.0.1:5432/$db"
psql=(psql -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "drop database if exists $db" -c "create database $db" >/dev/null 2>&1
DATABASE_URL="$url" LOG_LEVEL=warn target/debug/approval-resume migrate >/dev/null

"${psql[@]}" -d "$db" <<'SQL'
insert into webhook_subscriptions (id, tenant, url, event_types, secret, cursor_xid)
select gen_random_uuid(), 't', 'http://127.0.0.1:9/' || n,
       case when n % 2 = 0 then array['run.waiting','run.resumed','run.expired','run.cancelled','run.completed']
            else array['run.resumed'] end,
       'whsec_x', '0'::xid8
from generate_series(1, 20) n;
insert into events (tenant, run_id, type, data)
select 't', gen_random_uuid(), case when n % 2 = 0 then 'run.waiting' else 'run.resumed' end, '{}'
from generate_series(1, 200000) n;
insert into events (tenant, run_id, type, data)
select 'other' || (n % 4), gen_random_uuid(), 'run.waiting', '{}' from generate_series(1, 300000) n;
insert into events (tenant, run_id, type, data)
select 'small', gen_random_uuid(), 'run.waiting', '{}' from generate_series(1, 100) n;
update webhook_subscriptions s set cursor_xid = e.xid, cursor_id = e.id
from (select row_number() over (order by xid, id) as n, xid, id from events where tenant = 't') e,
     (select id, row_number() over (order by id) as k from webhook_subscriptions) k
where k.id = s.id and e.n = k.k * 5000;
insert into webhook_subscriptions (id, tenant, url, event_types, secret, cursor_xid)
select gen_random_uuid(), 'small', 'http://127.0.0.1:9/s' || n, array['run.waiting'], 'whsec_x', '0'::xid8
from generate_series(1, 3) n;
insert into webhook_subscriptions (id, tenant, url, event_types, secret, cursor_xid)
select gen_random_uuid(), 'other' || (n % 4), 'http://127.0.0.1:9/o' || n, array['run.waiting'], 'whsec_x', '0'::xid8
from generate_series(1, 977) n;
vacuum analyze events;
vacuum analyze webhook_subscriptions;
SQL

before_backlog="(select count(*) from events e
     where e.tenant = s.tenant and (e.xid, e.id) > (s.cursor_xid, s.cursor_id) and e.type = any(s.event_types))"
after_backlog="(select count(*) filter (where e.type = any(s.event_types)) from (select e.type from events e
     where e.tenant = s.tenant and (e.tenant, e.xid, e.id) > (s.tenant, s.cursor_xid, s.cursor_id)
     order by e.tenant, e.xid, e.id limit 1000) e)"
readable="(e.xid, e.id) > (w.cursor_xid, w.cursor_id) and e.xid < greatest('0'::text::xid8, events_readable_below())"
free="(w.lease_until is null or w.lease_until < now()) and w.next_attempt_at <= now()"
before_claim="update webhook_subscriptions s set lease_owner = gen_random_uuid(), lease_until = now() + interval '20 s'
 where s.id in (select w.id from webhook_subscriptions w
     where $free and exists (select 1 from events e where e.tenant = w.tenant and $readable and e.type = any(w.event_types))
     order by w.next_attempt_at limit 16 for update skip locked)"
after_claim="with ranked as materialized (
    select w.id, row_number() over (partition by w.tenant order by w.next_attempt_at, w.id) + coalesce(h.held, 0) as turn,
           max(w.next_attempt_at) over (partition by w.tenant) as tenant_served
    from webhook_subscriptions w
    left join (select tenant, count(*) as held from webhook_subscriptions where lease_until >= now() group by tenant) h
           on h.tenant = w.tenant
    where $free and exists (select 1 from events e where e.tenant = w.tenant and $readable and e.type = any(w.event_types)))
 update webhook_subscriptions s set lease_owner = gen_random_uuid(), lease_until = now() + interval '20 s'
 where s.id in (select w.id from ranked join webhook_subscriptions w on w.id = ranked.id where $free
     order by ranked.turn, ranked.tenant_served, w.next_attempt_at limit 16 for update of w skip locked)"

measure() {
    local name=$1 statement=$2
    for _ in 1 2 3; do
        printf '%-34s ' "$name"
        local plan
        plan=$("${psql[@]}" -d "$db" -At <<SQL
begin;
set local jit = off;
explain (analyze, buffers, summary on, format text) $statement;
rollback;
SQL
)
        # The top node's buffers (the whole statement's), then its time.
        echo "$(grep -m1 -o 'Buffers: shared.*' <<<"$plan")  $(grep -o 'Execution Time.*' <<<"$plan")"
    done
}

measure "listing of t (20), before" "select s.id, $before_backlog from webhook_subscriptions s where s.tenant = 't'"
measure "listing of t (20), after" "select s.id, $after_backlog from webhook_subscriptions s where s.tenant = 't'"
measure "listing of small (3), before" "select s.id, $before_backlog from webhook_subscriptions s where s.tenant = 'small'"
measure "listing of small (3), after" "select s.id, $after_backlog from webhook_subscriptions s where s.tenant = 'small'"
measure "metrics (all 1,000), before" "select sum($before_backlog) from webhook_subscriptions s"
measure "metrics (all 1,000), after" "select sum($after_backlog) from webhook_subscriptions s"
measure "claim of 16 (1,000 due), before" "$before_claim"
measure "claim of 16 (1,000 due), after" "$after_claim"
