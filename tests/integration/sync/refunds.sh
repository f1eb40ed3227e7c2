#!/usr/bin/env bash
# refunds.sh PAYTERM MODE - refunds (SPEC 5a) through the real daemon and
# simulator over TLS, asserting what the merchant cares about: the
# simulator executed each refund id exactly once ("refunds" and "refunded"
# in its ledger), the local refund is final with the right state, the
# charge's amount_refunded agrees, and the feed has one refund event each.
#
# MODE:
#   basic    two partial refunds and one too many on Alipay, WeChat (PROCESSING,
#            then SUCCESS by notification or query) and Stripe; a replay; the
#            refund_id rules; 2C2P refused; 16 parallel refunds under
#            different keys on one charge; a refund queued while the network
#            is cut and drained when it returns
#   refuse_connect | fail_before_commit | drop_after_commit |
#   http_500_after_commit | delay
#            that fault armed for the refund call on each gateway
#   sigkill  refunds queued offline, the daemon SIGKILLed mid-drain with
#            refunds in flight, restarted
. "$(dirname "$0")/synclib.sh" "$@"
MODE=${2:?usage: $0 PAYTERM MODE}

case $MODE in
delay)
    SYNC_REQUEST_TIMEOUT_MS=1000
    DELAY_MS=1400
    echo '{"sync": {"backoff_base_ms": 1500, "backoff_max_ms": 3000, "max_attempts": 10}}' >"$T/extra.json"
    ;;
sigkill)
    SIM_NOTIFY_BASE=http://127.0.0.1:1
    SYNC_REQUEST_TIMEOUT_MS=1000
    echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json"
    ;;
*) echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json" ;;
esac
sync_start "$T/extra.json"

# refund KEY ORDER FIELDS -> ST, BODY, REPLAYED
refund() {
    local out=${REFUND_OUT:-$T/last}
    BODY="$out.json"
    ST=$(curl -sS --max-time 30 -D "$out.h" -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/charges/$2/refunds" -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $1" -d "{$3}")
    REPLAYED=0
    if grep -qi '^Idempotency-Replayed: *true' "$out.h"; then REPLAYED=1; fi
}
refund_state() { api "/v1/refunds/$1" | jq -r '.state // .error.code'; }
refund_in() { [ "$(refund_state "$1")" = "$2" ]; }
wait_refund() { # wait_refund REFUND_ID STATE [SECONDS]
    wait_until "${3:-30}" refund_in "$1" "$2" ||
        fail "refund $1: expected $2 within ${3:-30} s, it is $(api "/v1/refunds/$1" | jq -c '{state,attempts,review,review_reason,error}')"
}
sim_refunded() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunded] | add // 0'; }
sim_refunds() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunds] | add // 0'; }
refund_events() { # refund_events REFUND_ID TYPE -> count
    all_events | jq --arg r "$1" --arg t "$2" '[.[] | select(.type == $t and .refund.refund_id == $r)] | length'
}

n=0
# paid GATEWAY.METHOD AMOUNT -> O, a SUCCESS charge
paid() {
    n=$((n + 1))
    O=$(printf 'RF-%s-%s-%02d' "${MODE:0:6}" "${1:0:3}" "$n")
    charge "k-$O" "$O" "$(body_for "$1" "$2")"
    case $ST in 201 | 202) ;; *) fail "$O: charge answered $ST: $(field -c .)" ;; esac
    wait_state "$O" SUCCESS 30
}

# expect_refunded ORDER TOTAL COUNT: the simulator and payterm agree.
expect_refunded() {
    expect "$1: refunded at the simulator" "$2" "$(sim_refunded "$1")"
    expect "$1: refunds executed at the simulator" "$3" "$(sim_refunds "$1")"
    expect "$1: amount_refunded" "$2" "$(charge_json "$1" | jq .amount_refunded)"
}

GATEWAYS="alipay.barcode wechat.qr stripe.card_on_file"

case_basic() { # case_basic GATEWAY.METHOD
    local gm=$1 gw=${1%%.*} o r1 r2 want
    paid "$gm" 1000
    o=$O
    r1=R-$o-1 r2=R-$o-2
    want=SUCCESS
    [ "$gw" != wechat ] || want=PENDING # WeChat answers PROCESSING first
    refund "kr1-$o" "$o" "\"refund_id\":\"$r1\",\"amount\":300,\"reason\":\"returned item\""
    cp "$BODY" "$T/first.json"
    local first_st=$ST
    expect "$gm $r1: state" "$want" "$(field .state)"
    [ "$want" = PENDING ] && expect "$gm $r1: status" 202 "$ST" || expect "$gm $r1: status" 201 "$ST"
    refund "kr1-$o" "$o" "\"refund_id\":\"$r1\",\"amount\":300,\"reason\":\"returned item\""
    expect "$gm $r1: replay status" "$first_st" "$ST"
    expect "$gm $r1: replayed" 1 "$REPLAYED"
    expect "$gm $r1: replay body" "$(jq -cS . "$T/first.json")" "$(jq -cS . "$BODY")"
    refund "kr1b-$o" "$o" "\"refund_id\":\"$r1\",\"amount\":300,\"reason\":\"returned item\""
    expect "$gm $r1 under another key" 200 "$ST"
    refund "kr1c-$o" "$o" "\"refund_id\":\"$r1\",\"amount\":301"
    expect "$gm $r1 other parameters" 409 "$ST"
    expect "$gm $r1 other parameters: code" refund_id_conflict "$(field .error.code)"
    refund "kr2-$o" "$o" "\"refund_id\":\"$r2\",\"amount\":500"
    case $ST in 201 | 202) ;; *) fail "$gm $r2: $ST $(field -c .)" ;; esac
    refund "kr3-$o" "$o" "\"refund_id\":\"R-$o-3\",\"amount\":201"
    expect "$gm: a third above what is left" 409 "$ST"
    expect "$gm: its code" refund_exceeds_charge "$(field .error.code)"
    expect_match "$gm: the message says what is left" '200 [A-Z]{3} left' "$(field .error.message)"
    wait_refund "$r1" SUCCESS 30
    wait_refund "$r2" SUCCESS 30
    expect_refunded "$o" 800 2
    expect "$o: refunds on the charge" 2 "$(charge_json "$o" | jq .refunds)"
    expect "$o: refund list" "$r1,$r2" "$(api "/v1/charges/$o/refunds" | jq -r '[.data[].refund_id] | join(",")')"
    expect "$r1 refund.succeeded events" 1 "$(refund_events "$r1" refund.succeeded)"
    expect "$r2 refund.succeeded events" 1 "$(refund_events "$r2" refund.succeeded)"
    log "$gm $o: 300 + 500 refunded once each, 201 more refused"
}

expect_match() { [[ $3 =~ $2 ]] || fail "$1: '$3' does not match /$2/"; }

case_concurrent() {
    paid stripe.card_on_file 1000
    local o=$O i pids=()
    for i in $(seq 1 16); do
        (REFUND_OUT=$T/par.$i refund "kp-$i-$o" "$o" "\"refund_id\":\"P-$i-$o\",\"amount\":300" && echo "$ST" >"$T/par.$i.st") &
        pids+=($!)
    done
    wait "${pids[@]}" # (not a bare wait: the daemon and the simulator are children too)
    local ok=0 no=0
    for i in $(seq 1 16); do
        case $(cat "$T/par.$i.st") in 201) ok=$((ok + 1)) ;; 409) no=$((no + 1)) ;; *) fail "parallel refund $i: $(cat "$T/par.$i.st") $(cat "$T/par.$i.json")" ;; esac
    done
    expect "16 parallel refunds of 300 on 1000: accepted" 3 "$ok"
    expect "16 parallel refunds of 300 on 1000: refused" 13 "$no"
    expect_refunded "$o" 900 3
    log "stripe $o: 16 parallel refunds, 3 accepted (900), 13 refused, the simulator agrees"
}

case_offline_queue() {
    paid stripe.card_on_file 700
    local o=$O
    sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
    refund "kq-$o" "$o" "\"refund_id\":\"Q-$o\",\"amount\":700"
    expect "$o: refund while the network is cut" 202 "$ST"
    expect "$o: queued" INIT "$(field .state)"
    expect "$o: /v1/status refunds.queued" 1 "$(api /v1/status | jq .refunds.queued)"
    expect "$o: nothing at the simulator yet" 0 "$(sim_refunds "$o")"
    sim_clear
    wait_refund "Q-$o" SUCCESS 30
    expect_refunded "$o" 700 1
    log "stripe $o: refund queued offline, drained once the link returned"
}

case_2c2p() {
    paid 2c2p.redirect 5000
    refund "k2-$O" "$O" "\"refund_id\":\"R-$O\""
    expect "2c2p refund" 409 "$ST"
    expect "2c2p refund code" charge_not_refundable "$(field .error.code)"
    expect "2c2p: nothing recorded" not_found "$(refund_state "R-$O")"
}

case_fault() { # case_fault GATEWAY.METHOD
    local gm=$1 gw=${1%%.*} o r first first_st
    paid "$gm" 1000
    o=$O
    r=F-$o
    case $MODE in
    refuse_connect) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"refuse_connect\",\"count\":-1}" ;;
    delay) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"delay\",\"count\":1,\"delay_ms\":$DELAY_MS}" ;;
    *) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"$MODE\",\"count\":1}" ;;
    esac
    refund "kf-$o" "$o" "\"refund_id\":\"$r\",\"amount\":400"
    first_st=$ST
    first=$(field .state)
    cp "$BODY" "$T/first.json"
    case $MODE in
    refuse_connect)
        expect "$gm $r: first answer" "202 INIT" "$first_st $first"
        expect "$gm $r: nothing at the simulator while offline" 0 "$(sim_refunds "$o")"
        sim_clear
        ;;
    *)
        case $first_st:$first in
        202:UNKNOWN | 202:PENDING | 201:SUCCESS) ;;
        *) fail "$gm $r: first answer $first_st $first ($(field -c .))" ;;
        esac
        ;;
    esac
    refund "kf-$o" "$o" "\"refund_id\":\"$r\",\"amount\":400"
    expect "$gm $r: retry replayed" "1 $first_st" "$REPLAYED $ST"
    wait_refund "$r" SUCCESS 40
    sleep 1 # a late original request lands at the simulator too
    expect_refunded "$o" 400 1
    expect "$r refund.succeeded events" 1 "$(refund_events "$r" refund.succeeded)"
    local causes
    causes=$(api "/v1/charges/$o/events" | jq -c '[.data[] | select(.refund_id == "'"$r"'") | .cause]')
    # A refund the gateway never recorded is sent again with the same
    # refund_id; one it recorded is found by query and never sent again.
    local resends
    resends=$(jq '[.[] | select(. == "resend")] | length' <<<"$causes")
    case $MODE in
    fail_before_commit) expect "$gm $r: resends after the lost request ($causes)" 1 "$resends" ;;
    drop_after_commit | http_500_after_commit) expect "$gm $r: resends after a refund the gateway recorded ($causes)" 0 "$resends" ;;
    esac
    log "$gm $r: $MODE -> first $first_st $first, then SUCCESS, executed once ($causes)"
}

case_sigkill() {
    local N=12 i o orders=()
    for i in $(seq 1 $N); do
        if [ $((i % 2)) = 1 ]; then paid alipay.barcode $((1000 + i)); else paid stripe.card_on_file $((1000 + i)); fi
        orders+=("$O")
    done
    sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
    for o in "${orders[@]}"; do
        refund "kk-$o" "$o" "\"refund_id\":\"K-$o\",\"amount\":600"
        expect "$o: refund queued" 202 "$ST"
    done
    sim_clear
    sim_fault '{"gateway":"alipay","mode":"delay","count":-1,"delay_ms":500}'
    sim_fault '{"gateway":"stripe","mode":"delay","count":-1,"delay_ms":500}'
    local kills=0
    while [ $kills -lt 3 ]; do
        wait_until 20 bash -c "[ \"\$(curl -s $API/v1/status | jq .refunds.processing)\" -gt 0 ]" || break
        daemon_kill KILL
        kills=$((kills + 1))
        log "SIGKILL $kills with refunds in flight"
        daemon_restart
    done
    [ $kills -gt 0 ] || fail "never saw a refund in flight to kill"
    sim_clear
    for o in "${orders[@]}"; do
        wait_refund "K-$o" SUCCESS 60
    done
    for o in "${orders[@]}"; do
        expect_refunded "$o" 600 1
        expect "K-$o refund.succeeded events" 1 "$(refund_events "K-$o" refund.succeeded)"
    done
    log "$N refunds drained across $kills SIGKILLs: each executed exactly once"
}

case $MODE in
basic)
    for gm in $GATEWAYS; do case_basic "$gm"; done
    case_2c2p
    case_concurrent
    case_offline_queue
    ;;
sigkill) case_sigkill ;;
*) for gm in $GATEWAYS; do case_fault "$gm"; done ;;
esac
expect "refunds executed more than once" 0 "$(sim /_sim/ledger | jq '[.data[] | select(.refunded > .amount)] | length')"
pass
