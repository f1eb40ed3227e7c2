#!/usr/bin/env bash
# offline_expired.sh PAYTERM - a queued charge older than its
# offline.max_age_s.<gateway>.<method> is never sent (SPEC section 5): it
# becomes FAILED with error code offline_expired and one charge.failed
# event, and nothing reaches the gateway, during the outage or after it.  A
# charge queued later, still young when the network returns, is captured
# once.
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/extra.json" <<'JSON'
{"offline": {"max_age_s": {"alipay.barcode": 2, "stripe.card_on_file": 4}}}
JSON
sync_start "$T/extra.json"

sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
charge k-exp-a EXP-ALI "$(alipay_barcode 1800)"
expect "EXP-ALI queued" 202 "$ST"
expect "EXP-ALI state" INIT "$(field .state)"
cp "$BODY" "$T/first-ali.json"
charge k-exp-s EXP-STR "$(stripe_card 1900)"
expect "EXP-STR queued" 202 "$ST"
log "two charges queued while the gateways are unreachable"
sleep 5 # both past their age limit
charge k-fresh EXP-FRESH "$(stripe_card 2000)"
expect "EXP-FRESH queued" 202 "$ST"
expect "trades at the simulator during the outage" 0 "$(sim /_sim/ledger | jq '.data | length')"
sim_clear
log "network back"

for o in EXP-ALI EXP-STR; do
    wait_state "$o" FAILED 15
    expect "$o error code" offline_expired "$(charge_json "$o" | jq -r .error.code)"
done
wait_state EXP-FRESH SUCCESS 15
sleep 2 # another pass or two with the gateways reachable
for o in EXP-ALI EXP-STR; do
    expect "$o state after reconnection" FAILED "$(state "$o")"
    expect "$o trades at the simulator" 0 "$(trades "$o")"
    expect "$o charge.failed events" 1 "$(events_of "$o" charge.failed)"
    expect "$o charge.succeeded events" 0 "$(events_of "$o" charge.succeeded)"
    trail=$(api "/v1/charges/$o/events")
    expect "$o expiry in the audit trail" 1 "$(jq '[.data[] | select(.cause == "offline_expired" and .to == "FAILED")] | length' <<<"$trail")"
    # The first attempt (the online path, the gateway still believed up)
    # failed before a byte left: every PROCESSING came back as not_sent.
    expect "$o sends that were not provably unsent ($(jq -c '[.data[].cause]' <<<"$trail"))" \
        "$(jq '[.data[] | select(.cause == "not_sent")] | length' <<<"$trail")" \
        "$(jq '[.data[] | select(.to == "PROCESSING")] | length' <<<"$trail")"
done
# The client retrying the expired charge's key gets the stored answer; the
# charge itself says FAILED.
charge k-exp-a EXP-ALI "$(alipay_barcode 1800)"
expect "EXP-ALI retry" 202 "$ST"
expect "EXP-ALI retry replayed" 1 "$REPLAYED"
expect "EXP-ALI retry body" "$(jq -cS . "$T/first-ali.json")" "$(jq -cS . "$BODY")"
expect_captured_once EXP-FRESH
pass
