#!/usr/bin/env bash
# pg_fallback.sh PAYTERM - PostgreSQL stopped mid-session (SPEC 16):
#   * lane 1 (store.fallback "local") keeps accepting charges: each queued
#     in its own SQLite store (202), a retry of a key answered the same
#     bytes from there;
#   * lane 2 (no fallback) answers 503 storage_unavailable, and nothing of
#     those requests is anywhere;
#   * a lane whose role the server refuses does not start (exit 1, the
#     error names store.dsn and the role), fallback or not;
#   * PostgreSQL returns: lane 1 moves its local charges over, each once
#     (every order exactly once on the server) with the key that made it,
#     so a retry on any lane replays the first answer's bytes; and the
#     network returns: each captured exactly once;
#   * lane 1 restarted during the outage (payterm init first, as systemd
#     runs it) starts on its own store and goes
#     on taking charges and answering retries;
#   * a charge queued on lane 1 is read and canceled there during the
#     outage (the customer walked away): it stays there, canceled, its
#     cancel replayed there, never moved and never sent;
#   * a local copy set back to INIT by hand (as if the lane died between
#     the server's commit and its own mark) is moved again: the server's
#     UNIQUE order_id refuses the second copy, still one charge.
# This test stops its PostgreSQL, so it runs its own throw-away cluster
# (tests/pg/cluster.sh), not the pg fixture's.
. "$(dirname "$0")/synclib.sh" "$@"
CLUSTER=$(cd "$(dirname "$0")/../../pg" && pwd)/cluster.sh
"$CLUSTER" start "$T/pg.state" >/dev/null || fail "cannot start PostgreSQL"
PGCONN=$(sed -n 1p "$T/pg.state")
DB=fallback
psql -q "$PGCONN dbname=postgres" -c "CREATE DATABASE $DB" || fail "cannot create database $DB"
pg() { psql -qAt "$PGCONN dbname=$DB" -c "$1"; }
DSN="postgresql://payterm@/$DB?host=$(sed -n 2p "$T/pg.state")&port=5432"
D2_PID=""
trap 'rc=$?; stop_pid "$D2_PID" TERM; "$CLUSTER" stop "$T/pg.state"; set +e; (exit $rc); on_exit' EXIT

printf '{"store": {"backend": "postgresql", "dsn": "%s", "lane_id": "lane-1", "fallback": "local"}}\n' \
    "$DSN" >"$T/lane1.json"
sync_start "$T/lane1.json"
API2_PORT=$(pick_port)
API2=http://127.0.0.1:$API2_PORT
jq --arg d "$T/data2" --arg l "127.0.0.1:$API2_PORT" '.data_dir = $d | .listen = $l' \
    "$T/base.json" >"$T/base2.json"
printf '{"store": {"backend": "postgresql", "dsn": "%s", "lane_id": "lane-2"}}\n' "$DSN" >"$T/lane2.json"
"$PAYTERM" serve -c "$T/base2.json" -c "$T/sim/gateways.json" -c "$T/lane2.json" \
    >"$T/payterm.lane2.log" 2>&1 &
D2_PID=$!
wait_until 30 curl -sf "$API2/healthz" -o /dev/null || fail "lane 2 did not start"

# A lane whose role the server does not know is misconfigured, not cut off:
# it must not start and queue locally for ever, but stop at once and say why.
API3_PORT=$(pick_port)
jq --arg d "$T/data3" --arg l "127.0.0.1:$API3_PORT" '.data_dir = $d | .listen = $l' \
    "$T/base.json" >"$T/base3.json"
printf '{"store": {"backend": "postgresql", "dsn": "%s&user=no_such_role", "lane_id": "lane-3", "fallback": "local"}}\n' \
    "$DSN" >"$T/lane3.json"
rc=0
timeout 20 "$PAYTERM" serve -c "$T/base3.json" -c "$T/sim/gateways.json" -c "$T/lane3.json" \
    >"$T/payterm.lane3.log" 2>&1 || rc=$?
expect "a lane with an unknown role: serve's exit status" 1 "$rc"
grep -q 'store.dsn: the PostgreSQL server refused this lane.*no_such_role' "$T/payterm.lane3.log" ||
    fail "lane 3's log does not name store.dsn and the role: $(tail -n 3 "$T/payterm.lane3.log")"

# The gateways are down too (the shop's uplink): the charges queue.
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
charge "before" "FB-0" "$(stripe_card 500)"
expect "a charge while PostgreSQL is up" 202 "$ST"

"$CLUSTER" pg_ctl "$T/pg.state" stop || fail "cannot stop PostgreSQL"
log "PostgreSQL stopped"
ORDERS=(FB-0)
for i in 1 2 3 4 5; do
    charge "k-FB-$i" "FB-$i" "$(stripe_card $((500 + i)))"
    expect "FB-$i while PostgreSQL is down (lane 1, fallback local)" 202 "$ST"
    expect "FB-$i state" INIT "$(field .state)"
    cp "$BODY" "$T/first.$i"
    ORDERS+=("FB-$i")
done
# Eight at once: more connections than lane 1 had open to the server (a new
# one cannot be made), every one still queued locally.
: >"$T/burst.cfg"
for i in $(seq 1 8); do
    printf '{"order_id":"FB-B%d",%s}' "$i" "$(stripe_card $((600 + i)))" >"$T/burst.$i"
    cat >>"$T/burst.cfg" <<C
url = "$API/v1/charges"
request = "POST"
header = "Content-Type: application/json"
header = "Idempotency-Key: k-FB-B$i"
data-binary = "@$T/burst.$i"
output = "$T/burst.out.$i"
write-out = "%{http_code}\n"
max-time = 30
silent
C
    [ "$i" = 8 ] || echo next >>"$T/burst.cfg"
    ORDERS+=("FB-B$i")
done
curl -sZ --parallel-max 8 -K "$T/burst.cfg" >"$T/burst.status" || true
expect "answers other than 202 to 8 charges at once during the outage" 0 \
    "$(grep -cv '^202$' "$T/burst.status" || true)"
# An order the server has already, under a new key and another amount: the
# local store cannot know; the move finds it taken and holds it for review.
charge "k-FB-0-again" "FB-0" "$(stripe_card 999)"
expect "FB-0 again (other amount) while PostgreSQL is down" 202 "$ST"
charge "k-FB-3" "FB-3" "$(stripe_card 503)"
expect "a retry of k-FB-3 during the outage" 202 "$ST"
cmp -s "$BODY" "$T/first.3" || fail "the retry of k-FB-3 got other bytes: $(cat "$BODY")"
expect "lane 1's log: queued locally" 14 \
    "$(cat "$T"/payterm.*.log | grep -c "the charge is queued in this lane's local store")"
expect "queued in lane 1's local store" 14 \
    "$(sqlite3 "$T/data/payterm.db" "SELECT count(*) FROM charges WHERE state = 'INIT'")"
# /healthz: lane 1 takes charges (its own queue), lane 2 does not.
expect "lane 1's /healthz while PostgreSQL is down" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$API/healthz")"
expect "lane 2's /healthz while PostgreSQL is down" 503 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$API2/healthz")"
# Lane 2 has no fallback: 503, and nothing kept anywhere.
st=$(curl -sS -o "$T/l2.body" -w '%{http_code}' --max-time 30 "$API2/v1/charges" \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: k-L2' \
    -d "{\"order_id\":\"FB-L2\",$(stripe_card 700)}")
expect "lane 2 (no fallback) while PostgreSQL is down" 503 "$st"
expect "lane 2's error code" storage_unavailable "$(jq -r .error.code "$T/l2.body")"
[ ! -f "$T/data2/payterm.db" ] ||
    expect "charges in lane 2's local file" 0 "$(sqlite3 "$T/data2/payterm.db" "SELECT count(*) FROM charges")"
# The kiosk's view of a charge queued on the lane: read and canceled there
# (the customer walked away) - it never left the lane, and never will.
expect "GET FB-1 on lane 1 while PostgreSQL is down" "200 INIT" \
    "$(curl -s -o "$T/get.json" -w '%{http_code}' "$API/v1/charges/FB-1") $(jq -r .state "$T/get.json")"
charge "k-FB-C" "FB-C" "$(stripe_card 550)"
expect "FB-C while PostgreSQL is down" 202 "$ST"
cancel "k-cancel-C" "FB-C"
expect "cancel FB-C on lane 1 while PostgreSQL is down" "200 CANCELED" "$ST $(field .state)"
cp "$BODY" "$T/cancel.C"
cancel "k-cancel-C" "FB-C"
expect "a retry of the cancel during the outage" 200 "$ST"
cmp -s "$BODY" "$T/cancel.C" || fail "the retry of the cancel got other bytes: $(cat "$BODY")"
st=$(curl -sS -o "$T/l2c.body" -w '%{http_code}' --max-time 30 -X POST \
    "$API2/v1/charges/FB-1/cancel" -H 'Idempotency-Key: k-L2-cancel')
expect "cancel on lane 2 (no fallback, FB-1 is lane 1's) while PostgreSQL is down" \
    "503 storage_unavailable" "$st $(jq -r .error.code "$T/l2c.body")"
# Lane 1 restarted during the outage (the power cut took the shop's
# router and server down too): it starts on its own store and goes on.
daemon_kill TERM
# systemd runs payterm init before serve (ExecStartPre=): on a fallback lane
# it must let the start go on; on lane 2 (no fallback) it fails, saying why.
# init_says LANE BASE STATUS PATTERN: payterm init on that lane exits STATUS
# and its output matches PATTERN.
init_says() {
    local rc=0
    "$PAYTERM" init -c "$T/$2" -c "$T/sim/gateways.json" -c "$T/$1.json" >"$T/init.$1" 2>&1 || rc=$?
    expect "payterm init on $1 while PostgreSQL is down: exit status" "$3" "$rc"
    grep -q "$4" "$T/init.$1" || fail "init on $1 did not say why: $(cat "$T/init.$1")"
}
init_says lane1 base.json 0 'store server not reachable.*store.fallback "local"'
init_says lane2 base2.json 1 'cannot connect to PostgreSQL (store.dsn)'
daemon_start
expect "lane 1's /healthz after a restart while PostgreSQL is down" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$API/healthz")"
grep -q 'store: cannot connect to PostgreSQL: ' "$T/payterm.$DAEMON_RUNS.log" ||
    fail "lane 1 started during the outage without saying why it cannot reach PostgreSQL"
charge "k-FB-R" "FB-R" "$(stripe_card 560)"
expect "FB-R after lane 1 restarted during the outage" "202 INIT" "$ST $(field .state)"
ORDERS+=(FB-R)
charge "k-FB-3" "FB-3" "$(stripe_card 503)"
expect "a retry of k-FB-3 after the restart" "202 1" "$ST $REPLAYED"
cmp -s "$BODY" "$T/first.3" || fail "the retry of k-FB-3 after the restart got other bytes: $(cat "$BODY")"
grep -q "the store server cannot be reached" "$T/payterm.$DAEMON_RUNS.log" ||
    fail "lane 1 did not say at start that the store server cannot be reached"

"$CLUSTER" pg_ctl "$T/pg.state" start || fail "cannot restart PostgreSQL"
log "PostgreSQL back"
api /v1/sync -X POST >/dev/null
moved() { [ "$(pg "SELECT count(*) FROM charges WHERE order_id LIKE 'FB-%'")" = 15 ]; }
wait_until 30 moved || fail "the local charges were not moved: $(pg "SELECT string_agg(order_id, ' ') FROM charges")"
expect "charges lane 1 logged as moved" 14 \
    "$(cat "$T"/payterm.*.log | sed -n 's/.*moved \([0-9]*\) charge(s) from the local store.*/\1/p' | awk '{s += $1} END {print s + 0}')"
expect "FB-0 on the server: the first one only" "500" "$(pg "SELECT string_agg(amount::text, ',') FROM charges WHERE order_id = 'FB-0'")"
expect "the local FB-0 (other amount) held for review" "INIT|1|order_id_taken_on_store_server" \
    "$(sqlite3 "$T/data/payterm.db" "SELECT state, review, review_reason FROM charges WHERE order_id = 'FB-0'")"
expect "FB-L2 on the server (its 503 kept nothing)" 0 "$(pg "SELECT count(*) FROM charges WHERE order_id = 'FB-L2'")"
expect "local copies marked moved" 14 \
    "$(sqlite3 "$T/data/payterm.db" "SELECT count(*) FROM charges WHERE state = 'CANCELED' AND error_code = 'moved_to_store_server'")"
# A key used during the outage moved with its charge: a retry now, on
# either lane, is the first answer's bytes, replayed - not a new answer
# about the order, and never a second charge.
expect "keys moved to the server with their charges" 14 \
    "$(pg "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'k-FB-%' AND order_id LIKE 'FB-%'")"
charge "k-FB-3" "FB-3" "$(stripe_card 503)"
expect "a retry of k-FB-3 on lane 1 after the move" "202 1" "$ST $REPLAYED"
cmp -s "$BODY" "$T/first.3" || fail "the retry of k-FB-3 after the move got other bytes: $(cat "$BODY")"
API_SAVED=$API
API=$API2
charge "k-FB-1" "FB-1" "$(stripe_card 501)"
API=$API_SAVED
expect "a retry of k-FB-1 on lane 2 after the move" "202 1" "$ST $REPLAYED"
cmp -s "$BODY" "$T/first.1" || fail "the retry of k-FB-1 on lane 2 got other bytes: $(cat "$BODY")"
# The canceled one stayed on the lane, canceled: read and its cancel
# replayed there, never on the server, never sent.
expect "FB-C on the server (canceled before it left the lane)" 0 \
    "$(pg "SELECT count(*) FROM charges WHERE order_id = 'FB-C'")"
expect "GET FB-C on lane 1 after PostgreSQL returned" "200 CANCELED" \
    "$(curl -s -o "$T/get.json" -w '%{http_code}' "$API/v1/charges/FB-C") $(jq -r .state "$T/get.json")"
cancel "k-cancel-C" "FB-C"
expect "a retry of the cancel after PostgreSQL returned" 200 "$ST"
cmp -s "$BODY" "$T/cancel.C" || fail "the retry of the cancel after the outage got other bytes: $(cat "$BODY")"
# Moved twice: the server refuses the second copy.
sqlite3 "$T/data/payterm.db" "UPDATE charges SET state = 'INIT' WHERE order_id = 'FB-2'"
api /v1/sync -X POST >/dev/null
remarked() { [ "$(sqlite3 "$T/data/payterm.db" "SELECT state FROM charges WHERE order_id = 'FB-2'")" = CANCELED ]; }
wait_until 30 remarked || fail "the copy set back to INIT was not dealt with"
expect "FB-2 on the server after a second move" 1 "$(pg "SELECT count(*) FROM charges WHERE order_id = 'FB-2'")"

sim_clear
api /v1/sync -X POST >/dev/null
for o in "${ORDERS[@]}"; do wait_final "$o" 60; done
expect_all_captured_once "${ORDERS[@]}"
expect "charges on the server" 15 "$(pg "SELECT count(*) FROM charges")"
pass
