#!/usr/bin/env bash
# demo.sh - a kiosk session against the gateway simulator (make demo).
#
# Starts `payterm sim` and `payterm serve` in build/demo, then plays what a
# lane sees in a day: online charges on all four gateways, the network cut,
# charges queued offline, client retries with the same keys, the network
# back, the queue drained, duplicate notifications ignored, a gateway that
# took the money but lost the answer.  Prints a summary and exits 0 only if
# every order was captured exactly once at the simulator and every
# fulfilment event was delivered once.
#
# Ports: DEMO_API_PORT (default 18080) and DEMO_SIM_PORT (default 18443).
set -euo pipefail
cd "$(dirname "$0")/.."

PAYTERM=${PAYTERM:-build/dev/firmware/payterm}
API_PORT=${DEMO_API_PORT:-18080}
SIM_PORT=${DEMO_SIM_PORT:-18443}
DIR=${DEMO_DIR:-build/demo}
API=http://127.0.0.1:$API_PORT
SIM=https://127.0.0.1:$SIM_PORT

bold=$(tput bold 2>/dev/null || true)
plain=$(tput sgr0 2>/dev/null || true)
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf '   %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

[ -x "$PAYTERM" ] || die "$PAYTERM not built (run make demo)"
for tool in curl jq; do command -v $tool >/dev/null || die "$tool is missing (scripts/deps.sh installs it)"; done

rm -rf "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free "$API_PORT" || die "port $API_PORT is in use; set DEMO_API_PORT"
port_free "$SIM_PORT" || die "port $SIM_PORT is in use; set DEMO_SIM_PORT"

wait_for() { # wait_for SECONDS CMD...
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

sim() { curl -sS --cacert "$DIR/sim/ca.pem" "$SIM$1" "${@:2}"; }

# ---- start the simulator and the daemon ----------------------------------------
say "Starting the gateway simulator on $SIM (Alipay, WeChat Pay, Stripe, 2C2P)"
"$PAYTERM" sim --listen "127.0.0.1:$SIM_PORT" --dir "$DIR/sim" --notify-base "$API" \
    >"$DIR/sim.log" 2>&1 &
pids+=($!)
wait_for 20 test -s "$DIR/sim/gateways.json" || die "simulator did not start (see $DIR/sim.log)"
wait_for 10 sim /_sim/ledger || die "simulator does not answer (see $DIR/sim.log)"
note "keys, certificates and gateways.json written to $DIR/sim"

cat >"$DIR/payterm.json" <<EOF
{
  "data_dir": "data",
  "listen": "127.0.0.1:$API_PORT",
  "log_level": "info",
  "offline": {
    "limits": {"CNY": {"max_amount": 50000, "max_total": 500000},
               "USD": {"max_amount": 20000, "max_total": 200000},
               "THB": {"max_amount": 500000, "max_total": 5000000}},
    "max_count": 100
  },
  "sync": {"interval_s": 1, "backoff_base_ms": 200, "backoff_max_ms": 2000,
           "request_timeout_ms": 3000}
}
EOF
say "Starting payterm serve on $API (config: payterm.json + the simulator's gateways.json)"
"$PAYTERM" serve -c "$DIR/payterm.json" -c "$DIR/sim/gateways.json" >"$DIR/payterm.log" 2>&1 &
pids+=($!)
wait_for 20 curl -sf "$API/healthz" || die "payterm did not start (see $DIR/payterm.log)"
note "database $DIR/data/payterm.db (SQLite, WAL, synchronous=FULL)"

# ---- the kiosk's side -------------------------------------------------------------
declare -A EXPECT   # order -> captured | declined | canceled
REPLAYS=0

# charge KEY ORDER JSON-FIELDS -> prints status, state; sets LAST_STATUS
charge() {
    local key=$1 order=$2 fields=$3 out
    out=$(curl -sS -D "$DIR/h.txt" -o "$DIR/b.json" -w '%{http_code}' -X POST "$API/v1/charges" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
        -d "{\"order_id\":\"$order\",$fields}")
    LAST_STATUS=$out
    local replayed=""
    if grep -qi '^Idempotency-Replayed: true' "$DIR/h.txt"; then
        replayed=" (replayed)"
        REPLAYS=$((REPLAYS + 1))
    fi
    printf '   %-10s %-6s %-9s %s%s\n' "$order" "$out" \
        "$(jq -r '.state // .error.code' "$DIR/b.json")" \
        "$(jq -r 'if .error then .error.message else (.qr_code // .code_url // .payment_url // "") end' "$DIR/b.json" | cut -c1-60)" \
        "$replayed"
}

CNY_BARCODE='"amount":%d,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"287634438256643941","subject":"Latte"'
STRIPE_CARD='"amount":%d,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa","customer":"cus_demo"'

say "1. Online: one charge per gateway and method"
printf '   %-10s %-6s %-9s %s\n' order HTTP state "detail"
charge k-a1 DEMO-A1 "$(printf "$CNY_BARCODE" 2350)";                         EXPECT[DEMO-A1]=captured
charge k-a2 DEMO-A2 '"amount":1800,"currency":"CNY","gateway":"alipay","method":"qr","subject":"Cake"'; EXPECT[DEMO-A2]=captured
charge k-w1 DEMO-W1 '"amount":2600,"currency":"CNY","gateway":"wechat","method":"qr","subject":"Tea"'; EXPECT[DEMO-W1]=captured
charge k-s1 DEMO-S1 "$(printf "$STRIPE_CARD" 1299)";                         EXPECT[DEMO-S1]=captured
charge k-t1 DEMO-T1 '"amount":150000,"currency":"THB","gateway":"2c2p","method":"redirect","subject":"Room 12"'; EXPECT[DEMO-T1]=captured
charge k-s2 DEMO-S2 "$(printf "$STRIPE_CARD" 1551)";                         EXPECT[DEMO-S2]=declined
note "(amounts ending in 51 are declined by the simulator: a 402 with the gateway's reason)"

say "2. The customer double-taps: the same requests again, same keys"
charge k-a1 DEMO-A1 "$(printf "$CNY_BARCODE" 2350)"
charge k-s1 DEMO-S1 "$(printf "$STRIPE_CARD" 1299)"

say "3. The network goes down (every gateway refuses connections)"
sim /_sim/faults -d '{"gateway":"*","mode":"refuse_connect","count":100000}' >/dev/null
charge k-o1 DEMO-O1 "$(printf "$STRIPE_CARD" 4500)";                         EXPECT[DEMO-O1]=captured
charge k-o2 DEMO-O2 "$(printf "$CNY_BARCODE" 3100)";                         EXPECT[DEMO-O2]=captured
charge k-o3 DEMO-O3 "$(printf "$STRIPE_CARD" 800)";                          EXPECT[DEMO-O3]=captured
charge k-o4 DEMO-O4 '"amount":990,"currency":"CNY","gateway":"wechat","method":"qr"'
note "(a QR code needs the gateway: refused, nothing stored, the key is free to retry)"
charge k-o5 DEMO-O5 "$(printf "$STRIPE_CARD" 90000)"
note "(above offline.limits.USD.max_amount: refused while offline)"
note "queue: $(curl -sS "$API/v1/status" | jq -c '{online, queue}')"

say "4. The kiosk retries while offline: same keys, nothing new is created"
charge k-o1 DEMO-O1 "$(printf "$STRIPE_CARD" 4500)"
charge k-o2 DEMO-O2 "$(printf "$CNY_BARCODE" 3100)"

say "5. The network comes back: the queue drains"
sim /_sim/faults -d '{"mode":"none"}' >/dev/null
curl -sS -X POST "$API/v1/sync" >/dev/null
queue_empty() { [ "$(curl -sS "$API/v1/status" | jq '.queue.count + .unknown + .processing')" = 0 ]; }
wait_for 30 queue_empty || die "the queue did not drain (see $DIR/payterm.log)"
note "queue: $(curl -sS "$API/v1/status" | jq -c '{online, queue}')"

say "6. The gateway takes the money but the answer is lost (drop_after_commit)"
sim /_sim/faults -d '{"gateway":"stripe","mode":"drop_after_commit","count":1}' >/dev/null
charge k-p1 DEMO-P1 "$(printf "$STRIPE_CARD" 2100)";                         EXPECT[DEMO-P1]=captured
note "(UNKNOWN: payterm asks Stripe by metadata['order_id'] instead of charging again)"
charge k-p1 DEMO-P1 "$(printf "$STRIPE_CARD" 2100)"
resolved() { [ "$(curl -sS "$API/v1/charges/DEMO-P1" | jq -r .state)" = SUCCESS ]; }
wait_for 30 resolved || die "DEMO-P1 was not resolved (see $DIR/payterm.log)"
note "DEMO-P1 is now $(curl -sS "$API/v1/charges/DEMO-P1" | jq -r .state)"

say "7. Customers scan the QR codes and pay; the gateways notify (with duplicates)"
all_final() {
    [ "$(curl -sS "$API/v1/status" | jq '.pending + .unknown + .processing + .queue.count')" = 0 ]
}
wait_for 60 all_final || die "charges still open (see $DIR/payterm.log)"
sleep 3 # let the simulator's deliberate duplicate notifications arrive
dups=$(curl -sS "$API/metrics" | awk '/^payterm_notifications_total\{.*result="duplicate"/ {s += $2} END {print s + 0}')
applied=$(curl -sS "$API/metrics" | awk '/^payterm_notifications_total\{.*result="applied"/ {s += $2} END {print s + 0}')
note "notifications applied: $applied, duplicates acknowledged and ignored: $dups"

# ---- the verdict ---------------------------------------------------------------------
say "Summary"
sim /_sim/ledger >"$DIR/ledger.json"
curl -sS "$API/v1/charges?limit=100" >"$DIR/charges.json"
curl -sS "$API/v1/events?limit=100" >"$DIR/events.json"
ok=1
printf '   %-9s %-7s %-10s %-9s %-8s %-6s %s\n' order gateway local simulator captures events verdict
for order in $(printf '%s\n' "${!EXPECT[@]}" | sort); do
    local_state=$(jq -r --arg o "$order" '.data[] | select(.order_id == $o) | .state' "$DIR/charges.json")
    gw=$(jq -r --arg o "$order" '.data[] | select(.order_id == $o) | .gateway' "$DIR/charges.json")
    sim_status=$(jq -r --arg o "$order" '[.data[] | select(.order_id == $o) | .status] | first // "-"' "$DIR/ledger.json")
    captures=$(jq -r --arg o "$order" '[.data[] | select(.order_id == $o) | .captures] | add // 0' "$DIR/ledger.json")
    events=$(jq -r --arg o "$order" '[.data[] | select(.order_id == $o and (.type == "charge.succeeded" or .type == "charge.failed"))] | length' "$DIR/events.json")
    want=${EXPECT[$order]}
    verdict=ok
    case $want in
    captured) [ "$captures" = 1 ] && [ "$local_state" = SUCCESS ] && [ "$events" = 1 ] || verdict=FAIL ;;
    declined) [ "$captures" = 0 ] && [ "$local_state" = FAILED ] && [ "$events" = 1 ] || verdict=FAIL ;;
    esac
    [ $verdict = ok ] || ok=0
    printf '   %-9s %-7s %-10s %-9s %-8s %-6s %s\n' "$order" "$gw" "$local_state" "$sim_status" "$captures" "$events" "$verdict"
done
# Nothing the kiosk did not ask for may exist at the gateway.
extra=$(jq -r '[.data[] | select(.captures > 1)] | length' "$DIR/ledger.json")
[ "$extra" = 0 ] || { ok=0; note "orders captured more than once: $extra"; }
dup_events=$(jq '[.data[] | select(.type == "charge.succeeded") | .order_id] | (length - (unique | length))' "$DIR/events.json")
[ "$dup_events" = 0 ] || { ok=0; note "fulfilment events delivered twice: $dup_events"; }

accepted=$(jq '.data | length' "$DIR/charges.json")
captured=$(jq '[.data[] | select(.captures == 1)] | length' "$DIR/ledger.json")
printf '\n   charges accepted: %s, captured at the simulator: %s, duplicates prevented: %s (%s replayed requests, %s duplicate notifications)\n' \
    "$accepted" "$captured" "$((REPLAYS + dups))" "$REPLAYS" "$dups"
if [ $ok = 1 ]; then
    printf '\n%sEvery order was captured exactly once; every fulfilment event was delivered once.%s\n' "$bold" "$plain"
    note "logs: $DIR/payterm.log, $DIR/sim.log"
    exit 0
fi
printf '\n%sFAILED: see above, %s/payterm.log and %s/sim.log%s\n' "$bold" "$DIR" "$DIR" "$plain"
exit 1
