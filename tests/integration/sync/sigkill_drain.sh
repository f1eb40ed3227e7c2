#!/usr/bin/env bash
# sigkill_drain.sh PAYTERM - the daemon is killed (SIGKILL: no cleanup at
# all) in the middle of draining its offline queue, with a request in flight
# at the gateway, then restarted: still exactly one capture per order, every
# charge final (SUCCESS) with one charge.succeeded, across the restart.
#
# The gateways answer each request 600 ms late (a delay fault below the
# client timeout), so the drain is slow and a send is in flight most of the
# time; the kill is aimed at a moment when /v1/status shows charges in
# PROCESSING.  The gateway still completes the request in flight after the
# daemon died; after the restart the daemon must find that out by query
# rather than charge again, and send the ones that never left.
#
# The simulator's notifications go nowhere here (port 1 refuses them): the
# charges in flight at the kills must be resolved by the restarted daemon
# itself - PROCESSING found at start is "interrupted", becomes UNKNOWN and is
# settled by query, never by a second send.
. "$(dirname "$0")/synclib.sh" "$@"
SIM_NOTIFY_BASE=http://127.0.0.1:1
# The drain sends in runs and owns a run's PROCESSING charges for
# (run length x request timeout + a margin); a short timeout keeps the
# restarted daemon's wait for them short.
SYNC_REQUEST_TIMEOUT_MS=1000
sync_start
N=24

sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
ORDERS=()
for i in $(seq 1 $N); do
    o=$(printf 'KILL-%03d' "$i")
    ORDERS+=("$o")
    if [ $((i % 2)) = 1 ]; then body=$(alipay_barcode $((1000 + i * 10))); else body=$(stripe_card $((500 + i * 10))); fi
    charge "k-$o" "$o" "$body"
    expect "$o queued" 202 "$ST"
done
log "$N charges queued offline"

sim_clear
sim_fault '{"gateway":"alipay","mode":"delay","count":-1,"delay_ms":600}'
sim_fault '{"gateway":"stripe","mode":"delay","count":-1,"delay_ms":600}'
api /v1/sync -X POST >/dev/null
in_flight_midway() { # in_flight_midway MIN_CAPTURED MIN_PROCESSING
    local captured
    captured=$(sim /_sim/ledger | jq '[.data[] | select(.captures > 0)] | length')
    [ "$captured" -ge "$1" ] && [ "$(api /v1/status | jq .processing)" -ge "$2" ]
}
# The charges the dead daemon left PROCESSING, read from its database while
# it is down (the ground truth of what was in flight at the kill).
processing_in_db() {
    db_query "SELECT order_id FROM charges WHERE state = 'PROCESSING' ORDER BY id" | tr '\n' ' '
}
# kill_in_flight MIN_CAPTURED: SIGKILL at a moment a send is in flight (the
# check and the kill race by a few ms against a 600 ms answer: tried again
# until the database confirms a new charge was caught in PROCESSING).
VICTIMS=""
NVICTIMS=0
kill_in_flight() {
    local try v new
    for try in 1 2 3 4 5; do
        wait_until 40 in_flight_midway "$1" 1 ||
            fail "the drain did not get going: $(api /v1/status | jq -c .)"
        daemon_kill KILL
        new=0
        for v in $(processing_in_db); do
            case " $VICTIMS " in *" $v "*) ;; *) VICTIMS="$VICTIMS $v" new=1 NVICTIMS=$((NVICTIMS + 1)) ;; esac
        done
        [ $new = 0 ] || return 0
        daemon_restart
    done
    fail "five kills in a row caught no charge in flight"
}

# Which of the charges caught in PROCESSING had actually reached the
# gateway (the drain commits PROCESSING for a run of charges, then sends
# them one by one): read from the ledger once the request in flight at the
# kill has been answered.
REACHED=""
note_reached() {
    local v
    for v in $VICTIMS; do
        [ "$(trades "$v")" = 0 ] || case " $REACHED " in *" $v "*) ;; *) REACHED="$REACHED $v" ;; esac
    done
}

kill_in_flight 4
sleep 1 # the gateway finishes the request the dead daemon sent
note_reached
log "SIGKILL with$VICTIMS in PROCESSING (at the gateway:$REACHED), $(sim /_sim/ledger | jq '[.data[] | select(.captures > 0)] | length') of $N captured"
daemon_restart
log "restarted"
# Nothing can be on its way after a restart: the victims are resolved in the
# first pass, not once their in-flight window (request timeout + 5 s and
# more, for a run) has passed.
victims_resolved() {
    local v
    for v in $VICTIMS; do [ "$(charge_json "$v" | jq -r .state)" != PROCESSING ] || return 1; done
}
wait_until 3 victims_resolved || fail "the victims of the kill still PROCESSING 3 s after the restart"
# Again soon after the restart, while the drain resumes (the daemon made the
# victims of the first kill due at its start: they are resolved first).
kill_in_flight 6
sleep 1
note_reached
log "killed again; in PROCESSING over both kills:$VICTIMS (at the gateway:$REACHED)"
daemon_restart
log "restarted"
sim_clear

all_final() { [ "$(api "/v1/charges?state=SUCCESS&limit=100" | jq '.data | length')" = $N ]; }
wait_until 90 all_final ||
    fail "not every charge is SUCCESS 90 s after the restart: $(api /v1/status | jq -c .); $(api '/v1/charges?limit=100' | jq -c '[.data[] | select(.state != "SUCCESS") | {order_id, state, review_reason}]')"
log "every charge SUCCESS"
expect_all_captured_once "${ORDERS[@]}"
ev=$(all_events)
expect "events in the feed" $N "$(jq length <<<"$ev")"
expect "review flags" 0 "$(api /v1/status | jq .review)"
# Every charge caught in PROCESSING was recovered as "interrupted" and
# resolved by query first: the ones the gateway had were found there and
# never sent again; the others (committed PROCESSING, killed before their
# turn) were resent with the same key - and still captured once, above.
[ -n "$REACHED" ] || fail "no charge in flight at a kill had reached the gateway (PROCESSING:$VICTIMS)"
for v in $VICTIMS; do
    causes=$(api "/v1/charges/$v/events" | jq -c '[.data[].cause]')
    jq -e 'index("interrupted_send")' <<<"$causes" >/dev/null ||
        fail "$v: no interrupted_send in its audit trail: $causes"
    resends=$(jq '[.[] | select(. == "resend")] | length' <<<"$causes")
    case " $REACHED " in
    *" $v "*) expect "$v (at the gateway before the kill): resends ($causes)" 0 "$resends" ;;
    *) expect "$v (not sent before the kill): resends ($causes)" 1 "$resends" ;;
    esac
    log "$v: $causes"
done
pass
