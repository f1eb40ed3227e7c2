#!/usr/bin/env bash
# fault_matrix.sh PAYTERM MODE - one fault mode of SPEC section 1 against
# every gateway and method, through the real daemon and simulator over TLS.
#
# For each of alipay.barcode, alipay.qr, wechat.barcode, wechat.qr, stripe.card_on_file and
# 2c2p.redirect: arm MODE for that gateway at the simulator, take a charge at
# POST /v1/charges (the online path), retry it with the same Idempotency-Key
# while the fault is in force and again after the charge settled, and assert
# what the merchant cares about:
#   * the simulator's ledger shows exactly one capture for the order (zero
#     for a charge that could not be created);
#   * GET /v1/charges/{id} shows the right final state;
#   * the fulfilment feed carries exactly one terminal event for the order;
#   * every retry of the key is answered from the stored first response
#     (Idempotency-Replayed: true, same status and body), or, while the first
#     request is still running, 409 idempotency_key_in_use.
# Cases run one after the other so that a fault armed for a gateway is taken
# by the request the case makes, not by a query for an earlier charge.
. "$(dirname "$0")/synclib.sh" "$@"
MODE=${2:?usage: $0 PAYTERM MODE}

case $MODE in
delay)
    # The answer comes DELAY_MS after the request, past the client timeout,
    # and the gateway commits then.  The first query is due 1x..2x
    # backoff_base_ms after the timeout, i.e. after that late commit.
    # delay_long below has queries that arrive before the commit, for the
    # methods that resend (barcode, card).  qr/redirect are not run that
    # way: on the first "not found" the engine declares them FAILED
    # not_created (charge.failed), the late request then creates the order
    # anyway, the simulated customer pays it and the charge ends FAILED +
    # review with one capture - a design question raised with the lead, not
    # something this test should bless.
    # The first request holds its key for the whole timeout: 2 s, so that
    # the retry of case_captured still finds it running on a loaded machine
    # (ASan, a parallel CI run: 1 s was missed once, the retry landing after
    # the first answer).
    SYNC_REQUEST_TIMEOUT_MS=2000
    DELAY_MS=2600
    cat >"$T/extra.json" <<EOF
{"sync": {"backoff_base_ms": 1500, "backoff_max_ms": 3000, "max_attempts": 10}}
EOF
    ;;
*)
    cat >"$T/extra.json" <<EOF
{"sync": {"max_attempts": 10}}
EOF
    ;;
esac
sync_start "$T/extra.json"

n=0
new_order() { # new_order GATEWAY -> O, a fresh order id valid for it (WeChat: 6-32 chars)
    n=$((n + 1))
    O=$(printf 'FM-%s-%s-%02d' "${MODE:0:8}" "${1:0:3}" "$n")
}

arm() { # arm GATEWAY [DELAY_MS] [GATEWAY.METHOD]
    # A qr/redirect charge is preceded by a reachability probe (GET of the
    # endpoint).  Alipay's endpoint is its API path, so that GET takes a
    # fault armed for Alipay: a harmless 1 ms delay is armed first for it,
    # and the fault proper then meets the pay request.
    case $MODE:${3:-} in
    refuse_connect:*) ;;
    *:alipay.qr) sim_fault '{"gateway":"alipay","mode":"delay","count":1,"delay_ms":1}' ;;
    esac
    case $MODE in
    refuse_connect) sim_fault "{\"gateway\":\"$1\",\"mode\":\"refuse_connect\",\"count\":-1}" ;;
    delay) sim_fault "{\"gateway\":\"$1\",\"mode\":\"delay\",\"count\":1,\"delay_ms\":${2:-$DELAY_MS}}" ;;
    *) sim_fault "{\"gateway\":\"$1\",\"mode\":\"$MODE\",\"count\":1}" ;;
    esac
}

# expect_replay WHAT FIRST_STATUS FIRST_BODY_FILE: the last answer is the stored one.
expect_replay() {
    expect "$1: status of the retry" "$2" "$ST"
    expect "$1: Idempotency-Replayed" 1 "$REPLAYED"
    expect "$1: body of the retry" "$(jq -cS . "$3")" "$(jq -cS . "$BODY")"
}

# expect_terminal_once ORDER TYPE: exactly one terminal fulfilment event, of TYPE.
expect_terminal_once() {
    local ev
    ev=$(all_events)
    expect "$1 $2 events" 1 "$(jq --arg o "$1" --arg t "$2" '[.[] | select(.order_id == $o and .type == $t)] | length' <<<"$ev")"
    expect "$1 terminal events in all" 1 "$(jq --arg o "$1" '[.[] | select(.order_id == $o and (.type == "charge.succeeded" or .type == "charge.failed" or .type == "charge.canceled"))] | length' <<<"$ev")"
}

# A charge the gateway takes: one capture, SUCCESS, one charge.succeeded.
case_captured() { # case_captured GATEWAY.METHOD
    local gm=$1 gw=${1%%.*} o key first first_st
    new_order "$gw"
    o=$O
    key=k-$o
    arm "$gw" "" "$gm"
    if [ "$MODE" = delay ]; then
        # A retry while the first request is still waiting for the gateway.
        {
            CHARGE_OUT=$T/bg charge "$key" "$o" "$(body_for "$gm" 1200)"
            echo "$ST" >"$T/bg.status"
        } &
        local bg=$!
        # PROCESSING is committed before the request leaves; the first
        # request holds the key until its answer (or the timeout).
        wait_until 5 in_state "$o" PROCESSING || fail "$gm $o: never seen PROCESSING ($(state "$o"))"
        charge "$key" "$o" "$(body_for "$gm" 1200)"
        expect "$gm $o: retry while the first request runs" 409 "$ST"
        expect "$gm $o: its error code" idempotency_key_in_use "$(field .error.code)"
        grep -qi '^Retry-After: *[0-9]' "$T/last.h" || fail "$gm $o: 409 without Retry-After"
        wait $bg
        first_st=$(cat "$T/bg.status")
        cp "$T/bg.json" "$T/first.json"
    else
        charge "$key" "$o" "$(body_for "$gm" 1200)"
        first_st=$ST
        cp "$BODY" "$T/first.json"
    fi
    first=$(jq -r .state "$T/first.json")
    case $MODE in
    refuse_connect)
        expect "$gm $o: first answer" 202 "$first_st"
        expect "$gm $o: first state (queued offline)" INIT "$first"
        charge "$key" "$o" "$(body_for "$gm" 1200)"
        expect_replay "$gm $o (retry while offline)" 202 "$T/first.json"
        expect "$gm $o: trades at the simulator while offline" 0 "$(trades "$o")"
        expect "$gm $o: /v1/status online while offline" false "$(api /v1/status | jq .online)"
        sim_clear # the network is back: the daemon finds out by itself
        ;;
    fail_before_commit)
        expect "$gm $o: first answer" 202 "$first_st"
        expect "$gm $o: first state" UNKNOWN "$first"
        charge "$key" "$o" "$(body_for "$gm" 1200)"
        expect_replay "$gm $o (retry while unresolved)" 202 "$T/first.json"
        ;;
    *)
        # The gateway committed: its notification may even beat the lost
        # answer, and then the first answer is already 201 SUCCESS.
        case $first_st:$first in
        202:UNKNOWN | 201:SUCCESS) ;;
        *) fail "$gm $o: first answer: expected 202 UNKNOWN (or 201 SUCCESS), got $first_st $first" ;;
        esac
        charge "$key" "$o" "$(body_for "$gm" 1200)"
        expect_replay "$gm $o (retry while unresolved)" "$first_st" "$T/first.json"
        ;;
    esac
    wait_state "$o" SUCCESS 30
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    expect_replay "$gm $o (retry after it settled)" "$first_st" "$T/first.json"
    expect "$gm $o: captures" 1 "$(captures "$o")"
    expect "$gm $o: review" false "$(charge_json "$o" | jq -r .review)"
    expect_terminal_once "$o" charge.succeeded
    # How it was resolved, from the charge's audit trail: a request the
    # gateway never recorded is resent with the same key (Stripe within its
    # 24 h window, an Alipay barcode while the auth code is valid); one it
    # recorded is found by query and never sent again.
    local causes
    causes=$(api "/v1/charges/$o/events" | jq -c '[.data[].cause]')
    case $MODE in
    fail_before_commit)
        expect "$gm $o: resends after the lost request" 1 "$(jq '[.[] | select(. == "resend")] | length' <<<"$causes")" ;;
    drop_after_commit | http_500_after_commit)
        expect "$gm $o: resends after a request the gateway recorded ($causes)" 0 "$(jq '[.[] | select(. == "resend")] | length' <<<"$causes")" ;;
    esac
    log "$gm $o: $MODE -> first $first_st $first, then SUCCESS, 1 capture ($causes)"
}

# A charge the gateway never created (qr/redirect whose request was lost
# before the gateway committed): zero at the simulator, FAILED not_created.
case_not_created() {
    local gm=$1 gw=${1%%.*} o key
    new_order "$gw"
    o=$O
    key=k-$o
    arm "$gw" "" "$gm"
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    cp "$BODY" "$T/first.json"
    expect "$gm $o: first answer" 202 "$ST"
    expect "$gm $o: first state" UNKNOWN "$(field .state)"
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    expect_replay "$gm $o (retry while unresolved)" 202 "$T/first.json"
    wait_state "$o" FAILED 30
    expect "$gm $o: error code" not_created "$(charge_json "$o" | jq -r .error.code)"
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    expect_replay "$gm $o (retry after it settled)" 202 "$T/first.json"
    expect "$gm $o: trades at the simulator" 0 "$(trades "$o")"
    expect_terminal_once "$o" charge.failed
    log "$gm $o: $MODE -> UNKNOWN, then FAILED not_created, nothing at the gateway"
}

# qr/redirect while the gateway cannot be reached: they cannot wait in the
# offline queue, and the daemon asks the gateway (a probe) before it records
# one.  So: 503 offline_not_allowed with nothing recorded and nothing at the
# gateway, the key released - a retry with the same key during the outage is
# 503 again, and once the gateway is back the same key charges the order
# (SPEC section 5: "the same key can be retried once the condition passes").
# Whether the daemon still believed the gateway up (first order) or already
# knew it was down (second order) makes no difference.
case_require_online_refused() {
    local gm=$1 gw=${1%%.*} o key o2 key2
    new_order "$gw"
    o=$O
    key=k-$o
    new_order "$gw"
    o2=$O
    key2=k-$o2
    arm "$gw"
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    expect "$gm $o: first answer" 503 "$ST"
    expect "$gm $o: error code" offline_not_allowed "$(field .error.code)"
    grep -qi '^Retry-After: *[0-9]' "$T/last.h" || fail "$gm $o: 503 without Retry-After"
    expect "$gm $o: nothing recorded" not_found "$(state "$o")"
    charge "$key" "$o" "$(body_for "$gm" 1200)"
    expect "$gm $o: retry during the outage" 503 "$ST"
    expect "$gm $o: retry not replayed" 0 "$REPLAYED"
    charge "$key2" "$o2" "$(body_for "$gm" 1300)"
    expect "$gm $o2: while known down" 503 "$ST"
    expect "$gm $o2: nothing recorded" not_found "$(state "$o2")"
    expect "$gm: trades at the simulator during the outage" 0 "$(($(trades "$o") + $(trades "$o2")))"

    sim_clear
    # The kiosk retries with the same keys (after Retry-After in real life)
    # until the daemon sees the gateway again (its probe, or the request's).
    local k ord amount deadline
    for k in 1 2; do
        if [ $k = 1 ]; then key=k-$o ord=$o amount=1200; else key=$key2 ord=$o2 amount=1300; fi
        deadline=$((SECONDS + 20))
        while :; do
            charge "$key" "$ord" "$(body_for "$gm" $amount)"
            [ "$ST" = 503 ] || break
            [ $SECONDS -lt $deadline ] || fail "$gm $ord: still 503 20 s after the gateway came back ($(field -c .))"
            sleep 0.5
        done
        expect "$gm $ord: retry after the outage" 202 "$ST"
        expect "$gm $ord: state" PENDING "$(field .state)"
        [ "$(field '.qr_code // .code_url // .payment_url // ""')" != "" ] ||
            fail "$gm $ord: PENDING without a code or payment URL: $(field -c .)"
    done
    for ord in $o $o2; do
        wait_state "$ord" SUCCESS 30
        expect "$gm $ord: captures" 1 "$(captures "$ord")"
        expect_terminal_once "$ord" charge.succeeded
    done
    log "$gm $o, $o2: 503 with nothing recorded during the outage, then the same keys charged once each"
}

for gm in alipay.barcode alipay.qr wechat.barcode wechat.qr stripe.card_on_file 2c2p.redirect; do
    case $MODE:$gm in
    refuse_connect:*.qr | refuse_connect:*.redirect) case_require_online_refused "$gm" ;;
    fail_before_commit:*.qr | fail_before_commit:*.redirect) case_not_created "$gm" ;;
    *) case_captured "$gm" ;;
    esac
done

if [ "$MODE" = delay ]; then
    # delay_long: the answer is so late that the first query comes before the
    # gateway commits and finds nothing.  A barcode pay is resent with the
    # same out_trade_no while the auth code is valid, a card charge with the
    # same Stripe Idempotency-Key (409 while the first is in flight); either
    # way the gateway holds one trade.
    for gm in alipay.barcode wechat.barcode stripe.card_on_file; do
        gw=${gm%%.*}
        new_order "$gw"
    o=$O
        # Past the first query: the timeout (2 s) + 1x..2x backoff_base_ms.
        arm "$gw" 6500
        charge "k-$o" "$o" "$(body_for "$gm" 1400)"
        expect "$gm $o: first answer" 202 "$ST"
        wait_state "$o" SUCCESS 30
        sleep 4 # let the late original answer land at the simulator too
        expect "$gm $o: captures" 1 "$(captures "$o")"
        expect "$gm $o: trades" 1 "$(trades "$o")"
        expect_terminal_once "$o" charge.succeeded
        log "$gm $o: delay past the first query -> resent with the same key, 1 capture"
    done
fi

# Duplicates the simulator sends on purpose must not produce second events.
wait_notes 40
expect "orders captured more than once" 0 "$(sim /_sim/ledger | jq '[.data[] | select(.captures > 1)] | length')"
expect "charge.succeeded events for one order twice" 0 \
    "$(all_events | jq '[.[] | select(.type == "charge.succeeded") | .order_id] | length - (unique | length)')"
pass
