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
#   * 503 gateway_unavailable while the create is still in flight;
#   * polling it cannot resend past sync.max_attempts;
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

# While the create is still on its way the link is not there yet: 503
# gateway_unavailable with Retry-After, never a 404 that says "no code".
sim_fault '{"gateway":"wechat","mode":"delay","count":1,"delay_ms":1500,"method":"POST"}'
charge k-PL-SLOW PL-SLOW "$(body_for wechat.qr 1252)" &
slow=$!
sleep 0.5
payment PL-SLOW
expect "GET payment while the create is in flight" 503 "$PST"
expect "GET payment while in flight: code" gateway_unavailable "$(jq -r .error.code <<<"$PBODY")"
wait $slow
payment PL-SLOW
expect "GET payment once the create answered" 200 "$PST"

# A kiosk polling the route cannot resend past sync.max_attempts (5 here).
sim_fault '{"gateway":"wechat","mode":"drop_after_commit","count":1,"method":"POST"}'
charge k-PL-POLL PL-POLL "$(body_for wechat.qr 1252)"
expect "PL-POLL first state" UNKNOWN "$(field .state)"
sim_fault '{"gateway":"wechat","mode":"http_500_after_commit","count":20,"method":"POST"}'
for i in 1 2 3 4 5 6 7 8; do payment PL-POLL; done
sim_clear
attempts=$(charge_json PL-POLL | jq .attempts)
[ "$attempts" -le 5 ] || fail "PL-POLL: polling GET .../payment made $attempts attempts (max_attempts 5)"
log "PL-POLL: 8 polls, $attempts attempts"

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
