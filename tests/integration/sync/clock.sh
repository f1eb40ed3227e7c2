#!/usr/bin/env bash
# clock.sh PAYTERM - a board's clock is not to be trusted (SPEC 17).
#
# The daemon runs on the simulator's fake clocks (PAYTERM_TEST_CLOCK_FILE,
# platform/sim/clock.c): the wall clock and the boot-time clock move
# separately, a new boot id is a reboot, and "synced=0" is a kernel that
# never heard of NTP.  The simulator keeps the real time, as a gateway does.
#
#   1970: a board boots at 1970 with the network down and takes charges;
#         NTP steps the clock to today and the network returns: every
#         charge is sent and captured once, none expired, and their times
#         are today's, not 1970's.  Nothing was sent, and no Stripe
#         webhook verified, while the clock was not trusted.
#   behind: the same lane reboots at a saved time 2 days behind and takes
#         charges; NTP steps it: the same.
#   steps: while running and trusted, the wall clock steps 2 days back and
#         forward: replays still replay, nothing expires early or late, and
#         each step is audited once.
#   old:  a charge that really is older than max_age_s (elapsed time, the
#         boot-time clock) still expires, never sent.
. "$(dirname "$0")/synclib.sh" "$@"

CLOCK=$T/clock
DAY_MS=$((24 * 3600 * 1000))
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# set_clock WORDS: the fake clocks' file (see platform/sim/clock.c).
set_clock() { echo "$*" >"$CLOCK"; }
# wait_trust true|false: /v1/status says so (the file is re-read every 100 ms).
trust_is() { [ "$(api /v1/status | jq .clock.trusted)" = "$1" ]; }
wait_trust() {
    wait_until 10 trust_is "$1" || fail "clock.trusted is not $1: $(api /v1/status | jq -c .clock)"
}
steps_audited() { [ "$(db_query "SELECT count(*) FROM clock_events WHERE kind = 'step'")" -ge "$1" ]; }
year_of() { charge_json "$1" | jq -r '.created_at[0:4]'; }

cat >"$T/extra.json" <<'JSON'
{"offline": {"max_age_s": {"alipay.barcode": 60, "wechat.barcode": 60}}}
JSON
export PAYTERM_TEST_CLOCK_FILE=$CLOCK

# ---- 1970 ---------------------------------------------------------------------------------
set_clock "-$(now_ms) boot_id=boot-1 synced=0"
sync_start "$T/extra.json"
expect "clock trusted at 1970" false "$(api /v1/status | jq .clock.trusted)"
expect "times provisional at 1970" true "$(api /v1/status | jq .clock.provisional)"
expect "healthz while the clock is not trusted" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$API/healthz")"
expect "metric payterm_clock_trusted" 0 "$(metric payterm_clock_trusted)"

orders=()
for i in 1 2 3 4; do
    charge "k70-a$i" "C70-ALI-$i" "$(alipay_barcode $((1000 + i)))"
    expect "C70-ALI-$i queued" "202 INIT" "$ST $(field .state)"
    charge "k70-w$i" "C70-WX-$i-xx" "$(wechat_barcode $((2000 + i)))"
    expect "C70-WX-$i queued" "202 INIT" "$ST $(field .state)"
    charge "k70-s$i" "C70-STR-$i" "$(stripe_card $((3000 + i)))"
    expect "C70-STR-$i queued" "202 INIT" "$ST $(field .state)"
    orders+=("C70-ALI-$i" "C70-WX-$i-xx" "C70-STR-$i")
done
# A charge that may not wait is refused, not sent with a 1970 timestamp.
charge k70-qr C70-QR "$(alipay_qr 1234)"
expect "a QR charge while the clock is not trusted" 503 "$ST"
expect "its error" offline_not_allowed "$(field .error.code)"
# A Stripe webhook cannot be verified (its signature carries the time):
# 503, recorded nowhere, so Stripe delivers it again.
payload='{"id":"evt_clock_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_x","metadata":{"order_id":"C70-STR-1"},"amount":3001,"currency":"usd","status":"succeeded"}}}'
wst=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$API/webhooks/stripe" \
    -H 'Content-Type: application/json' -H "Stripe-Signature: t=$(date +%s),v1=00" -d "$payload")
expect "a Stripe webhook while the clock is not trusted" 503 "$wst"
expect "notifications recorded meanwhile" 0 "$(db_query 'SELECT count(*) FROM notifications')"
sleep 2 # sync passes go by (interval 1 s): nothing may leave
expect "trades at the simulator before the clock is trusted" 0 "$(sim /_sim/ledger | jq '.data | length')"
provisional_at=$(charge_json C70-ALI-1 | jq -r .created_at)

log "NTP steps the wall clock to today"
set_clock "0 boot_id=boot-1 synced=0"
wait_trust true
for o in "${orders[@]}"; do wait_final "$o" 30; done
for o in "${orders[@]}"; do
    expect "$o state after the step" SUCCESS "$(state "$o")"
    expect_captured_once "$o"
    expect "$o created_at corrected to today" "$(date -u +%Y)" "$(year_of "$o")"
done
expect "times provisional after the step" false "$(api /v1/status | jq .clock.provisional)"
expect "offline_expired charges" 0 "$(db_query "SELECT count(*) FROM charges WHERE error_code = 'offline_expired'")"
expect "the step in the clock's audit" 1 "$(db_query "SELECT count(*) FROM clock_events WHERE kind = 'step'")"
expect "the correction in the clock's audit" 1 "$(db_query "SELECT count(*) FROM clock_events WHERE kind = 'corrected'")"
grep -q 'the wall clock was stepped by +' "$T/payterm.$DAEMON_RUNS.log" || fail "the step was not logged"
# A created_at within the last ten minutes of the real clock, and moved
# forward from the provisional one (the build's date, as the board knew no
# better).
corrected_at=$(charge_json C70-ALI-1 | jq -r .created_at)
age=$(($(date +%s) - $(date -d "$corrected_at" +%s)))
[ "$age" -ge 0 ] && [ "$age" -lt 600 ] || fail "C70-ALI-1 created_at is $age s from now after the correction"
[ "$(date -d "$corrected_at" +%s)" -ge "$(date -d "$provisional_at" +%s)" ] ||
    fail "C70-ALI-1 created_at went from $provisional_at to $corrected_at"

# ---- 2 days behind, after a reboot -----------------------------------------------------------
daemon_kill TERM
set_clock "-$((2 * DAY_MS)) boot_id=boot-2 synced=0"
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
daemon_restart
expect "clock trusted 2 days behind" false "$(api /v1/status | jq .clock.trusted)"
behind=()
for i in 1 2 3; do
    charge "kbh-a$i" "CBH-ALI-$i" "$(alipay_barcode $((4000 + i)))"
    expect "CBH-ALI-$i queued" "202 INIT" "$ST $(field .state)"
    charge "kbh-s$i" "CBH-STR-$i" "$(stripe_card $((5000 + i)))"
    expect "CBH-STR-$i queued" "202 INIT" "$ST $(field .state)"
    behind+=("CBH-ALI-$i" "CBH-STR-$i")
done
set_clock "0 boot_id=boot-2 synced=1"
wait_trust true
sim_clear
for o in "${behind[@]}"; do
    wait_final "$o" 30
    expect "$o state after the step" SUCCESS "$(state "$o")"
    expect_captured_once "$o"
done

# ---- steps while running -----------------------------------------------------------------------
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
charge kst-1 CST-ALI-1 "$(alipay_barcode 6001)"
expect "CST-ALI-1 queued" "202 INIT" "$ST $(field .state)"
cp "$BODY" "$T/cst1.json"
steps=$(db_query "SELECT count(*) FROM clock_events WHERE kind = 'step'")
# step WALL_MS: the wall clock there; each step is audited once (the daemon
# looks between its sync passes, every second while the network is down).
step() {
    set_clock "$1 boot_id=boot-2 synced=$2"
    steps=$((steps + 1))
    wait_until 10 steps_audited "$steps" ||
        fail "step $steps was not audited: $(db_query 'SELECT kind, size_ms FROM clock_events')"
}
step "-$((2 * DAY_MS))" 0
wait_trust false
charge kst-1 CST-ALI-1 "$(alipay_barcode 6001)"
expect "replay 2 days back" "202 1" "$ST $REPLAYED"
expect "replay body 2 days back" "$(jq -cS . "$T/cst1.json")" "$(jq -cS . "$BODY")"
step "$((2 * DAY_MS))" 1
wait_trust true
charge kst-1 CST-ALI-1 "$(alipay_barcode 6001)"
expect "replay 2 days ahead" "202 1" "$ST $REPLAYED"
expect "CST-ALI-1 after 4 days of steps" INIT "$(state CST-ALI-1)"
step 0 1
expect "the sizes of the three steps, in seconds" "-172800 345600 -172800" \
    "$(db_query "SELECT CAST(round(size_ms / 1000.0) AS INTEGER) FROM clock_events
                 WHERE kind = 'step' ORDER BY id DESC LIMIT 3" | tac | paste -sd' ')"
sim_clear
wait_final CST-ALI-1 30
expect "CST-ALI-1 after the steps" SUCCESS "$(state CST-ALI-1)"
expect_captured_once CST-ALI-1

# ---- a charge that really is old -------------------------------------------------------------------
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
charge kold-1 COLD-ALI-1 "$(alipay_barcode 7001)"
expect "COLD-ALI-1 queued" "202 INIT" "$ST $(field .state)"
set_clock "0 boot=120000 boot_id=boot-2 synced=1" # two minutes pass for the board
wait_state COLD-ALI-1 FAILED 15
expect "COLD-ALI-1 error" offline_expired "$(charge_json COLD-ALI-1 | jq -r .error.code)"
sim_clear
sleep 2
expect "COLD-ALI-1 trades at the simulator" 0 "$(trades COLD-ALI-1)"
pass
