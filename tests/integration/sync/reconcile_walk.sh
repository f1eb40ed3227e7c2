#!/usr/bin/env bash
# reconcile_walk.sh PAYTERM - the daily reconciliation walks back to a day
# it missed (SPEC 19), through the real daemon and simulator: the lane takes
# Stripe payments, is off for two days, and on its return runs yesterday's
# bill as every day, then the day it missed - the one it holds records of -
# and not the day between, of which it holds none.
. "$(dirname "$0")/synclib.sh" "$@"

CLOCK=$T/clock
set_clock() { echo "$*" >"$CLOCK"; }
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
set_clock "0 boot_id=boot-1 synced=1"

# Stripe's bill day is UTC: payments a minute before its midnight would be
# the next day's.
while [ "$(date -u +%H%M)" -ge 2358 ]; do sleep 5; done
DAY=$(date -u +%F)
NEXT=$(date -u -d "$DAY + 1 day" +%F) THIRD=$(date -u -d "$DAY + 2 days" +%F)

echo '{"reconcile": {"daily": true, "after": "00:00"}}' >"$T/extra.json"
sync_start "$T/extra.json"
paid() { # paid ORDER AMOUNT
    charge "k-$1" "$1" "$(stripe_card "$2")"
    wait_state "$1" SUCCESS 30
}
paid WALK-A 1000
paid WALK-B 2500
status_of_run() { curl -s -o /dev/null -w '%{http_code}' "$API/v1/reconciliations/$1/$2"; }
expect "no run of today yet" 404 "$(status_of_run stripe "$DAY")"

# Off for two days: back on the third.
daemon_kill TERM
set_clock "$((3 * 86400000)) boot_id=boot-2 synced=1"
daemon_restart
ran() { [ "$(status_of_run "$1" "$2")" = 200 ]; }
wait_until 30 ran stripe "$THIRD" || fail "no daily run of yesterday ($THIRD)"
wait_until 30 ran stripe "$DAY" || fail "the missed day $DAY was not walked back to: $(grep reconciliation "$T"/payterm*.log)"
expect "the missed day: done, both payments matched" "done 2 []" \
    "$(api "/v1/reconciliations/stripe/$DAY" | jq -r '"\(.state) \(.matched) \(.discrepancies | tostring)"')"
expect "the missed day's run began after it ended" 1 \
    "$(api "/v1/reconciliations/stripe/$DAY" | jq -r --arg d "$DAY" 'if .run_at[0:10] > $d then 1 else 0 end')"
expect "the day between (no records): not run" 404 "$(status_of_run stripe "$NEXT")"
grep -q "reconciliation stripe $DAY: a day the daily run missed, done" "$T"/payterm*.log ||
    fail "the walk is not logged: $(grep reconciliation "$T"/payterm*.log)"

# Walked once: a restart the same day does not run it again.
RUNS=$(db_query "SELECT count(*) FROM reconciliations WHERE gateway = 'stripe' AND bill_date = '$DAY'")
daemon_kill TERM
daemon_restart
sleep 2
expect "a done day is not run again" "$RUNS" \
    "$(db_query "SELECT count(*) FROM reconciliations WHERE gateway = 'stripe' AND bill_date = '$DAY'")"
pass
