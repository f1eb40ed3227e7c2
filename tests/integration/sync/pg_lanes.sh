#!/usr/bin/env bash
# pg_lanes.sh PAYTERM - two lanes' daemons on one PostgreSQL store (SPEC 16)
# against the simulator:
#   * the same Idempotency-Key posted to both lanes at once -> one charge,
#     one capture;
#   * one order_id under different keys on both lanes at once -> one charge;
#   * charges queued offline on both lanes, then the network returns and
#     both drain -> every order captured exactly once, one charge.succeeded
#     each in the shop's one feed (read from either lane), the audit naming
#     the lane.
# The cluster is the pg fixture's (PT_TEST_PG_STATE, tests/pg/cluster.sh);
# this test gets a database of its own in it.
. "$(dirname "$0")/synclib.sh" "$@"
: "${PT_TEST_PG_STATE:?set by ctest (the pg fixture)}"
PGCONN=$(sed -n 1p "$PT_TEST_PG_STATE")
PGHOST_DIR=$(sed -n 2p "$PT_TEST_PG_STATE")
DB=lanes_$$
psql -q "$PGCONN dbname=postgres" -c "CREATE DATABASE $DB" || fail "cannot create database $DB"
pg() { psql -qAt "$PGCONN dbname=$DB" -c "$1"; }
DSN="postgresql://payterm@/$DB?host=$PGHOST_DIR&port=5432"

D2_PID=""
trap 'rc=$?; stop_pid "$D2_PID" TERM; (exit $rc); on_exit' EXIT

cat >"$T/lane1.json" <<J
{"store": {"backend": "postgresql", "dsn": "$DSN", "lane_id": "lane-1"}}
J
sync_start "$T/lane1.json"

# The second lane: its own data dir and port, the same store.
API2_PORT=$(pick_port)
API2=http://127.0.0.1:$API2_PORT
jq --arg d "$T/data2" --arg l "127.0.0.1:$API2_PORT" '.data_dir = $d | .listen = $l' \
    "$T/base.json" >"$T/base2.json"
sed 's/lane-1/lane-2/' "$T/lane1.json" >"$T/lane2.json"
"$PAYTERM" serve -c "$T/base2.json" -c "$T/sim/gateways.json" -c "$T/lane2.json" \
    >"$T/payterm.lane2.log" 2>&1 &
D2_PID=$!
wait_until 30 curl -sf "$API2/healthz" -o /dev/null ||
    fail "lane 2 did not start: $(tail -n 5 "$T/payterm.lane2.log")"
log "lane 1 on $API_PORT, lane 2 on $API2_PORT, one store: $DB"

# storm NAME SAME_KEY ORDER - 16 POSTs at once, alternating the lanes.
storm() {
    local name=$1 same=$2 order=$3 i key url
    : >"$T/$name.cfg"
    for i in $(seq 16); do
        key=storm-$name
        [ "$same" = 1 ] || key=storm-$name-$i
        url=$API
        [ $((i % 2)) = 0 ] && url=$API2
        printf '{"order_id":"%s",%s}' "$order" "$(stripe_card 700)" >"$T/$name.req.$i"
        cat >>"$T/$name.cfg" <<C
url = "$url/v1/charges"
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
}

storm key 1 LANE-KEY-1
expect "charges for LANE-KEY-1 after a same-key storm on two lanes" 1 \
    "$(pg "SELECT count(*) FROM charges WHERE order_id = 'LANE-KEY-1'")"
bad=$(grep -cvE '^(200|201|202|409)$' "$T/key.status" || true)
expect "answers other than 200/201/202/409 in the same-key storm" 0 "$bad"

storm order 0 LANE-ORDER-1
expect "charges for LANE-ORDER-1 after a same-order storm on two lanes" 1 \
    "$(pg "SELECT count(*) FROM charges WHERE order_id = 'LANE-ORDER-1'")"
bad=$(grep -cvE '^(200|201|202|409)$' "$T/order.status" || true)
[ "$bad" = 0 ] || cat "$T"/order.body.* >&2
expect "answers other than 200/201/202/409 in the same-order storm" 0 "$bad"

wait_final LANE-KEY-1 30
wait_final LANE-ORDER-1 30

# Offline on both lanes, then both drain the shop's one queue.
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
ORDERS=()
for i in $(seq 1 12); do
    o=$(printf 'LANE-Q-%02d' "$i")
    ORDERS+=("$o")
    if [ $((i % 2)) = 1 ]; then a=$API; else a=$API2; fi
    st=$(curl -sS -o "$T/q.body" -w '%{http_code}' --max-time 30 "$a/v1/charges" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: q-$o" \
        -d "{\"order_id\":\"$o\",$(stripe_card $((900 + i)))}")
    expect "$o queued on lane $((2 - i % 2))" 202 "$st"
done
sim_clear
api /v1/sync -X POST >/dev/null
curl -sS -X POST "$API2/v1/sync" >/dev/null
for o in "${ORDERS[@]}"; do wait_final "$o" 60; done
expect_all_captured_once LANE-KEY-1 LANE-ORDER-1 "${ORDERS[@]}"
# The feed is the shop's: lane 2 serves the same events as lane 1.
expect "charge.succeeded events in lane 2's feed" 14 \
    "$(curl -sS "$API2/v1/events?after=0&limit=100" | jq '[.data[] | select(.type == "charge.succeeded")] | length')"
# Each lane's daemon is named in the audit's actor.
expect "audit rows naming lane-2" 1 \
    "$(pg "SELECT count(*) > 0 FROM charge_events WHERE actor LIKE '%@lane-2'" | sed 's/t/1/;s/f/0/')"
expect "charges left in progress" 0 \
    "$(pg "SELECT count(*) FROM charges WHERE state NOT IN ('SUCCESS', 'FAILED', 'CANCELED')")"
pass
