#!/usr/bin/env bash
# The webhook claim's read of events past each cursor, before and after its bounded page (docs/design.md §17), at
# 1,500,000 events: tenants a, b, c with 500,000 each (interleaved, about 33 per transaction), and three
# subscriptions: a's caught up, b's at the start (every event of its types), c's at the start subscribed to
# `rule.created`, of which there is none. Prints, for each statement, its buffers and execution time with a custom
# plan (the first executions of a prepared statement) and with the generic plan (which the service's prepared
# statement may switch to from the sixth execution on); JIT off, each in a rolled-back transaction. "after, once
# passed" is the after statement once one claim has passed c's first page.
#
#   cargo build --bin approval-resume && bash bench/webhook_claim_explain.sh
#
# Needs psql and the Postgres of the tests (127.0.0.1:5432, user postgres). Drops and recreates its database, and
# drops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

db=webhook_claim_explain
url="postgres://postgres@127.0.0.1:5432/$db"
psql=(psql -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -c "drop database if exists $db" -c "create database $db" >/dev/null 2>&1
DATABASE_URL="$url" LOG_LEVEL=warn target/debug/approval-resume migrate >/dev/null

"${psql[@]}" -d "$db" <<'SQL'
-- Explicit xids, all below the current one (so readable), as if about 33 events were committed per transaction.
insert into events (xid, tenant, run_id, type, data)
select (1000 + g / 33)::text::xid8, (array['a','b','c'])[1 + g % 3], gen_random_uuid(),
       (array['run.waiting','run.resumed','run.completed'])[1 + (g / 3) % 3], '{}'
from generate_series(0, 1499999) g;
insert into webhook_subscriptions (id, tenant, url, event_types, secret, cursor_xid, cursor_id) values
  ('00000000-0000-0000-0000-00000000000a', 'a', 'http://127.0.0.1:9/a',
   array['run.waiting','run.resumed','run.completed'], 'whsec_x',
   (select xid from events where tenant = 'a' order by xid desc, id desc limit 1),
   (select id from events where tenant = 'a' order by xid desc, id desc limit 1)),
  ('00000000-0000-0000-0000-00000000000b', 'b', 'http://127.0.0.1:9/b',
   array['run.waiting','run.resumed','run.completed'], 'whsec_x', '0', 0),
  ('00000000-0000-0000-0000-00000000000c', 'c', 'http://127.0.0.1:9/c', array['rule.created'], 'whsec_x', '0', 0);
vacuum analyze events;
vacuum analyze webhook_subscriptions;
SQL

free="(w.lease_until is null or w.lease_until < now()) and w.next_attempt_at <= now()"
claim_tail="update webhook_subscriptions s set lease_owner = \$1, lease_until = now() + make_interval(secs => \$2)
 where s.id in (select w.id from ranked join webhook_subscriptions w on w.id = ranked.id where $free
     order by ranked.turn, ranked.tenant_served, w.next_attempt_at limit \$3 for update of w skip locked)
 returning s.id"
turns="select w.id, row_number() over (partition by w.tenant order by w.next_attempt_at, w.id) + coalesce(h.held, 0) as turn,
           max(w.next_attempt_at) over (partition by w.tenant) as tenant_served
    from webhook_subscriptions w"
held="left join (select tenant, count(*) as held from webhook_subscriptions where lease_until >= now() group by tenant) h
           on h.tenant = w.tenant"
# As in src/storage/webhooks/delivery_state.rs before and after.
before="with ranked as materialized ($turns $held
    where $free and exists (select 1 from events e where e.tenant = w.tenant
        and (e.xid, e.id) > (w.cursor_xid, w.cursor_id) and e.xid < greatest(\$4::text::xid8, events_readable_below())
        and e.type = any(w.event_types)))
 $claim_tail"
after="with page as materialized (
    select w.id, w.cursor_xid, w.cursor_id, p.xid, p.id as event_id, p.matching
    from webhook_subscriptions w
    cross join lateral (
        select e.xid, e.id, bool_or(e.type = any(w.event_types)) over () as matching,
               row_number() over (order by e.xid desc, e.id desc) as from_last
        from (select e.xid, e.id, e.type from events e
              where e.tenant <= w.tenant and (e.tenant, e.xid, e.id) > (w.tenant, w.cursor_xid, w.cursor_id)
                and e.xid < greatest(\$4::text::xid8, events_readable_below())
              order by e.tenant, e.xid, e.id limit 1000) e) p
    where $free and p.from_last = 1),
 passed as (
    update webhook_subscriptions s set cursor_xid = page.xid, cursor_id = page.event_id from page
    where s.id = page.id and not page.matching and (s.lease_until is null or s.lease_until < now())
      and s.cursor_xid = page.cursor_xid and s.cursor_id = page.cursor_id),
 ranked as materialized ($turns join page on page.id = w.id and page.matching $held)
 $claim_tail"

measure() {
    local name=$1 statement=$2 mode=$3 setup=${4:-}
    for _ in 1 2 3; do
        printf '%-34s %-7s ' "$name" "$mode"
        local plan
        plan=$("${psql[@]}" -d "$db" -At <<SQL
begin;
set local jit = off;
set local plan_cache_mode = force_${mode}_plan;
prepare claim(uuid, float8, int8, text) as $statement;
$setup
explain (analyze, buffers, summary on, format text) execute claim(gen_random_uuid(), 20, 16, '0');
rollback;
SQL
)
        # The top node's buffers (the whole statement's), the index read of events, then the time.
        echo "$(grep -m1 -o 'Buffers: shared.*' <<<"$plan")  events by $(grep -m1 -o 'Index Scan using events[a-z_]*' <<<"$plan" | cut -d' ' -f4)  $(grep -o 'Execution Time.*' <<<"$plan")"
    done
}

for mode in custom generic; do
    measure "before" "$before" $mode
    measure "after" "$after" $mode
    measure "after, once passed" "$after" $mode \
        "execute claim(gen_random_uuid(), 20, 16, '0'); update webhook_subscriptions set lease_owner = null, lease_until = null;"
done
"${psql[@]}" -c "drop database $db" >/dev/null
