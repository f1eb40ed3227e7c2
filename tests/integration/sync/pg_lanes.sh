#!/usr/bin/env bash
# pg_lanes.sh PAYTERM [LANES] - LANES (default 2) lanes' daemons on one
# PostgreSQL store (SPEC 16) against the simulator:
#   * the same Idempotency-Key posted to every lane at once -> one charge,
#     one capture;
#   * one order_id under different keys on every lane at once -> one charge;
#   * charges queued offline on every lane, then the network returns and all
#     drain the shop's one queue -> every order captured exactly once, one
#     charge.succeeded each in the one feed (read from the last lane), the
#     audit naming the lanes;
#   * lane 1 is SIGKILLed while its sends are in flight: the other lanes
#     leave its PROCESSING charges alone until idempotency.lock_timeout_s
#     after they were armed, then resolve them by query -> still exactly one
#     capture per order, nothing left in progress.
# The cluster is the pg fixture's (PT_TEST_PG_STATE, tests/pg/cluster.sh);
# this test gets a database of its own in it.
. "$(dirname "$0")/synclib.sh" "$1"
LANES=${2:-2}
: "${PT_TEST_PG_STATE:?set by ctest (the pg fixture)}"
PGCONN=$(sed -n 1p "$PT_TEST_PG_STATE")
DB=lanes_$$
psql -q "$PGCONN dbname=postgres" -c "CREATE DATABASE $DB" || fail "cannot create database $DB"
pg() { psql -qAt "$PGCONN dbname=$DB" -c "$1"; }
DSN="postgresql://payterm@/$DB?host=$(sed -n 2p "$PT_TEST_PG_STATE")&port=5432"
CLAIM_S=7 # idempotency.lock_timeout_s: how long a dead lane's sends stay its own
# (above SYNC_REQUEST_TIMEOUT_MS + 5 s, or serve refuses the configuration)
SYNC_REQUEST_TIMEOUT_MS=1000

LANE_PIDS=()
trap 'rc=$?; for p in "${LANE_PIDS[@]}"; do stop_pid "$p" TERM; done; set +e; (exit $rc); on_exit' EXIT
[ "$LANES" -ge 2 ] || { echo "pg_lanes.sh: LANES must be 2 or more" >&2; exit 2; }

lane_config() { # lane_config N -> the store fragment of lane N
    printf '{"store": {"backend": "postgresql", "dsn": "%s", "lane_id": "lane-%d"},
             "idempotency": {"lock_timeout_s": %d}}\n' "$DSN" "$1" "$CLAIM_S" >"$T/lane$1.json"
    echo "$T/lane$1.json"
}
sync_start "$(lane_config 1)"
URLS=("$API")
# Lanes 2..LANES: their own data dir and port, the same store.
for n in $(seq 2 "$LANES"); do
    port=$(pick_port)
    jq --arg d "$T/data$n" --arg l "127.0.0.1:$port" '.data_dir = $d | .listen = $l' \
        "$T/base.json" >"$T/base$n.json"
    "$PAYTERM" serve -c "$T/base$n.json" -c "$T/sim/gateways.json" -c "$(lane_config "$n")" \
        >"$T/payterm.lane$n.log" 2>&1 &
    LANE_PIDS+=($!)
    URLS+=("http://127.0.0.1:$port")
done
for u in "${URLS[@]}"; do
    wait_until 30 curl -sf "$u/healthz" -o /dev/null || fail "lane $u did not start (see $T)"
done
log "$LANES lanes on one store ($DB): ${URLS[*]}"
lane_url() { echo "${URLS[$(($1 % LANES))]}"; } # lane_url I -> the lane request I goes to

# storm NAME SAME_KEY ORDER - 16 POSTs at once, spread over the lanes.
storm() {
    local name=$1 same=$2 order=$3 i key
    : >"$T/$name.cfg"
    for i in $(seq 16); do
        key=storm-$name
        [ "$same" = 1 ] || key=storm-$name-$i
        printf '{"order_id":"%s",%s}' "$order" "$(stripe_card 700)" >"$T/$name.req.$i"
        cat >>"$T/$name.cfg" <<C
url = "$(lane_url "$i")/v1/charges"
request = "POST"
header = "Content-Type: application/json"
header = "Idempotency-Key: $key"
data-binary = "@$T/$name.req.$i"
output = "$T/$name.body.$i"
write-out = "%{http_code}\\n"
max-time = 30
silent
C
        [ "$i" = 16 ] || echo next >>"$T/$name.cfg"
    done
    curl -sZ --parallel-max 16 -K "$T/$name.cfg" >"$T/$name.status" || true
    local bad
    bad=$(grep -cvE '^(200|201|202|409)$' "$T/$name.status" || true)
    [ "$bad" = 0 ] || cat "$T"/"$name".body.* >&2
    expect "answers other than 200/201/202/409 in the $name storm" 0 "$bad"
    expect "charges for $order after the $name storm on $LANES lanes" 1 \
        "$(pg "SELECT count(*) FROM charges WHERE order_id = '$order'")"
}
storm key 1 LANE-KEY-1
storm order 0 LANE-ORDER-1
wait_final LANE-KEY-1 30
wait_final LANE-ORDER-1 30

# One feed for the shop: a long-poll on the last lane is woken by an event
# lane 1 commits (LISTEN/NOTIFY), not by its timeout (which would answer
# with no events).
LAST=${URLS[$((LANES - 1))]}
seq0=$(curl -sS "$LAST/v1/events?after=0&limit=100" | jq '.next')
poll_t0=$SECONDS
curl -sS --max-time 40 "$LAST/v1/events?after=$seq0&wait=25" >"$T/longpoll.json" &
POLL=$!
sleep 1
charge "k-LANE-FEED" "LANE-FEED-1" "$(stripe_card 710)"
wait "$POLL" || fail "the long-poll on the last lane failed"
# (At its 25 s timeout it would read the feed too: woken, it answers long before.)
[ $((SECONDS - poll_t0)) -lt 15 ] ||
    fail "the last lane's long-poll waited $((SECONDS - poll_t0)) s: lane 1's event did not wake it"
expect "events the last lane's long-poll got from lane 1's commit" "LANE-FEED-1" \
    "$(jq -r '[.data[].order_id] | unique | join(",")' "$T/longpoll.json")"

# queue PREFIX COUNT AMOUNT_BASE: COUNT charges queued offline, spread over the lanes.
queue() {
    local i o st
    for i in $(seq 1 "$2"); do
        o=$(printf '%s-%02d' "$1" "$i")
        ORDERS+=("$o")
        st=$(curl -sS -o "$T/q.body" -w '%{http_code}' --max-time 30 "$(lane_url "$i")/v1/charges" \
            -H 'Content-Type: application/json' -H "Idempotency-Key: q-$o" \
            -d "{\"order_id\":\"$o\",$(stripe_card $(($3 + i)))}")
        expect "$o queued" 202 "$st"
    done
}
sync_all() { for u in "${URLS[@]}"; do curl -sS -X POST "$u/v1/sync" -o /dev/null; done; }

# Offline on every lane, then all of them drain the shop's one queue.
ORDERS=()
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
queue LANE-Q 12 900
sim_clear
sync_all
for o in "${ORDERS[@]}"; do wait_final "$o" 60; done
expect_all_captured_once LANE-KEY-1 LANE-ORDER-1 LANE-FEED-1 "${ORDERS[@]}"
expect "charge.succeeded events in the last lane's feed" 15 \
    "$(curl -sS "${URLS[$((LANES - 1))]}/v1/events?after=0&limit=100" | jq '[.data[] | select(.type == "charge.succeeded")] | length')"
expect "lanes named in the audit's actor" "$LANES" \
    "$(pg "SELECT count(DISTINCT substring(actor from '@(lane-[0-9]+)$')) FROM charge_events WHERE actor LIKE '%@lane-%'")"
# Each queued charge's trail begins with one "created" entry naming the lane
# whose API took it: in the charge's row when the one-statement guarded
# charge queued it (sql/pg/005), in charge_events when the usual path did
# (a lane that still took the gateway for reachable tries it online first).
created="SELECT c.order_id, c.created_by AS actor FROM charges c WHERE c.created_by IS NOT NULL
         UNION ALL SELECT c.order_id, e.actor FROM charge_events e JOIN charges c ON c.id = e.charge_id
         WHERE e.cause = 'created'"
expect "creation entries of the queued charges" 12 \
    "$(pg "SELECT count(*) FROM ($created) t WHERE order_id LIKE 'LANE-Q-%' AND actor ~ '^api@lane-[0-9]+$'")"
expect "queued charges with one creation entry" 12 \
    "$(pg "SELECT count(DISTINCT order_id) FROM ($created) t WHERE order_id LIKE 'LANE-Q-%'")"
expect "lanes named as the queued charges' creators" "$LANES" \
    "$(pg "SELECT count(DISTINCT actor) FROM ($created) t WHERE order_id LIKE 'LANE-Q-%'")"

# A lane dies with sends in flight (each answer 800 ms late): the one that
# holds PROCESSING charges first is SIGKILLed.
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
queue LANE-K 16 2000
# The delay is armed before the refusal is lifted: a lane's own pass in
# between would otherwise send them all at once, and none would be seen
# in flight.
sim_fault '{"gateway":"*","mode":"delay","count":-1,"delay_ms":800}'
sim_fault '{"gateway":"stripe","mode":"none"}'
sync_all
claimed() { pg "SELECT claimed_by FROM charges WHERE state = 'PROCESSING' AND claimed_by IS NOT NULL ORDER BY id LIMIT 1"; }
has_claim() { [ -n "$(claimed)" ]; }
wait_until 20 has_claim || fail "no lane ever had a send in flight"
victim_lane=$(claimed)
k=${victim_lane#lane-}
if [ "$k" = 1 ]; then victim_pid=$D_PID; D_PID=""; else victim_pid=${LANE_PIDS[$((k - 2))]}; fi
kill -KILL "$victim_pid"
VICTIMS=$(pg "SELECT string_agg(quote_literal(order_id), ',') FROM charges WHERE state = 'PROCESSING' AND claimed_by = '$victim_lane'")
log "$victim_lane killed with sends in flight: $VICTIMS"
[ -n "$VICTIMS" ] || fail "$victim_lane was killed with nothing in flight"
sim_clear
LIVE=()
for n in $(seq 1 "$LANES"); do [ "$n" = "$k" ] || LIVE+=("${URLS[$((n - 1))]}"); done
API=${LIVE[0]} # state and events are read from a live lane now
for u in "${LIVE[@]}"; do curl -sS -X POST "$u/v1/sync" -o /dev/null; done
for o in "${ORDERS[@]}"; do wait_final "$o" 60; done
expect_all_captured_once LANE-KEY-1 LANE-ORDER-1 LANE-FEED-1 "${ORDERS[@]}"
expect "charges left in progress" 0 \
    "$(pg "SELECT count(*) FROM charges WHERE state NOT IN ('SUCCESS', 'FAILED', 'CANCELED')")"
# The dead lane's sends were settled by the others, none before the claim
# timeout had passed since they were armed.
expect "$victim_lane's interrupted sends settled by another lane" \
    "$(pg "SELECT count(*) FROM charges WHERE order_id IN ($VICTIMS)")" \
    "$(pg "SELECT count(*) FROM charges c WHERE order_id IN ($VICTIMS) AND EXISTS (SELECT 1 FROM charge_events e WHERE e.charge_id = c.id AND e.to_state = 'SUCCESS' AND e.actor NOT LIKE '%@$victim_lane')")"
# (From its last claim, the one the kill interrupted; a gateway's
# notification, which any lane applies at once, is not a send.)
expect "$victim_lane's sends taken up by another lane's sync before the claim timeout" 0 \
    "$(pg "SELECT count(*) FROM charges c, LATERAL (SELECT max(id) AS id, max(created_at) AS at FROM charge_events WHERE charge_id = c.id AND to_state = 'PROCESSING' AND actor LIKE '%@$victim_lane') a WHERE c.order_id IN ($VICTIMS) AND EXISTS (SELECT 1 FROM charge_events b WHERE b.charge_id = c.id AND b.id > a.id AND b.actor LIKE 'sync@%' AND b.actor NOT LIKE '%@$victim_lane' AND b.created_at < a.at + $CLAIM_S * 1000)")"
pass
