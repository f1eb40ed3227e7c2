#!/usr/bin/env bash
# cancel.sh PAYTERM - POST /v1/charges/{id}/cancel of charges whose outcome
# is open (SPEC section 5): PENDING and UNKNOWN charges are canceled through
# the gateway (Alipay trade.cancel, WeChat close, Stripe cancel) -> 200
# CANCELED, the simulator shows the trade canceled (or never had it), no
# capture, one charge.canceled; the same key replays the answer.  2C2P has no
# cancel for an issued payment token: 409 charge_not_cancelable saying so
# (never a 202 that waits for nothing), replayed, the charge stays PENDING
# and can still be paid.  A SUCCESS charge is 409 charge_not_cancelable.
#
# A long backoff keeps UNKNOWN charges UNKNOWN until the cancel arrives (no
# query resolves them first).
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/extra.json" <<'JSON'
{"sync": {"backoff_base_ms": 8000, "backoff_max_ms": 16000}}
JSON
sync_start "$T/extra.json"

# open ORDER GATEWAY.METHOD AMOUNT FAULT STATE: a charge left in STATE.
open_charge() {
    [ "$4" = none ] || sim_fault "{\"gateway\":\"${2%%.*}\",\"mode\":\"$4\",\"count\":1}"
    charge "k-$1" "$1" "$(body_for "$2" "$3")"
    expect "$1 first answer" 202 "$ST"
    expect "$1 first state" "$5" "$(field .state)"
    expect "$1 state before the cancel" "$5" "$(state "$1")"
}
# cancel_ok ORDER: canceled through the gateway, nothing captured.
cancel_ok() {
    cancel "c-$1" "$1"
    expect "$1 cancel" 200 "$ST"
    expect "$1 state in the answer" CANCELED "$(field .state)"
    cp "$BODY" "$T/cancel-first.json"
    cancel "c-$1" "$1"
    expect "$1 cancel again, same key" 200 "$ST"
    expect "$1 cancel replay body" "$(jq -cS . "$T/cancel-first.json")" "$(jq -cS . "$BODY")"
    expect "$1 state" CANCELED "$(state "$1")"
    expect "$1 captures" 0 "$(captures "$1")"
}

open_charge CX-WX-PEND wechat.qr 1252 none PENDING
open_charge CX-ALI-PEND alipay.qr 1252 none PENDING
open_charge CX-ALI-UNK alipay.barcode 1252 http_500_after_commit UNKNOWN
open_charge CX-STR-UNK stripe.card_on_file 1252 http_500_after_commit UNKNOWN
open_charge CX-WX-LOST wechat.qr 1200 fail_before_commit UNKNOWN
open_charge CX-2C2P-PEND 2c2p.redirect 1252 none PENDING
log "charges left PENDING and UNKNOWN"

for o in CX-WX-PEND CX-ALI-PEND CX-ALI-UNK CX-STR-UNK CX-WX-LOST; do cancel_ok "$o"; done
for o in CX-WX-PEND CX-ALI-PEND CX-ALI-UNK CX-STR-UNK; do
    expect "$o at the simulator" canceled "$(sim_status "$o")"
done
expect "CX-WX-LOST trades at the simulator (it never had the order)" 0 "$(trades CX-WX-LOST)"
log "five canceled through the gateway"

cancel c-CX-2C2P-PEND CX-2C2P-PEND
expect "CX-2C2P-PEND cancel (2C2P cannot withdraw a token)" 409 "$ST"
expect "CX-2C2P-PEND cancel error" charge_not_cancelable "$(field .error.code)"
case $(field .error.message) in *"2C2P cannot withdraw a payment token"*) ;;
*) fail "CX-2C2P-PEND cancel message should say why: $(field .error.message)" ;; esac
cp "$BODY" "$T/cancel-2c2p.json"
cancel c-CX-2C2P-PEND CX-2C2P-PEND
expect "CX-2C2P-PEND cancel again, same key" 409 "$ST"
expect "CX-2C2P-PEND cancel replay body" "$(jq -cS . "$T/cancel-2c2p.json")" "$(jq -cS . "$BODY")"
expect "CX-2C2P-PEND state" PENDING "$(state CX-2C2P-PEND)"
expect "CX-2C2P-PEND trade at the simulator (still payable)" pending "$(sim_status CX-2C2P-PEND)"

charge k-CX-PAID CX-PAID "$(stripe_card 1200)"
expect "CX-PAID" 201 "$ST"
cancel c-CX-PAID CX-PAID
expect "CX-PAID cancel" 409 "$ST"
expect "CX-PAID cancel error" charge_not_cancelable "$(field .error.code)"
expect_captured_once CX-PAID

wait_notes 30
sleep 1
for o in CX-WX-PEND CX-ALI-PEND CX-ALI-UNK CX-STR-UNK CX-WX-LOST; do
    expect "$o state at the end" CANCELED "$(state "$o")"
    expect "$o charge.canceled events" 1 "$(events_of "$o" charge.canceled)"
    expect "$o charge.succeeded events" 0 "$(events_of "$o" charge.succeeded)"
    expect "$o captures at the end" 0 "$(captures "$o")"
done
pass
