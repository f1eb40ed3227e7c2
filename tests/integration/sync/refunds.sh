#!/usr/bin/env bash
# refunds.sh PAYTERM MODE - refunds (SPEC 5a) through the real daemon and
# simulator over TLS, asserting what the merchant cares about: the
# simulator executed each refund id exactly once ("refunds" and "refunded"
# in its ledger), the local refund is final with the right state, the
# charge's amount_refunded agrees, and the feed has one refund event each.
#
# MODE:
#   basic    two partial refunds and one too many on Alipay, WeChat (PROCESSING,
#            then SUCCESS by notification or query), Stripe and 2C2P; a
#            replay; the refund_id rules; 16 parallel refunds under
#            different keys on one charge (Stripe, and 2C2P, whose refunds
#            must also go out one at a time); a refund queued while the
#            network is cut and drained when it returns; 2C2P refunds made
#            outside payterm (the merchant portal): one of the same amount is
#            bound, one that does not add up stops for review, unsent; a
#            2C2P charge's 65th refund (more than its list holds) held for
#            review, unsent, with the queue draining past it
#   refuse_connect | fail_before_commit | drop_after_commit |
#   http_500_after_commit | delay
#            that fault armed for the refund call on each gateway (2C2P: on
#            its refund request, processType R), then on 2C2P's refund
#            status query (RS) that comes before every 2C2P send
#   pending  2C2P refunds answered RP (the simulator's --pm-refund-pending),
#            resolved by the status query
#   sigkill  refunds queued offline, the daemon SIGKILLed mid-drain with
#            refunds in flight, restarted
#
# 2C2P's refund request has no refund key: what keeps it to one refund per
# refund_id is payterm's order of operations (docs/2c2p-refunds.md), so
# every 2C2P case also checks that no refund was resent after the gateway
# executed it and, where refunds race, that at most one was in flight.
. "$(dirname "$0")/synclib.sh" "$@"
MODE=${2:?usage: $0 PAYTERM MODE}

case $MODE in
delay)
    SYNC_REQUEST_TIMEOUT_MS=1000
    DELAY_MS=1400
    echo '{"sync": {"backoff_base_ms": 1500, "backoff_max_ms": 3000, "max_attempts": 10}}' >"$T/extra.json"
    ;;
pending)
    SIM_EXTRA_ARGS=--pm-refund-pending
    SIM_PAY_DELAY_MS=4000 # RP stays RP this long: long enough to see it
    echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json"
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

GATEWAYS="alipay.barcode wechat.qr stripe.card_on_file 2c2p.redirect"

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

case_concurrent() { # case_concurrent GATEWAY.METHOD
    paid "$1" 1000
    local o=$O i pids=()
    for i in $(seq 1 16); do
        (REFUND_OUT=$T/par.$i refund "kp-$i-$o" "$o" "\"refund_id\":\"P-$i-$o\",\"amount\":300" && echo "$ST" >"$T/par.$i.st") &
        pids+=($!)
    done
    wait "${pids[@]}" # (not a bare wait: the daemon and the simulator are children too)
    local ok=0 no=0
    for i in $(seq 1 16); do
        # 2C2P: 202 for the refunds that wait for their turn (one at a time).
        case $(cat "$T/par.$i.st") in 201 | 202) ok=$((ok + 1)) ;; 409) no=$((no + 1)) ;; *) fail "parallel refund $i: $(cat "$T/par.$i.st") $(cat "$T/par.$i.json")" ;; esac
    done
    expect "$1: 16 parallel refunds of 300 on 1000: accepted" 3 "$ok"
    expect "$1: 16 parallel refunds of 300 on 1000: refused" 13 "$no"
    for i in $(seq 1 16); do
        [ "$(cat "$T/par.$i.st")" = 409 ] || wait_refund "P-$i-$o" SUCCESS 40
    done
    expect_refunded "$o" 900 3
    [ "${1%%.*}" != 2c2p ] || expect_one_in_flight "$o"
    log "$1 $o: 16 parallel refunds, 3 accepted (900), 13 refused, the simulator agrees"
}

# expect_one_in_flight ORDER: in the charge's audit trail, never two of its
# refunds PROCESSING or UNKNOWN at once (2C2P's ordering rule), and none sent
# again after the gateway had executed it.
expect_one_in_flight() {
    local most
    most=$(api "/v1/charges/$1/events" | jq '[.data[] | select(.refund_id != null and .refused == false)]
        | reduce .[] as $e ({f: {}, m: 0};
            (if ($e.to == "PROCESSING" or $e.to == "UNKNOWN") then .f[$e.refund_id] = 1
             elif ($e.to != null and $e.to != "") then .f |= del(.[$e.refund_id]) else . end)
            | .m = ([.m, (.f | length)] | max)) | .m')
    expect "$1: refunds in flight at once, at most" 1 "$most"
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

# A 2C2P refund made outside payterm (the merchant portal): the Payment
# Maintenance request signed with the merchant's key, straight to the
# simulator.  outside_refund ORDER AMOUNT_DECIMAL
outside_refund() {
    local xml tok
    xml="<PaymentProcessRequest><version>4.3</version><merchantID>JT01</merchantID><invoiceNo>$1</invoiceNo><actionAmount>$2</actionAmount><processType>R</processType></PaymentProcessRequest>"
    tok=$(printf '%s' "$xml" | "$PAYTERM" sign --gateway 2c2p-pm --key "$T/sim/2c2p_pm_merchant_private_key.pem" \
        --peer-key "$T/sim/2c2p_pm_public.cer" | jq -r .token)
    sim /PaymentAction/2.0/action -H 'Content-Type: text/plain' --data-binary "$tok" >/dev/null
}

case_2c2p_outside() {
    # The same amount: that refund is this one - bound, never sent.
    paid 2c2p.redirect 5000
    local a=$O b
    outside_refund "$a" 12.00
    expect "$a: the portal's refund at the simulator" 1 "$(sim_refunds "$a")"
    refund "ko-$a" "$a" "\"refund_id\":\"OUT-$a\",\"amount\":1200"
    wait_refund "OUT-$a" SUCCESS 30
    expect_refunded "$a" 1200 1
    expect "$a: the bound refund was never sent" 0 "$(api "/v1/charges/$a/events" | jq '[.data[] | select(.refund_id == "OUT-'"$a"'" and .cause == "send")] | length')"
    # Another amount: nothing adds up - unsent, for an operator.
    paid 2c2p.redirect 5000
    b=$O
    outside_refund "$b" 12.00
    refund "ko-$b" "$b" "\"refund_id\":\"OUT-$b\",\"amount\":700"
    expect "$b: answered" 202 "$ST"
    wait_until 20 bash -c "[ \"\$(curl -s $API/v1/refunds/OUT-$b | jq .review)\" = true ]" ||
        fail "$b: the refund did not go to review: $(api "/v1/refunds/OUT-$b" | jq -c .)"
    expect "$b: still unsent" INIT "$(refund_state "OUT-$b")"
    expect_match "$b: the review says why" 'refund_list_unexplained' "$(api "/v1/refunds/OUT-$b" | jq -r .review_reason)"
    # The review ends the conversation that read the list: had it sent, the
    # send would be in the trail and at the simulator by now.
    expect "$b: never sent" 0 "$(api "/v1/charges/$b/events" | jq '[.data[] | select(.refund_id == "OUT-'"$b"'" and (.cause == "send" or .cause == "resend"))] | length')"
    expect "$b: only the portal's refund at the simulator" "1 1200" "$(sim_refunds "$b") $(sim_refunded "$b")"
    log "2c2p: a portal refund of the same amount is bound (no send); of another amount, review"
}

# More refunds on one 2C2P charge than the ordering rule reads at once (64,
# the most a refund list holds): the 65th cannot be placed among them, so
# it is held for review, unsent - and the queue behind it still drains (a
# refund that could not be ordered used to stop every drain pass there).
case_2c2p_too_many() {
    paid 2c2p.redirect 1000
    local o=$O i
    for i in $(seq 1 64); do
        refund "km-$i-$o" "$o" "\"refund_id\":\"M-$i-$o\",\"amount\":10"
        [ "$ST" = 201 ] || fail "2c2p M-$i-$o: $ST $(field -c .)"
    done
    expect_refunded "$o" 640 64
    refund "km-65-$o" "$o" "\"refund_id\":\"M-65-$o\",\"amount\":10"
    expect "2c2p M-65-$o: answered" "202 INIT" "$ST $(field .state)"
    wait_until 20 bash -c "[ \"\$(curl -s $API/v1/refunds/M-65-$o | jq .review)\" = true ]" ||
        fail "M-65-$o: the refund did not go to review: $(api "/v1/refunds/M-65-$o" | jq -c .)"
    expect_match "M-65-$o: the review says why" 'more refunds than payterm orders' \
        "$(api "/v1/refunds/M-65-$o" | jq -r .review_reason)"
    # A refund queued after it, on another charge, is drained past it.
    paid 2c2p.redirect 1000
    local q=$O
    sim_fault '{"gateway":"2c2p","mode":"refuse_connect","count":-1}'
    refund "km-$q" "$q" "\"refund_id\":\"MQ-$q\",\"amount\":300"
    expect "2c2p MQ-$q: queued while 2C2P is cut off" "202 INIT" "$ST $(field .state)"
    sim_clear
    wait_refund "MQ-$q" SUCCESS 30
    expect_refunded "$q" 300 1
    expect "$o: still 64 refunds at the simulator" "640 64" "$(sim_refunded "$o") $(sim_refunds "$o")"
    expect "M-65-$o: still unsent" INIT "$(refund_state "M-65-$o")"
    log "2c2p $o: 64 refunds, the 65th held for review unsent; the queue drained past it"
}

# A fault on 2C2P's refund status query (RS), which comes before every 2C2P
# send: the refund is not sent while the query fails, then exactly once.
case_2c2p_status_fault() {
    paid 2c2p.redirect 1000
    local o=$O r=FS-$O
    case $MODE in
    refuse_connect) return 0 ;; # before any request is read: case_fault has it
    delay) sim_fault "{\"gateway\":\"2c2p\",\"mode\":\"delay\",\"count\":1,\"delay_ms\":$DELAY_MS,\"process_type\":\"RS\"}" ;;
    *) sim_fault "{\"gateway\":\"2c2p\",\"mode\":\"$MODE\",\"count\":1,\"process_type\":\"RS\"}" ;;
    esac
    refund "kfs-$o" "$o" "\"refund_id\":\"$r\",\"amount\":400"
    case $ST:$(field .state) in
    202:INIT | 201:SUCCESS) ;;
    *) fail "2c2p $r: a status query fault answered $ST $(field -c .)" ;;
    esac
    # SUCCESS comes from R's answer, or from the list that shows R: either
    # way the one R has landed, and no other is out (one in flight).
    wait_refund "$r" SUCCESS 40
    expect_refunded "$o" 400 1
    expect "2c2p $r: never resent" 0 "$(api "/v1/charges/$o/events" | jq '[.data[] | select(.refund_id == "'"$r"'" and .cause == "resend")] | length')"
    log "2c2p $r: $MODE on the status query -> not sent until it answered, then once"
}

# RP: accepted, pending at 2C2P, resolved by the status query.
case_2c2p_pending() {
    paid 2c2p.redirect 2000
    local o=$O
    refund "kp-$o" "$o" "\"refund_id\":\"RP-$o\",\"amount\":1500"
    expect "2c2p RP-$o: answered" "202 PENDING" "$ST $(field .state)"
    expect "2c2p RP-$o: 2C2P's refund number bound" 7 "$(field .gateway_refund_no | tr -d '\n' | wc -c)"
    expect "2c2p RP-$o: nothing returned yet" "0 1" "$(sim_refunded "$o") $(sim_refunds "$o")"
    wait_refund "RP-$o" SUCCESS 30
    expect_refunded "$o" 1500 1
    expect "RP-$o refund.succeeded events" 1 "$(refund_events "RP-$o" refund.succeeded)"
    # The rest, once the first is final: pending, then resolved the same way.
    refund "kp2-$o" "$o" "\"refund_id\":\"RP2-$o\",\"amount\":500"
    wait_refund "RP2-$o" SUCCESS 30
    expect_refunded "$o" 2000 2
    log "2c2p $o: RP answered 202 PENDING, resolved to SUCCESS by the status query, twice"
}

case_fault() { # case_fault GATEWAY.METHOD
    local gm=$1 gw=${1%%.*} o r first first_st
    paid "$gm" 1000
    o=$O
    r=F-$o
    # 2C2P asks its refund status (RS) before it sends: aim at the refund (R).
    local only=""
    [ "$gw" != 2c2p ] || only=',"process_type":"R"'
    case $MODE in
    refuse_connect) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"refuse_connect\",\"count\":-1}" ;;
    delay) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"delay\",\"count\":1,\"delay_ms\":$DELAY_MS$only}" ;;
    *) sim_fault "{\"gateway\":\"$gw\",\"mode\":\"$MODE\",\"count\":1$only}" ;;
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
        case $((i % 3)) in
        0) paid alipay.barcode $((1000 + i)) ;;
        1) paid stripe.card_on_file $((1000 + i)) ;;
        2) paid 2c2p.redirect $((1000 + i)) ;;
        esac
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
    sim_fault '{"gateway":"2c2p","mode":"delay","count":-1,"delay_ms":500}'
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
    case_concurrent stripe.card_on_file
    case_concurrent 2c2p.redirect
    case_offline_queue
    case_2c2p_outside
    case_2c2p_too_many
    ;;
pending) case_2c2p_pending ;;
sigkill) case_sigkill ;;
*)
    for gm in $GATEWAYS; do case_fault "$gm"; done
    case_2c2p_status_fault
    ;;
esac
expect "refunds executed more than once" 0 "$(sim /_sim/ledger | jq '[.data[] | select(.refunded > .amount)] | length')"
pass
