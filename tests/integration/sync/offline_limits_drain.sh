#!/usr/bin/env bash
# offline_limits_drain.sh PAYTERM - the offline limits count everything
# accepted offline and not final (SPEC 18): the charges a drain has marked
# PROCESSING and those whose answer was lost (UNKNOWN) hold their place in
# offline.max_total and offline.max_count until they are final.  (Before,
# only INIT counted: a drain's marked charges were invisible, so max_total
# 5000 let 9000 in and max_count 3 let 4.)  A charge sent online while the
# customer waits never counts.
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/extra.json" <<'JSON'
{"offline": {"max_count": 3,
             "limits": {"USD": {"max_amount": 5000, "max_total": 5000}}}}
JSON
# No notifications: a charge whose answer was lost stays UNKNOWN until a
# query can be sent.
SIM_NOTIFY_BASE=http://127.0.0.1:1
SYNC_REQUEST_TIMEOUT_MS=6000 sync_start "$T/extra.json"
queued() { charge "$1" "$2" "$(stripe_card "$3"),\"offline\":\"force_offline\""; }
marked() { [ "$(state "$1")" = PROCESSING ]; }
figure() { api /v1/status | jq "$1"; }

# run_out ORDER...: the first is sent at once and its answer held 2.5 s
# (PROCESSING), the others queue behind it (INIT).
run_out() {
    local o
    sim_fault '{"gateway":"stripe","mode":"delay","count":-1,"delay_ms":2500}'
    for o in "$@"; do
        queued "k-$o" "$o" "${AMOUNT:?}"
        expect "$o queued" 202 "$ST"
        [ "$o" != "$1" ] || wait_until 10 marked "$o" || fail "$o was not sent: $(state "$o")"
    done
    expect "$1 still on its way" PROCESSING "$(state "$1")"
}

# ---- max_total while a run is out -------------------------------------------------------
AMOUNT=2000 run_out OLD-A OLD-B
queued k-c OLD-C 2000
expect "a third 2000 USD while one is on its way and one queued (max_total 5000)" \
    "503 offline_limit_exceeded" "$ST $(field .error.code)"
case $(field .error.message) in *"max_total"*) ;; *) fail "the 503 should name max_total: $(field .error.message)" ;; esac
queued k-c2 OLD-C2 1000
expect "1000 USD still fits" 202 "$ST"
for o in OLD-A OLD-B OLD-C2; do wait_final "$o" 30; done
sim_clear
expect_all_captured_once OLD-A OLD-B OLD-C2
queued k-c3 OLD-C3 2000
expect "2000 USD once they are final" 202 "$ST"
wait_final OLD-C3 30

# ---- max_count while a run is out ----------------------------------------------------------
AMOUNT=500 run_out OLD-N1 OLD-N2 OLD-N3
queued k-n4 OLD-N4 500
expect "a fourth while one is on its way and two queued (max_count 3)" \
    "503 offline_limit_exceeded" "$ST $(field .error.code)"
for i in 1 2 3; do wait_final "OLD-N$i" 30; done
sim_clear

# ---- an answer lost: UNKNOWN still counts ----------------------------------------------------
sim_fault '{"gateway":"stripe","mode":"drop_after_commit","count":1}'
queued k-u OLD-U 1000
unknown() { [ "$(state OLD-U)" = UNKNOWN ]; }
wait_until 15 unknown || fail "OLD-U did not become UNKNOWN: $(state OLD-U)"
sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}' # its query cannot settle it
queued k-v OLD-V 1000
expect "OLD-V queued" 202 "$ST"
queued k-w OLD-W 1000
expect "OLD-W queued" 202 "$ST"
queued k-x OLD-X 1000
expect "a fourth with one UNKNOWN and two queued (max_count 3)" \
    "503 offline_limit_exceeded" "$ST $(field .error.code)"
expect "OLD-U still UNKNOWN" UNKNOWN "$(state OLD-U)"

# ---- online charges never count -----------------------------------------------------------------
sim_clear
for o in OLD-U OLD-V OLD-W; do wait_final "$o" 30; done
expect_all_captured_once OLD-U OLD-V OLD-W
# One charge sent online while the customer waits, its answer held; three
# queued meanwhile fill max_count 3 by themselves.
sim_fault '{"gateway":"stripe","mode":"delay","count":1,"delay_ms":2500}'
CHARGE_OUT=$T/online charge k-on OLD-ON "$(stripe_card 1000)" &
online_pid=$!
online_out() { [ "$(state OLD-ON)" = PROCESSING ]; }
wait_until 10 online_out || fail "OLD-ON was not on its way: $(state OLD-ON)"
for i in 1 2 3; do
    queued "k-q$i" "OLD-Q$i" 1000
    expect "OLD-Q$i queued while an online charge is out" 202 "$ST"
done
queued k-q4 OLD-Q4 1000
expect "a fourth queued (max_count 3, the online one not counted)" \
    "503 offline_limit_exceeded" "$ST $(field .error.code)"
wait "$online_pid"
for o in OLD-ON OLD-Q1 OLD-Q2 OLD-Q3; do wait_final "$o" 30; done
expect_all_captured_once OLD-ON OLD-Q1 OLD-Q2 OLD-Q3
pass
