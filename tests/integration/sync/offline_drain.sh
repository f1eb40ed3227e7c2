#!/usr/bin/env bash
# offline_drain.sh PAYTERM - a long offline period, then reconnection.
#
# Every gateway host refuses connections (the network is down) while the
# kiosk takes 30 card and barcode charges on two gateways, retrying some with
# the same keys.  Nothing may reach a gateway while it is down; the queue is
# visible in /v1/status.  When the network returns the daemon notices by
# itself (no POST /v1/sync) and drains the queue oldest first: the
# simulator's ledger holds the orders in the order they were taken, each
# captured exactly once, each SUCCESS locally with one charge.succeeded.
# (The order of the fulfilment events is the order the outcomes were
# committed - sends go out in runs, notifications race them - so only the
# ledger tells the sending order.)
. "$(dirname "$0")/synclib.sh" "$@"
sync_start
N=30

sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
ORDERS=()
for i in $(seq 1 $N); do
    o=$(printf 'OFF-%03d' "$i")
    ORDERS+=("$o")
    if [ $((i % 2)) = 1 ]; then
        body=$(alipay_barcode $((1000 + i * 10)))
    else
        body=$(stripe_card $((500 + i * 10)))
    fi
    charge "k-$o" "$o" "$body"
    expect "$o queued" 202 "$ST"
    expect "$o state" INIT "$(field .state)"
    if [ $((i % 7)) = 0 ]; then # the kiosk retries some of them
        cp "$BODY" "$T/first.json"
        charge "k-$o" "$o" "$body"
        expect "$o retry while offline" 202 "$ST"
        expect "$o retry replayed" 1 "$REPLAYED"
        expect "$o retry body" "$(jq -cS . "$T/first.json")" "$(jq -cS . "$BODY")"
    fi
done
log "$N charges queued while every gateway refuses connections"

# The outage lasts several sync intervals: the daemon keeps trying (and
# probing) and must not get a single request through.
sleep 4
st=$(api /v1/status)
expect "online during the outage" false "$(jq .online <<<"$st")"
expect "queue count" $N "$(jq .queue.count <<<"$st")"
[ "$(jq .queue.oldest_age_s <<<"$st")" -ge 3 ] || fail "queue.oldest_age_s: expected >= 3, got $(jq -c .queue <<<"$st")"
expect "trades at the simulator during the outage" 0 "$(sim /_sim/ledger | jq '.data | length')"
[ "$(metric payterm_sync_attempts_total 'outcome="not_sent"')" -ge 2 ] ||
    fail "the daemon did not keep trying during the outage: $(api /metrics | grep '^payterm_sync_attempts_total')"

sim_clear
log "network back"
all_success() {
    [ "$(api "/v1/charges?state=SUCCESS&limit=100" | jq '.data | length')" = $N ]
}
wait_until 60 all_success || fail "the queue did not drain within 60 s: $(api /v1/status | jq -c .)"
log "queue drained"

ledger_orders=$(sim /_sim/ledger | jq -r '.data[].order_id' | tr '\n' ' ')
expect "order of the orders at the simulator (oldest first)" "${ORDERS[*]} " "$ledger_orders"
expect "trades at the simulator" $N "$(sim /_sim/ledger | jq '.data | length')"
wait_notes 40
expect_all_captured_once "${ORDERS[@]}"
ev=$(all_events)
expect "events in the feed" $N "$(jq length <<<"$ev")"
st=$(api /v1/status)
expect "online after the drain" true "$(jq .online <<<"$st")"
expect "queue after the drain" 0 "$(jq .queue.count <<<"$st")"
pass
