#!/usr/bin/env bash
# test_clock.sh - the wall clock moved under a running daemon (desktop
# builds: PAYTERM_TEST_CLOCK_FILE, platform/sim/clock.c).  Every part of the
# daemon reads time through its platform (firmware/host.h), so without
# waiting:
#   * a queued Alipay barcode charge outlives offline.max_age_s (60 s) when
#     the clock moves 2 minutes: FAILED offline_expired, one charge.failed,
#     never sent;
#   * an idempotency key outlives idempotency.ttl_s when the clock moves a
#     day: the same key is a new request (a 422 before, a new charge after),
#     while the first order still cannot be charged twice (data layer).
source "$(dirname "$0")/lib.sh"

CLOCK=""
move_clock() { echo "$1" >"$CLOCK"; sleep 0.3; } # re-read within 100 ms

barcode() {
    jq -cn --arg o "$1" '{order_id: $o, amount: 1200, currency: "CNY", gateway: "alipay",
        method: "barcode", payment_code: "287634438256643941", subject: "Latte"}'
}

case_offline_expiry()
{
    move_clock 0
    pt_post /v1/charges clk-exp-1 "$(barcode CLK-EXP-1)"
    expect_status 202
    expect_json .state INIT
    move_clock 120000 # two minutes later: past offline.max_age_s.alipay.barcode
    local i state=""
    for i in $(seq 50); do
        pt_get /v1/charges/CLK-EXP-1
        state=$(jq -r .state <"$PT_BODY_FILE")
        [ "$state" = FAILED ] && break
        sleep 0.2
    done
    expect_eq FAILED "$state" "CLK-EXP-1 state after the clock moved 2 minutes"
    expect_json .error.code offline_expired
    pt_get "/v1/events?after=0&limit=100"
    expect_json '[.data[] | select(.order_id == "CLK-EXP-1" and .type == "charge.failed")] | length' 1
    pt_get /v1/charges/CLK-EXP-1/events
    expect_json '[.data[] | select(.to == "PROCESSING")] | length' 0
}

case_key_expiry()
{
    move_clock 0
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-1)"
    expect_status 202
    # Another request under the same key, while the key lives: 422.
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-2)"
    expect_error 422 idempotency_key_reused
    move_clock $((25 * 3600 * 1000)) # a day and an hour: past idempotency.ttl_s
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-2)"
    expect_status 202
    expect_json .order_id CLK-KEY-2
    # The first order's record expired too, but it is charged once, ever.
    pt_post /v1/charges clk-key-3 "$(charge_body CLK-KEY-1 '.amount = 999')"
    expect_error 409 order_id_conflict
}

pt_init
CLOCK=$PT_TMP/clock
echo 0 >"$CLOCK"
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
pt_config
pt_start
pt_case "a queued barcode charge expires when the clock moves past offline.max_age_s" case_offline_expiry
pt_case "an idempotency key expires when the clock moves past its ttl" case_key_expiry
pt_done
