#!/usr/bin/env bash
# offline_expired.sh PAYTERM - a queued charge older than its
# offline.max_age_s.<gateway>.<method> is never sent (SPEC section 5): it
# becomes FAILED with error code offline_expired and one charge.failed
# event, and nothing reaches the gateway, not even after the network
# returns.  A charge queued later, still young, is captured once.
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/extra.json" <<'JSON'
{"offline": {"max_age_s": {"alipay.barcode": 2, "stripe.card_on_file": 3}}}
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

for o in EXP-ALI EXP-STR; do
    wait_state "$o" FAILED 15
    expect "$o error code" offline_expired "$(charge_json "$o" | jq -r .error.code)"
done
log "both expired while offline"
charge k-fresh EXP-FRESH "$(stripe_card 2000)"
expect "EXP-FRESH queued" 202 "$ST"
sim_clear
api /v1/sync -X POST >/dev/null
wait_state EXP-FRESH SUCCESS 20
sleep 2 # another pass or two with the gateways reachable
for o in EXP-ALI EXP-STR; do
    expect "$o state after reconnection" FAILED "$(state "$o")"
    expect "$o trades at the simulator" 0 "$(trades "$o")"
    expect "$o charge.failed events" 1 "$(events_of "$o" charge.failed)"
    expect "$o charge.succeeded events" 0 "$(events_of "$o" charge.succeeded)"
    expect "$o expiry in the audit trail" 1 "$(api "/v1/charges/$o/events" | jq '[.data[] | select(.cause == "offline_expired" and .to == "FAILED")] | length')"
done
# The client retrying the expired charge's key gets the stored answer; the
# charge itself says FAILED.
charge k-exp-a EXP-ALI "$(alipay_barcode 1800)"
expect "EXP-ALI retry" 202 "$ST"
expect "EXP-ALI retry replayed" 1 "$REPLAYED"
expect "EXP-ALI retry body" "$(jq -cS . "$T/first-ali.json")" "$(jq -cS . "$BODY")"
expect_captured_once EXP-FRESH
pass
