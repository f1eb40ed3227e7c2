#!/usr/bin/env bash
# cli_refund.sh PAYTERM - `payterm refund` and `payterm refunds` (SPEC 5a)
# against the real daemon and simulator: exit codes, what is printed, and
# what the merchant cares about - running the same command again (after a
# lost answer, a timeout) never makes a second refund at the gateway.
# (Usage errors and the daemon's refusals without a gateway are in
# tests/integration/test_cli.sh.)
. "$(dirname "$0")/synclib.sh" "$@"

echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json"
sync_start "$T/extra.json"
CFG=(-c "$T/base.json" -c "$T/sim/gateways.json" -c "$T/extra.json")

# cli ARGS... -> RC, OUT (stdout), ERR (stderr)
cli() {
    RC=0
    OUT=$(timeout 60 "$PAYTERM" "$@" "${CFG[@]}" 2>"$T/cli.err" </dev/null) || RC=$?
    ERR=$(cat "$T/cli.err")
    [ "$RC" != 124 ] || fail "payterm $* did not end within 60 s"
}
expect_match() { [[ $3 =~ $2 ]] || fail "$1: '$3' does not match /$2/"; }

sim_refunded() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunded] | add // 0'; }
sim_refunds() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunds] | add // 0'; }
refund_state() { api "/v1/refunds/$1" | jq -r '.state // .error.code'; }
refund_in() { [ "$(refund_state "$1")" = "$2" ]; }
wait_refund() { # wait_refund REFUND_ID STATE [SECONDS]
    wait_until "${3:-30}" refund_in "$1" "$2" ||
        fail "refund $1: expected $2 within ${3:-30} s, it is $(api "/v1/refunds/$1" | jq -c '{state,attempts,review,error}')"
}
# expect_refunded ORDER TOTAL COUNT: the simulator and payterm agree.
expect_refunded() {
    expect "$1: refunded at the simulator" "$2" "$(sim_refunded "$1")"
    expect "$1: refunds executed at the simulator" "$3" "$(sim_refunds "$1")"
    expect "$1: amount_refunded" "$2" "$(charge_json "$1" | jq .amount_refunded)"
    expect "$1: refunds on the charge" "$3" "$(charge_json "$1" | jq .refunds)"
}

# ---- an unknown order ------------------------------------------------------------
cli refund CLI-NOPE --refund-id R-CLI-NOPE --amount 100
expect "refund of an unknown order: exit status" 1 "$RC"
expect "refund of an unknown order: code on stdout" not_found "$(jq -r .error.code <<<"$OUT")"
expect "refund of an unknown order: stderr" \
    "payterm refund: 404 not_found: $(jq -r .error.message <<<"$OUT")" "$ERR"
expect_match "the 404 names the order" "CLI-NOPE" "$ERR"

# ---- a paid order, refunded in two parts, then once too often -----------------------
O=CLI-S1
charge "k-$O" "$O" "$(stripe_card 1000)"
expect "$O: charge" 201 "$ST"
cli refund "$O" --refund-id R-CLI-1 --amount 300 --reason "returned item"
expect "refund R-CLI-1: exit status ($ERR)" 0 "$RC"
expect "refund R-CLI-1: stdout" "R-CLI-1 CLI-S1 300 USD SUCCESS returned item" \
    "$(jq -r '"\(.refund_id) \(.order_id) \(.amount) \(.currency) \(.state) \(.reason)"' <<<"$OUT")"
expect "refund R-CLI-1: stderr" "payterm refund: refund R-CLI-1 of CLI-S1: SUCCESS" "$ERR"
first=$OUT
# The answer was lost (say): the operator runs the very same command again.
cli refund "$O" --refund-id R-CLI-1 --amount 300 --reason "returned item"
expect "R-CLI-1 again: exit status ($ERR)" 0 "$RC"
expect "R-CLI-1 again: the same refund, byte for byte" "$first" "$OUT"
expect "R-CLI-1 again: stderr" \
    "payterm refund: refund R-CLI-1 of CLI-S1: SUCCESS (the answer to the first run of this command)" "$ERR"
expect_refunded "$O" 300 1
# The same refund id with another amount is another request: refused.
cli refund "$O" --refund-id R-CLI-1 --amount 301
expect "R-CLI-1 with another amount: exit status" 1 "$RC"
expect "R-CLI-1 with another amount: code" idempotency_key_reused "$(jq -r .error.code <<<"$OUT")"
expect "R-CLI-1 with another amount: stderr" \
    "payterm refund: 422 idempotency_key_reused: refund R-CLI-1 was asked for before with another order, --amount or --reason; a new refund needs a new --refund-id" "$ERR"
# No --amount: everything that is left.
cli refund "$O" --refund-id R-CLI-2
expect "R-CLI-2 (the rest): exit status ($ERR)" 0 "$RC"
expect "R-CLI-2 (the rest): amount and state" "700 SUCCESS" "$(jq -r '"\(.amount) \(.state)"' <<<"$OUT")"
cli refund "$O" --refund-id R-CLI-3 --amount 1
expect "R-CLI-3 (nothing left): exit status" 1 "$RC"
expect "R-CLI-3 (nothing left): code" refund_exceeds_charge "$(jq -r .error.code <<<"$OUT")"
expect_match "R-CLI-3 (nothing left): stderr" \
    "^payterm refund: 409 refund_exceeds_charge: .*has nothing left to refund" "$ERR"
expect_refunded "$O" 1000 2

# ---- the answer lost between payterm and the gateway --------------------------------
O2=CLI-S2
charge "k-$O2" "$O2" "$(stripe_card 800)"
expect "$O2: charge" 201 "$ST"
sim_fault '{"gateway":"stripe","mode":"drop_after_commit","count":1}'
cli refund "$O2" --refund-id R-CLI-4 --amount 500
expect "R-CLI-4 (answer lost): exit status ($ERR)" 0 "$RC"
expect "R-CLI-4 (answer lost): state" UNKNOWN "$(jq -r .state <<<"$OUT")"
expect_match "R-CLI-4 (answer lost): stderr" "refund R-CLI-4 is UNKNOWN: .*never refunds again" "$ERR"
cli refund "$O2" --refund-id R-CLI-4 --amount 500
expect "R-CLI-4 again: exit status ($ERR)" 0 "$RC"
wait_refund R-CLI-4 SUCCESS 30
# The stored answer (202 UNKNOWN) is replayed; the command shows the refund
# as it is now instead of the stale first answer.
cli refund "$O2" --refund-id R-CLI-4 --amount 500
expect "R-CLI-4 once more: exit status ($ERR)" 0 "$RC"
expect "R-CLI-4 once more: the refund now" "$(api /v1/refunds/R-CLI-4)" "$OUT"
expect "R-CLI-4 once more: stderr" \
    "payterm refund: refund R-CLI-4 of CLI-S2: SUCCESS (this command ran before; this is the refund now)" "$ERR"
sleep 1 # a late original request lands at the simulator too
expect_refunded "$O2" 500 1

# ---- queued while the network is cut ------------------------------------------------
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
cli refund "$O2" --refund-id R-CLI-5 --amount 300
expect "R-CLI-5 (offline): exit status ($ERR)" 0 "$RC"
expect "R-CLI-5 (offline): state" INIT "$(jq -r .state <<<"$OUT")"
expect_match "R-CLI-5 (offline): stderr" "refund R-CLI-5 is queued \(INIT\)" "$ERR"
expect "R-CLI-5: nothing at the simulator yet" 1 "$(sim_refunds "$O2")"
sim_clear
wait_refund R-CLI-5 SUCCESS 30
expect_refunded "$O2" 800 2

# ---- payterm refunds ----------------------------------------------------------------
cli refunds
expect "refunds: exit status ($ERR)" 0 "$RC"
expect "refunds: header" "id refund_id order_id gateway amount cur state note" \
    "$(head -n 1 <<<"$OUT" | tr -s ' ')"
expect "refunds: rows" "R-CLI-1 CLI-S1 stripe 300 USD SUCCESS|R-CLI-2 CLI-S1 stripe 700 USD SUCCESS|R-CLI-4 CLI-S2 stripe 500 USD SUCCESS|R-CLI-5 CLI-S2 stripe 300 USD SUCCESS" \
    "$(tail -n +2 <<<"$OUT" | awk '{print $2, $3, $4, $5, $6, $7}' | paste -sd '|')"
cli refunds --json --order "$O2"
expect "refunds --json --order $O2" "R-CLI-4 500 SUCCESS,R-CLI-5 300 SUCCESS" \
    "$(jq -sr 'map("\(.refund_id) \(.amount) \(.state)") | join(",")' <<<"$OUT")"
expect "refunds --json: the API's refund objects" "$(api "/v1/charges/$O2/refunds" | jq -c '.data[]')" \
    "$(jq -c . <<<"$OUT")"
cli refunds --state SUCCESS --order "$O" --limit 1
expect "refunds --state --order --limit 1" "R-CLI-1" "$(sed -n 2p <<<"$OUT" | awk '{print $2}')"
expect_match "refunds --limit 1: how to go on" \
    "^\(more: payterm refunds --state SUCCESS --order CLI-S1 --after [0-9]+\)$" "$(tail -n 1 <<<"$OUT")"
cli refunds --state UNKNOWN --json
expect "refunds --state UNKNOWN" "0 " "$RC $OUT"

log "refund through the CLI: 404, two parts, the rest, one too many, a lost answer, a queued refund; each executed once"
pass
