#!/usr/bin/env bash
# reconcile_walk.sh PAYTERM - the daily reconciliation walks back to the days
# it missed (SPEC 19), through the real daemon and simulator.  The lane takes
# Stripe payments one day and only a declined one the next, with its daily
# runs off; on its return days later, the walk runs both missed days - a day
# of failed charges only too: retention waits for its run - and not the day
# it holds nothing of.  While Stripe cannot be reached the walk gives no day
# up: it waits and tries again, and finishes once Stripe answers.
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
YESTERDAY=$(date -u -d "$DAY + 3 days" +%F)

echo '{"reconcile": {"daily": false}}' >"$T/extra.json"
sync_start "$T/extra.json"
paid() { # paid ORDER AMOUNT
    charge "k-$1" "$1" "$(stripe_card "$2")"
    wait_state "$1" SUCCESS 30
}
paid WALK-A 1000
paid WALK-B 2500
set_clock "86400000 boot=86400000 boot_id=boot-1 synced=1" # the next day
sleep 0.5
charge k-WALK-X WALK-X "$(stripe_card 1051)" # declined
wait_state WALK-X FAILED 30

# Off, and back three days later with the daily runs on - Stripe down first.
daemon_kill TERM
set_clock "$((4 * 86400000)) boot_id=boot-2 synced=1"
echo '{"reconcile": {"daily": true, "after": "00:00"}}' >"$T/extra.json"
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
daemon_restart
logged() { cat "$T"/payterm*.log | grep -c "$1" || true; }
away() { [ "$(logged "reconciliation stripe $DAY: a day the daily run missed; the gateway could not be asked")" -ge 1 ]; }
wait_until 30 away || fail "the walk did not meet Stripe down: $(grep reconciliation "$T"/payterm*.log)"
sleep 1
expect "Stripe down: no day given up" 0 "$(logged "reconciliation stripe $NEXT: a day the daily run missed")"
expect "Stripe down: the walk is not over" 0 "$(logged "reconciliation stripe: the walk back found")"

# Stripe answers again (a restart: the walk's 15 minutes are not waited out).
sim_clear
daemon_kill TERM
daemon_restart
walked() { [ "$(logged "reconciliation stripe: the walk back found no missed day before $YESTERDAY")" -ge "$1" ]; }
wait_until 30 walked 1 || fail "the walk did not end: $(grep reconciliation "$T"/payterm*.log)"
status_of_run() { curl -s -o /dev/null -w '%{http_code}' "$API/v1/reconciliations/$1/$2"; }
expect "yesterday: the daily run" 200 "$(status_of_run stripe "$YESTERDAY")"
expect "the missed day of payments: done, both matched" "done 2 []" \
    "$(api "/v1/reconciliations/stripe/$DAY" | jq -r '"\(.state) \(.matched) \(.discrepancies | tostring)"')"
expect "its run began after the day ended" 1 \
    "$(api "/v1/reconciliations/stripe/$DAY" | jq -r --arg d "$DAY" 'if .run_at[0:10] > $d then 1 else 0 end')"
expect "the missed day of a declined charge only: run, done" "done 0" \
    "$(api "/v1/reconciliations/stripe/$NEXT" | jq -r '"\(.state) \(.matched)"')"
expect "the day it holds nothing of: not run" 404 "$(status_of_run stripe "$THIRD")"
expect "each missed day logged done" 2 \
    "$(cat "$T"/payterm*.log | grep -c "reconciliation stripe 20[0-9-]*: a day the daily run missed, done" || true)"

# Walked: a restart the same day runs no day again.
runs() { db_query "SELECT count(*) FROM reconciliations WHERE gateway = 'stripe' AND bill_date IN ('$DAY', '$NEXT')"; }
RUNS=$(runs)
daemon_kill TERM
daemon_restart
wait_until 30 walked 2 || fail "the walk after the restart did not end: $(grep reconciliation "$T"/payterm*.log)"
expect "a done day is not run again" "$RUNS" "$(runs)"
pass
