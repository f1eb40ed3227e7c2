# synclib.sh - shared harness of the sync integration tests (sourced).
#
# Each test script starts its own gateway simulator (`payterm sim`, port 0)
# and its own daemon (`payterm serve` on a free port) in a temporary
# directory, drives them with curl and jq over the real TLS transport, and
# asserts what a merchant cares about: how many times money moved per order
# in the simulator's ledger, the final local state, and the fulfilment events.
#
# Usage from a test:
#   . "$(dirname "$0")/synclib.sh" "$@"     # $1 = the payterm binary
#   sync_start [extra-config.json]          # sim + daemon, waits until ready
#   charge KEY ORDER '"amount":...'         # POST /v1/charges; sets ST, BODY, REPLAYED
#   ...
#   pass                                    # prints the verdict, cleans up
#
# On failure the temporary directory is kept and the ends of both logs are
# printed.  Processes are stopped by their own pids only.
set -euo pipefail

PAYTERM=${1:?usage: $0 PATH-TO-payterm}
TEST_NAME=$(basename "$0" .sh)
command -v curl >/dev/null || { echo "$TEST_NAME: curl is missing" >&2; exit 1; }
command -v jq >/dev/null || { echo "$TEST_NAME: jq is missing" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/payterm-synctest-$TEST_NAME.XXXXXX")
SIM_PID=""
D_PID=""
API=""
SIM=""
SIM_PORT=""
API_PORT=""
T0=$SECONDS
# Every daemon thread gets musl's default stack (SPEC 11), also on glibc,
# whose 8 MiB would hide an overflow; ctest passes a larger one under ASan.
export PAYTERM_THREAD_STACK_KIB=${PAYTERM_THREAD_STACK_KIB:-128}

log() { printf '[%3ds] %s\n' $((SECONDS - T0)) "$*"; }

stop_pid() { # stop_pid PID SIGNAL: waits up to 5 s, then SIGKILL
    [ -n "$1" ] || return 0
    local i
    # stderr off for the whole block: bash reports a child killed by a
    # signal ("Killed") whenever it happens to reap it.
    {
        kill -"$2" "$1" || true
        for i in $(seq 100); do
            kill -0 "$1" || break
            sleep 0.05
        done
        kill -KILL "$1" || true
        local st=0
        wait "$1" || st=$?
        note_crash "$1" "$st"
    } 2>/dev/null
}

# note_crash PID STATUS: a program that died of a signal nobody sent it
# (SIGSEGV: a thread's stack overflowed; SIGABRT, SIGBUS, SIGILL, SIGFPE)
# fails the test, even when a restart made every answer look right.
note_crash() {
    case $2 in
    132 | 134 | 135 | 136 | 139) echo "pid $1 died of signal $(($2 - 128))" >>"$T/crashes" ;;
    esac
}

PASSED=0
on_exit() {
    local rc=$?
    stop_pid "$D_PID" TERM
    stop_pid "$SIM_PID" TERM
    # Under the asan preset a sanitizer report in either program fails the
    # test, even when what the test checked came out right.
    local f
    if [ -s "$T/crashes" ]; then
        echo "FAIL [$TEST_NAME]: $(tr '\n' ' ' <"$T/crashes")" >&2
        PASSED=0
    fi
    for f in "$T"/payterm*.log "$T"/sim.log; do
        [ -f "$f" ] || continue
        if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' "$f"; then
            echo "FAIL [$TEST_NAME]: sanitizer report in $f:" >&2
            grep -m 3 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' "$f" >&2
            PASSED=0
        fi
    done
    if [ $PASSED = 1 ] && [ $rc = 0 ]; then
        rm -rf "$T"
    else
        echo "---- $TEST_NAME FAILED (rc=$rc); files kept in $T" >&2
        for f in "$T"/payterm*.log "$T"/sim.log; do
            [ -f "$f" ] || continue
            echo "---- last lines of $f" >&2
            tail -n 40 "$f" >&2
        done
        [ $rc != 0 ] || rc=1
    fi
    exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT TERM

fail() {
    echo "FAIL [$TEST_NAME]: $*" >&2
    exit 1
}

# expect WHAT WANT GOT: both values are printed on failure.
expect() {
    [ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
}

# wait_until SECONDS CMD...: polls CMD every 0.1 s.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}

port_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port nobody listens on now, below the kernel's ephemeral range (so no
# outgoing connection takes it while a daemon restarts).  Random, so that
# tests running in parallel (ctest -j) rarely pick the same one; sync_start
# retries when it loses.
pick_port() {
    local p lo=32768
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    [ "$lo" -gt 12000 ] || lo=32768
    while :; do
        p=$((10000 + RANDOM % (lo - 10000)))
        port_listening $p || { echo $p; return; }
    done
}

# ---- the simulator and the daemon ------------------------------------------------

# sim_start: (re)starts the simulator on a port it picks, notifying $API (or
# $SIM_NOTIFY_BASE: a test that must not rely on notifications sets it to a
# port nobody listens on), with the options in $SIM_EXTRA_ARGS.
sim_start() {
    : >"$T/sim.out"
    # shellcheck disable=SC2086 # SIM_EXTRA_ARGS is a list of words
    "$PAYTERM" sim --listen 127.0.0.1:0 --dir "$T/sim" --notify-base "${SIM_NOTIFY_BASE:-$API}" \
        --pay-delay-ms "${SIM_PAY_DELAY_MS:-500}" ${SIM_EXTRA_ARGS:-} >"$T/sim.out" 2>>"$T/sim.log" &
    SIM_PID=$!
    wait_until 30 grep -q 'ready on port' "$T/sim.out" ||
        fail "the simulator did not start (see $T/sim.log)"
    SIM_PORT=$(sed -n 's/.*ready on port \([0-9]*\).*/\1/p' "$T/sim.out")
    SIM=https://127.0.0.1:$SIM_PORT
}

# The base configuration: short intervals and timeouts so that every path
# (backoff, resolve, resend) happens within seconds; no daily reconciliation
# (its bill requests would meet the faults a test arms for its charges:
# reconcile_download.sh daily turns it on).
write_base_config() {
    cat >"$T/base.json" <<EOF
{
  "data_dir": "$T/data",
  "listen": "127.0.0.1:$API_PORT",
  "log_level": "debug",
  "offline": {
    "limits": {"CNY": {"max_amount": 50000, "max_total": 5000000},
               "USD": {"max_amount": 20000, "max_total": 2000000},
               "THB": {"max_amount": 500000, "max_total": 50000000}},
    "max_count": 500
  },
  "sync": {"interval_s": 1, "backoff_base_ms": 200, "backoff_max_ms": 1000,
           "request_timeout_ms": ${SYNC_REQUEST_TIMEOUT_MS:-1500}, "max_attempts": ${SYNC_MAX_ATTEMPTS:-5}},
  "reconcile": {"daily": false}
}
EOF
}

# PT_SYNC_STORE=postgresql: the daemon's store is a PostgreSQL database of
# this test's own, in the pg fixture's cluster (PT_TEST_PG_STATE,
# tests/pg/cluster.sh), as lane "lane-1": the same script, the other backend.
STORE_CONFIG=""
PG_DB=""
pg_store_setup() {
    : "${PT_TEST_PG_STATE:?PT_SYNC_STORE=postgresql needs the pg fixture (PT_TEST_PG_STATE)}"
    PG_CONN=$(sed -n 1p "$PT_TEST_PG_STATE")
    PG_DB=sync_$(tr -c 'a-z0-9\n' _ <<<"$TEST_NAME")_$$
    psql -q "$PG_CONN dbname=postgres" -c "CREATE DATABASE $PG_DB" ||
        fail "cannot create database $PG_DB"
    STORE_CONFIG=$T/store.json
    printf '{"store": {"backend": "postgresql", "dsn": "postgresql://payterm@/%s?host=%s&port=5432", "lane_id": "lane-1"}}\n' \
        "$PG_DB" "$(sed -n 2p "$PT_TEST_PG_STATE")" >"$STORE_CONFIG"
}
[ "${PT_SYNC_STORE:-sqlite}" != postgresql ] || pg_store_setup
# db_query SQL: what the daemon's store holds (SQLite file or PostgreSQL),
# one value per line.
db_query() {
    if [ -n "$PG_DB" ]; then
        psql -qAt "$PG_CONN dbname=$PG_DB" -c "$1"
    else
        sqlite3 "$T/data/payterm.db" "$1"
    fi
}

DAEMON_RUNS=0
# daemon_start: starts payterm serve with base.json, the simulator's
# gateways.json and the test's extra config (if any); waits for /healthz.
# Returns 1 when the port was taken meanwhile.
daemon_start() {
    DAEMON_RUNS=$((DAEMON_RUNS + 1))
    local logf="$T/payterm.$DAEMON_RUNS.log"
    local cfgs=(-c "$T/base.json" -c "$T/sim/gateways.json")
    [ -z "$STORE_CONFIG" ] || cfgs+=(-c "$STORE_CONFIG")
    [ -z "${EXTRA_CONFIG:-}" ] || cfgs+=(-c "$EXTRA_CONFIG")
    mkdir -p "$T/answers"
    PAYTERM_TEST_ANSWER_LOG="$T/answers" "$PAYTERM" serve "${cfgs[@]}" >"$logf" 2>&1 &
    D_PID=$!
    local deadline=$((SECONDS + 30))
    until curl -sf "$API/healthz" >/dev/null 2>&1; do
        if ! kill -0 "$D_PID" 2>/dev/null; then
            local st=0
            wait "$D_PID" 2>/dev/null || st=$?
            note_crash "$D_PID" "$st"
            D_PID=""
            grep -q 'address in use' "$logf" && return 1
            fail "payterm serve exited at start (see $logf): $(tail -n 3 "$logf")"
        fi
        [ $SECONDS -lt $deadline ] || fail "payterm serve is not ready after 30 s (see $logf)"
        sleep 0.1
    done
}

# sync_start [EXTRA_CONFIG_FILE]
sync_start() {
    EXTRA_CONFIG=${1:-}
    local try
    for try in 1 2 3 4 5; do
        API_PORT=$(pick_port)
        API=http://127.0.0.1:$API_PORT
        rm -rf "$T/sim"
        sim_start
        write_base_config
        if daemon_start; then
            log "simulator on $SIM_PORT, daemon on $API_PORT, files in $T"
            return 0
        fi
        stop_pid "$SIM_PID" TERM
        SIM_PID=""
    done
    fail "could not find a free port for the daemon"
}

daemon_kill() { # daemon_kill SIGNAL
    stop_pid "$D_PID" "$1"
    D_PID=""
}

daemon_restart() {
    daemon_start || fail "the daemon's port $API_PORT was taken while it was down"
}

# ---- talking to them ----------------------------------------------------------------

sim() { # sim PATH [curl args...]
    curl -sS --max-time 10 --cacert "$T/sim/ca.pem" "$SIM$1" "${@:2}"
}
sim_fault() { sim /_sim/faults -H 'Content-Type: application/json' -d "$1" >/dev/null; }
sim_clear() { sim_fault '{"mode":"none"}'; }

api() { # api PATH [curl args...] -> body on stdout
    curl -sS --max-time 30 "$API$1" "${@:2}"
}

# charge KEY ORDER FIELDS -> ST (HTTP status), BODY (file), REPLAYED (0/1).
# The answer goes to $T/last.json and .h, or $CHARGE_OUT.json and .h.
charge() {
    local key=$1 order=$2 fields=$3 out=${CHARGE_OUT:-$T/last}
    BODY="$out.json"
    ST=$(curl -sS --max-time 30 -D "$out.h" -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/charges" -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
        -d "{\"order_id\":\"$order\",$fields}")
    REPLAYED=0
    if grep -qi '^Idempotency-Replayed: *true' "$out.h"; then REPLAYED=1; fi
}

# cancel KEY ORDER -> ST, BODY
cancel() {
    BODY="$T/last.json"
    ST=$(curl -sS --max-time 30 -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/charges/$2/cancel" -H "Idempotency-Key: $1")
}

field() { jq -r "$@" "$BODY"; }                       # field JQ -> from the last body
state() { api "/v1/charges/$1" | jq -r '.state // .error.code'; }
charge_json() { api "/v1/charges/$1"; }

ledger() { sim "/_sim/ledger?order_id=$1" | jq -c '.data'; }
captures() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].captures] | add // 0'; }
trades() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].trades] | add // 0'; }
sim_status() { sim "/_sim/ledger?order_id=$1" | jq -r '.data[0].status // "-"'; }

# All fulfilment events (pages through the feed) -> one JSON array.
all_events() {
    local after=0 page all='[]'
    while :; do
        page=$(api "/v1/events?after=$after&limit=100")
        all=$(jq -c --argjson a "$all" '$a + .data' <<<"$page")
        [ "$(jq '.data | length' <<<"$page")" -gt 0 ] || break
        after=$(jq '.next' <<<"$page")
    done
    echo "$all"
}
events_of() { # events_of ORDER TYPE -> count
    all_events | jq --arg o "$1" --arg t "$2" '[.[] | select(.order_id == $o and .type == $t)] | length'
}

is_final() { case $(state "$1") in SUCCESS | FAILED | CANCELED) return 0 ;; esac; return 1; }
in_state() { [ "$(state "$1")" = "$2" ]; }
wait_state() { # wait_state ORDER STATE [SECONDS]
    wait_until "${3:-30}" in_state "$1" "$2" ||
        fail "$1: expected state $2 within ${3:-30} s, it is $(state "$1") ($(charge_json "$1" | jq -c '{state,review,review_reason,attempts,error}'); sim: $(ledger "$1"))"
}
wait_final() { # wait_final ORDER [SECONDS]
    wait_until "${2:-30}" is_final "$1" ||
        fail "$1: not final within ${2:-30} s: $(charge_json "$1" | jq -c '{state,review,review_reason,attempts}'); sim: $(ledger "$1")"
}

# Every notification the simulator queued was delivered (or given up): the
# deliberate duplicates have arrived, so event counts are final.
notes_done() { [ "$(sim /_sim/notifications | jq '[.data[] | select(.delivered == false and .gave_up == false)] | length')" = 0 ]; }
wait_notes() { wait_until "${1:-30}" notes_done || fail "the simulator still has notifications to deliver: $(sim /_sim/notifications | jq -c '[.data[] | select(.delivered == false)]')"; }

queue_idle() { [ "$(api /v1/status | jq '.queue.count + .unknown + .processing + .pending')" = 0 ]; }

metric() { # metric NAME [TEXT]: the sum of NAME's samples whose labels contain TEXT
    api /metrics | awk -v n="$1{" -v f="${2:-}" 'index($0, n) == 1 && index($0, f) {s += $NF} END {print s + 0}'
}

# expect_once ORDER: the whole story of a paid order.
expect_captured_once() {
    local o=$1
    expect "$o captures at the simulator" 1 "$(captures "$o")"
    expect "$o local state" SUCCESS "$(state "$o")"
    expect "$o review flag" false "$(charge_json "$o" | jq -r .review)"
    expect "$o charge.succeeded events" 1 "$(events_of "$o" charge.succeeded)"
    expect "$o charge.failed events" 0 "$(events_of "$o" charge.failed)"
}

# expect_all_captured_once ORDER...: one capture, one trade and one
# charge.succeeded for every order (one pass over the ledger and the feed).
expect_all_captured_once() {
    local led ev report
    led=$(sim /_sim/ledger)
    ev=$(all_events)
    report=$(jq -rn --argjson led "$led" --argjson ev "$ev" '
        $ARGS.positional[] as $o
        | {o: $o,
           captures: ([$led.data[] | select(.order_id == $o) | .captures] | add // 0),
           trades: ([$led.data[] | select(.order_id == $o) | .trades] | add // 0),
           succeeded: ([$ev[] | select(.order_id == $o and .type == "charge.succeeded")] | length)}
        | select(.captures != 1 or .trades != 1 or .succeeded != 1)
        | "\(.o): captures \(.captures), trades \(.trades), charge.succeeded events \(.succeeded); expected 1 each"' \
        --args "$@")
    [ -z "$report" ] || fail "$report"
}

pass() {
    # Every answer the daemon gave, whoever asked (PAYTERM_TEST_ANSWER_LOG);
    # none at all (not even the /healthz the start polls) would mean the
    # check checked nothing.
    [ -z "$API_PORT" ] || [ -s "$T/answers/journal" ] ||
        fail "no answers were logged for the OpenAPI check (PAYTERM_TEST_ANSWER_LOG needs a PT_WITH_SIM build)"
    if [ -s "$T/answers/journal" ]; then
        local py=${PT_PYTHON:-/usr/bin/python3} dir
        dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
        "$py" -c 'import jsonschema' 2>/dev/null ||
            fail "python3-jsonschema is needed to check the answers against the OpenAPI description"
        "$py" "$dir/openapi_check.py" "$dir/../../firmware/openapi.json" "$T/answers/journal" \
            >"$T/answers.report" 2>&1 || fail "answers that do not fit the OpenAPI description: $(cat "$T/answers.report")"
        log "$(tail -n 1 "$T/answers.report")"
    fi
    PASSED=1
    log "PASS $TEST_NAME"
}

# ---- charge bodies ----------------------------------------------------------------------
# Valid order ids for every gateway: WeChat wants 6-32 chars, 2C2P invoiceNo
# at most 50, Alipay/Stripe 64.
AUTH_CODE=287634438256643941
alipay_barcode() { printf '"amount":%d,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"%s","subject":"Latte"' "$1" "$AUTH_CODE"; }
alipay_qr() { printf '"amount":%d,"currency":"CNY","gateway":"alipay","method":"qr","subject":"Cake"' "$1"; }
# WeChat payment codes (付款码): 18 digits, 10-15 first.
WX_AUTH_CODE=134567890123456789
wechat_barcode() { printf '"amount":%d,"currency":"CNY","gateway":"wechat","method":"barcode","payment_code":"%s","subject":"Dumplings"' "$1" "$WX_AUTH_CODE"; }
wechat_qr() { printf '"amount":%d,"currency":"CNY","gateway":"wechat","method":"qr","subject":"Tea"' "$1"; }
stripe_card() { printf '"amount":%d,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa","customer":"cus_test"' "$1"; }
c2p_redirect() { printf '"amount":%d,"currency":"THB","gateway":"2c2p","method":"redirect","subject":"Room 12"' "$1"; }
body_for() { # body_for GATEWAY.METHOD AMOUNT
    case $1 in
    alipay.barcode) alipay_barcode "$2" ;;
    alipay.qr) alipay_qr "$2" ;;
    wechat.qr) wechat_qr "$2" ;;
    wechat.barcode) wechat_barcode "$2" ;;
    stripe.card_on_file) stripe_card "$2" ;;
    2c2p.redirect) c2p_redirect "$2" ;;
    *) fail "unknown gateway.method $1" ;;
    esac
}
