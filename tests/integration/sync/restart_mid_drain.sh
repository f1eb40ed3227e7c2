#!/usr/bin/env bash
# restart_mid_drain.sh PAYTERM - a restart (SIGKILL, a power cut) between the
# drain's claim of a queued Alipay barcode charge and its send (issue: the
# drain used to mark a whole run PROCESSING in one commit; after a restart
# every charge of the run not yet sent became UNKNOWN, its queries answered
# ACQ.TRADE_NOT_EXIST, each counted as an attempt, and it ended under review
# with max_attempts although the trade provably did not exist).
#
# Six barcode charges are queued while the link is down.  When it returns,
# the first send is held 6 s at the gateway (a delay fault); the daemon is
# SIGKILLed while that request is in flight, and restarted only after
# barcode_timeout_s (5 s) has passed.  Asserted:
#   * at the kill, exactly one charge is PROCESSING in the database - the one
#     on its way; the others are still INIT;
#   * after the restart every order ends final, none under review: the one
#     that was in flight SUCCESS by query (captured once, never sent again),
#     the five others sent normally and captured once each;
#   * no charge counted a definite "no such trade" answer as an attempt.
. "$(dirname "$0")/synclib.sh" "$@"
SIM_NOTIFY_BASE=http://127.0.0.1:1 # settled by the daemon's own queries
SYNC_REQUEST_TIMEOUT_MS=10000      # the held request is not given up on
cat >"$T/extra.json" <<'JSON'
{"gateways": {"alipay": {"barcode_timeout_s": 5}}}
JSON
sync_start "$T/extra.json"

sim_fault '{"gateway":"alipay","mode":"refuse_connect","count":-1}'
ORDERS=()
for i in 1 2 3 4 5 6; do
    o=RMD-$i
    ORDERS+=("$o")
    charge "k-$o" "$o" "$(alipay_barcode $((1000 + i * 10)))"
    expect "$o queued" 202 "$ST"
    expect "$o state" INIT "$(field .state)"
done
log "6 barcode charges queued offline"

sim_clear
# Only a POST (a pay) is held: the reachability probes are GETs.
sim_fault '{"gateway":"alipay","mode":"delay","count":1,"delay_ms":6000,"method":"POST"}'
api /v1/sync -X POST >/dev/null
one_processing() { [ "$(api /v1/status | jq .processing)" -ge 1 ]; }
wait_until 20 one_processing || fail "no charge became PROCESSING after the link came back"
# The simulator takes the delay fault when it reads the request, then holds
# the answer and the commit: once the fault is gone from its list, the
# request is at the gateway, held.
delay_taken() { [ "$(sim /_sim/faults | jq '[.faults[] | select(.mode == "delay")] | length')" = 0 ]; }
wait_until 20 delay_taken || fail "the pay request never reached the simulator: $(sim /_sim/faults)"
daemon_kill KILL
sim_clear
claimed=$(db_query "SELECT order_id FROM charges WHERE state = 'PROCESSING'" | tr '\n' ' ')
queued=$(db_query "SELECT count(*) FROM charges WHERE state = 'INIT'")
done_before=$(db_query "SELECT count(*) FROM charges WHERE state = 'SUCCESS'")
log "killed with PROCESSING: $claimed; still queued: $queued; captured before: $done_before"
expect "charges PROCESSING at the kill (only the one being sent)" 1 "$(wc -w <<<"$claimed")"
# The others wait, INIT - or were sent before the held one, when a pass
# came between clearing the outage and holding the next pay (then the
# next charge is the one held).
expect "charges still queued or captured at the kill" 5 "$((queued + done_before))"

# The held request commits its trade delay_ms (6 s) after the simulator
# read it, so once the trade is in the ledger the request has completed
# and barcode_timeout_s (5 s) has passed since the claim before it.
held_trade_done() { [ "$(trades "${claimed%% *}")" -ge 1 ]; }
wait_until 20 held_trade_done || fail "the held request did not complete: $(ledger "${claimed%% *}")"
daemon_restart
for o in "${ORDERS[@]}"; do wait_final "$o" 40; done
wait_until 10 queue_idle || true
for o in "${ORDERS[@]}"; do
    expect_captured_once "$o"
    expect "$o trades at the simulator" 1 "$(trades "$o")"
done
expect "attempts counted for the charge in flight (one interrupted send)" 1 \
    "$(charge_json "${claimed%% *}" | jq .attempts)"
pass
