#!/usr/bin/env bash
# payment_link.sh PAYTERM - GET /v1/charges/{order_id}/payment (SPEC section
# 5): when a QR or redirect charge's create answer is lost the charge is
# UNKNOWN with no code to show; the kiosk asks for it, and payterm repeats
# the create with the same order id, which the gateway answers with the same
# code while the trade is unpaid.  For WeChat, Alipay and 2C2P:
#   * the first answer (create answer lost) is 202 UNKNOWN without a link;
#   * GET .../payment is 200 {"code_url"|"qr_code"|"payment_url": ...}, the
#     same link on every call, and the charge object shows it too;
#   * the gateway still has exactly one trade for the order;
#   * 404 not_found for a method without a link, a final charge, an unknown
#     order.
. "$(dirname "$0")/synclib.sh" "$@"
# No polling in between: what brings the link back is the GET.
echo '{"sync": {"backoff_base_ms": 600000, "backoff_max_ms": 600000}}' >"$T/slow.json"
sync_start "$T/slow.json"

payment() { # payment ORDER -> PST, PBODY
    PST=$(curl -sS --max-time 30 -o "$T/payment.json" -w '%{http_code}' "$API/v1/charges/$1/payment")
    PBODY=$(cat "$T/payment.json")
}
declare -A KEYS=([alipay]=qr_code [wechat]=code_url [2c2p]=payment_url)
declare -A BODIES=([alipay]=alipay.qr [wechat]=wechat.qr [2c2p]=2c2p.redirect)
for gw in alipay wechat 2c2p; do
    o=PL-${gw^^}
    o=${o//2C2P/C2P}
    sim_fault "{\"gateway\":\"$gw\",\"mode\":\"drop_after_commit\",\"count\":1,\"method\":\"POST\"}"
    charge "k-$o" "$o" "$(body_for "${BODIES[$gw]}" 1252)"
    expect "$o first answer" 202 "$ST"
    expect "$o first state" UNKNOWN "$(field .state)"
    expect "$o link in the first answer" null "$(field ".${KEYS[$gw]}")"
    payment "$o"
    expect "$o GET payment" 200 "$PST"
    link=$(jq -r ".${KEYS[$gw]}" <<<"$PBODY")
    [ -n "$link" ] && [ "$link" != null ] || fail "$o GET payment: no ${KEYS[$gw]} in $PBODY"
    expect "$o answer has only the link" 1 "$(jq 'keys | length' <<<"$PBODY")"
    payment "$o"
    expect "$o GET payment again" 200 "$PST"
    expect "$o the same link again" "$link" "$(jq -r ".${KEYS[$gw]}" <<<"$PBODY")"
    expect "$o link in the charge" "$link" "$(charge_json "$o" | jq -r ".${KEYS[$gw]}")"
    expect "$o state now" PENDING "$(state "$o")"
    expect "$o trades at the simulator" 1 "$(trades "$o")"
    expect "$o captures" 0 "$(captures "$o")"
    log "$o: lost create answer, link fetched again: $link"
done

charge k-PL-CARD PL-CARD "$(stripe_card 1200)"
expect "PL-CARD" 201 "$ST"
payment PL-CARD
expect "GET payment of a card charge" 404 "$PST"
expect "GET payment of a card charge: code" not_found "$(jq -r .error.code <<<"$PBODY")"
charge k-PL-PAID PL-PAID "$(wechat_qr 1200)"
expect "PL-PAID" 202 "$ST"
wait_state PL-PAID SUCCESS 30
payment PL-PAID
expect "GET payment of a paid charge" 404 "$PST"
payment PL-NOSUCH
expect "GET payment of an unknown order" 404 "$PST"
curl -sS -o /dev/null -w '%{http_code}' -X POST "$API/v1/charges/PL-PAID/payment" >"$T/post.st"
expect "POST to /payment" 405 "$(cat "$T/post.st")"
pass
