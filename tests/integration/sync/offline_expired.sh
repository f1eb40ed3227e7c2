#!/usr/bin/env bash
# offline_expired.sh PAYTERM - a queued charge older than its
# offline.max_age_s.<gateway>.<method> is never sent (SPEC section 5): it
# becomes FAILED with error code offline_expired and one charge.failed
# event, and nothing reaches the gateway, during the outage or after it.  A
# charge queued later, still young when the network returns, is captured
# once.
. "$(dirname "$0")/synclib.sh" "$@"

# Nobody waits for the charges to age: the daemon's wall and boot-time
# clocks (every age is boot time, SPEC 17) move together by what the test
# writes here (platform/sim/clock.c), read again every 100 ms.
CLOCK=$T/clock
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
echo "0 boot=0" >"$CLOCK"
CLOCK_FROM=0
daemon_ahead() { # daemon_ahead SECONDS: payterm's own time is that far ahead of $CLOCK_FROM
    [ $(($(date -d "$(api /v1/status | jq -r .clock.payterm)" +%s) - CLOCK_FROM)) -ge "$1" ]
}
time_passes() { # time_passes SECONDS: for the daemon, which says so in /v1/status
    CLOCK_FROM=$(date +%s)
    echo "$(($1 * 1000)) boot=$(($1 * 1000))" >"$CLOCK"
    wait_until 10 daemon_ahead "$1" ||
        fail "the daemon's clock did not move by $1 s: $(api /v1/status | jq -c .clock)"
}

# Another pass of the sync thread with the gateways reachable, seen to end:
# it drains a charge queued for it (force_offline), which it captures.
a_pass() { # a_pass N
    charge "k-exp-pass-$1" "EXP-PASS-$1" "$(stripe_card 2100),\"offline\":\"force_offline\""
    expect "EXP-PASS-$1 queued" 202 "$ST"
    wait_state "EXP-PASS-$1" SUCCESS 15
}

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
time_passes 5 # both past their age limit
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
a_pass 1 # another pass or two with the gateways reachable
a_pass 2
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
