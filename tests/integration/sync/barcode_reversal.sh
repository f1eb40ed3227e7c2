#!/usr/bin/env bash
# barcode_reversal.sh PAYTERM - an Alipay barcode payment still
# WAIT_BUYER_PAY (the simulator leaves amounts ending in 52 unpaid) after
# gateways.alipay.barcode_timeout_s is reversed with alipay.trade.cancel
# (SPEC section 7): CANCELED locally, canceled at the simulator, no capture,
# one charge.canceled.  The same for one whose pay answer was lost (UNKNOWN,
# then found WAIT_BUYER_PAY by query), and for one whose pay never reached
# Alipay's ledger and could not be resent before the code expired (queries
# answer ACQ.TRADE_NOT_EXIST: a definite answer, not an attempt; reversed,
# CANCELED, never left under review).  A barcode payment that succeeded is
# left alone after the timeout.
. "$(dirname "$0")/synclib.sh" "$@"
# barcode_timeout_s is merged into the simulator's gateways.alipay section
# (later -c files win, objects merge); 5 s is its minimum.
cat >"$T/extra.json" <<'JSON'
{"gateways": {"alipay": {"barcode_timeout_s": 5}}}
JSON
sync_start "$T/extra.json"

charge k-rev-1 REV-WAIT "$(alipay_barcode 1252)"
expect "REV-WAIT first answer" 202 "$ST"
expect "REV-WAIT first state" PENDING "$(field .state)"
sim_fault '{"gateway":"alipay","mode":"http_500_after_commit","count":1}'
charge k-rev-2 REV-LOST "$(alipay_barcode 2252)"
expect "REV-LOST first answer" 202 "$ST"
expect "REV-LOST first state" UNKNOWN "$(field .state)"
charge k-rev-3 REV-PAID "$(alipay_barcode 1200)"
expect "REV-PAID first answer" 201 "$ST"
expect "REV-PAID state" SUCCESS "$(field .state)"
log "one unpaid, one with its answer lost, one paid"

expect "REV-WAIT at the simulator" pending "$(sim_status REV-WAIT)"
for o in REV-WAIT REV-LOST; do wait_state "$o" CANCELED 20; done
log "both reversed after barcode_timeout_s"
wait_notes 30
for o in REV-WAIT REV-LOST; do
    expect "$o at the simulator" canceled "$(sim_status "$o")"
    expect "$o captures" 0 "$(captures "$o")"
    expect "$o charge.canceled events" 1 "$(events_of "$o" charge.canceled)"
    expect "$o charge.succeeded events" 0 "$(events_of "$o" charge.succeeded)"
    trail=$(api "/v1/charges/$o/events")
    expect "$o reversal in the audit trail" 1 "$(jq '[.data[] | select(.cause == "barcode_timeout" and .to == "CANCELED")] | length' <<<"$trail")"
    # Not before the auth code's time was up: barcode_timeout_s after the
    # pay request was first sent.
    waited=$(jq 'def ms: (.[0:19] + "Z" | fromdateiso8601) * 1000 + (.[20:23] | tonumber);
        ([.data[] | select(.cause == "barcode_timeout" and .to == "CANCELED")][0].created_at | ms)
        - ([.data[] | select(.to == "PROCESSING")][0].created_at | ms)' <<<"$trail")
    [ "$waited" -ge 5000 ] || fail "$o reversed $waited ms after the pay was sent, before barcode_timeout_s (5 s)"
    log "$o reversed $waited ms after the pay was sent"
done
expect "REV-PAID at the simulator" captured "$(sim_status REV-PAID)"
expect_captured_once REV-PAID

# The pay is dropped before Alipay records it; then the link goes down
# before the daemon can query (its first query is due 200-400 ms later), and
# comes back only after barcode_timeout_s.
sim_fault '{"gateway":"alipay","mode":"fail_before_commit","count":1,"method":"POST"}'
charge k-rev-4 REV-NEVER "$(alipay_barcode 1300)"
sim_fault '{"gateway":"alipay","mode":"refuse_connect","count":-1}'
expect "REV-NEVER first answer" 202 "$ST"
expect "REV-NEVER first state" UNKNOWN "$(field .state)"
sleep 6
sim_clear
wait_state REV-NEVER CANCELED 20
expect "REV-NEVER trades at the simulator (it never had the order)" 0 "$(trades REV-NEVER)"
expect "REV-NEVER review" false "$(charge_json REV-NEVER | jq -r .review)"
expect "REV-NEVER attempts (one ambiguous send; the queries do not count)" 1 "$(charge_json REV-NEVER | jq .attempts)"
expect "REV-NEVER charge.canceled events" 1 "$(events_of REV-NEVER charge.canceled)"
log "REV-NEVER reversed after barcode_timeout_s, not left for an operator"
pass
