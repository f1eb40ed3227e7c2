#!/usr/bin/env bash
# test_clock.sh - the clocks moved under a running daemon (desktop builds:
# PAYTERM_TEST_CLOCK_FILE, platform/sim/clock.c).  Every part of the daemon
# reads time through its platform (firmware/host.h), and every age and
# deadline is elapsed time, the boot-time clock (SPEC 17), so without
# waiting:
#   * a queued Alipay barcode charge does not expire when the wall clock
#     moves 2 minutes ahead, and outlives offline.max_age_s (60 s) when 2
#     minutes pass for the board: FAILED offline_expired, one charge.failed,
#     never sent;
#   * an idempotency key still replays when the wall clock moves a day
#     ahead, and outlives idempotency.ttl_s when a day passes: the same key
#     is a new request (a 422 before, a new charge after), while the first
#     order still cannot be charged twice (data layer).
source "$(dirname "$0")/lib.sh"

CLOCK=""
# move_clock WALL_MS ELAPSED_MS: the wall clock and the time that passed for
# the board, ahead of the real ones; re-read within 100 ms, and the daemon
# says it sees them.
move_clock()
{
    echo "$1 boot=$2 synced=1" >"$CLOCK"
    local want=$(($(date +%s) + $1 / 1000)) i got=0
    for i in $(seq 50); do
        pt_get /v1/status
        got=$(date -d "$(jq -r .clock.wall <"$PT_BODY_FILE")" +%s)
        [ $((got - want)) -ge -5 ] && [ $((got - want)) -le 5 ] && return 0
        sleep 0.1
    done
    fail "the daemon's wall clock did not move by $1 ms (it says $(jq -c .clock <"$PT_BODY_FILE"))"
}

barcode() {
    jq -cn --arg o "$1" '{order_id: $o, amount: 1200, currency: "CNY", gateway: "alipay",
        method: "barcode", payment_code: "287634438256643941", subject: "Latte"}'
}

case_offline_expiry()
{
    move_clock 0 0
    pt_post /v1/charges clk-exp-1 "$(barcode CLK-EXP-1)"
    expect_status 202
    expect_json .state INIT
    # The wall clock two minutes ahead (NTP stepping a board): nothing of
    # the charge's age changed.
    move_clock 120000 0
    local i state=""
    for i in $(seq 20); do # ten sync passes at least (interval 1 s)
        pt_get /v1/charges/CLK-EXP-1
        state=$(jq -r .state <"$PT_BODY_FILE")
        [ "$state" = INIT ] || break
        sleep 0.1
    done
    expect_eq INIT "$state" "CLK-EXP-1 state after the wall clock moved 2 minutes"
    move_clock 120000 120000 # two minutes pass for the board: past offline.max_age_s.alipay.barcode
    for i in $(seq 50); do
        pt_get /v1/charges/CLK-EXP-1
        state=$(jq -r .state <"$PT_BODY_FILE")
        [ "$state" = FAILED ] && break
        sleep 0.2
    done
    expect_eq FAILED "$state" "CLK-EXP-1 state after 2 minutes passed"
    expect_json .error.code offline_expired
    pt_get "/v1/events?after=0&limit=100"
    expect_json '[.data[] | select(.order_id == "CLK-EXP-1" and .type == "charge.failed")] | length' 1
    # Never sent: its one try at creation (the gateway believed down, SPEC
    # 18) provably never left.
    pt_get /v1/charges/CLK-EXP-1/events
    expect_json '"\([.data[] | select(.to == "PROCESSING")] | length) \([.data[] | select(.cause == "not_sent")] | length)"' "1 1"
}

case_key_expiry()
{
    local day=$((25 * 3600 * 1000)) # a day and an hour: past idempotency.ttl_s
    local e=120000                  # what passed in the case before (time never goes back)
    move_clock 0 $e
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-1)"
    expect_status 202
    # Another request under the same key, while the key lives: 422.
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-2)"
    expect_error 422 idempotency_key_reused
    # The wall clock a day ahead: the key lives on, its answer replays.
    move_clock $day $e
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-1)"
    expect_status 202
    expect_header Idempotency-Replayed true
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-2)"
    expect_error 422 idempotency_key_reused
    # A day passes for the board: the key has expired.
    move_clock $day $((e + day))
    pt_post /v1/charges clk-key "$(charge_body CLK-KEY-2)"
    expect_status 202
    expect_json .order_id CLK-KEY-2
    # The first order's record expired too, but it is charged once, ever.
    pt_post /v1/charges clk-key-3 "$(charge_body CLK-KEY-1 '.amount = 999')"
    expect_error 409 order_id_conflict
}

# A shell's `echo ... >FILE` truncates before it writes: a daemon reading
# in between must not take the empty (or cut-short) file as "the real
# clock" - a day would vanish and come back under it.
case_clock_file_mid_write()
{
    move_clock 86400000 0
    local i wall day_ahead=$(($(date +%s) + 86400 - 5))
    for content in "" "8640"; do
        printf '%s' "$content" >"$CLOCK" # empty, then cut short: no newline
        for i in $(seq 5); do            # half a second: five re-reads
            pt_get /v1/status
            wall=$(date -d "$(jq -r .clock.wall <"$PT_BODY_FILE")" +%s)
            [ "$wall" -ge "$day_ahead" ] ||
                fail "with the clock file '$content' the daemon's wall clock went back: $(jq -c .clock <"$PT_BODY_FILE")"
            sleep 0.1
        done
    done
    move_clock 0 0
}

pt_init
CLOCK=$PT_TMP/clock
echo 0 >"$CLOCK"
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
pt_config
pt_start
pt_case "a queued barcode charge expires when its age passes offline.max_age_s, not when the wall clock moves" case_offline_expiry
pt_case "an idempotency key expires when its ttl passes, not when the wall clock moves" case_key_expiry
pt_case "a clock file read while it is being written leaves the clock as it was" case_clock_file_mid_write
pt_done
