#!/usr/bin/env bash
# wechat_barcode.sh PAYTERM MODE - WeChat payment codes (付款码, APIv2
# micropay / orderquery / reverse, SPEC 8) through the real daemon and
# simulator over TLS.
#   confirm  a customer who confirms with a password after a while
#            (USERPAYING: PENDING, polled with orderquery, then SUCCESS, one
#            capture), a declined code (NOTENOUGH: 402 FAILED, nothing
#            captured), and a paid order refunded through APIv3 by its
#            out_trade_no
#   reverse  a customer who never confirms: still USERPAYING after
#            gateways.wechat.barcode_timeout_s, the order is reversed over
#            mutual TLS (/secapi/pay/reverse with the merchant certificate):
#            CANCELED locally and at the simulator, no capture, one
#            charge.canceled
. "$(dirname "$0")/synclib.sh" "$@"
MODE=${2:?usage: $0 PAYTERM confirm|reverse}
case $MODE in
confirm)
    SIM_PAY_DELAY_MS=1500
    echo "{}" >"$T/extra.json"
    ;;
reverse)
    SIM_PAY_DELAY_MS=120000 # longer than the test: this customer never confirms
    echo '{"gateways": {"wechat": {"barcode_timeout_s": 20}}}' >"$T/extra.json"
    ;;
*) fail "unknown mode $MODE" ;;
esac
sync_start "$T/extra.json"

case $MODE in
confirm)
    charge k-wx-1 WXB-CONFIRM "$(wechat_barcode 1352)"
    expect "WXB-CONFIRM first answer" 202 "$ST"
    expect "WXB-CONFIRM first state (USERPAYING)" PENDING "$(field .state)"
    charge k-wx-1 WXB-CONFIRM "$(wechat_barcode 1352)"
    expect "WXB-CONFIRM retry replayed" "1 202" "$REPLAYED $ST"
    wait_state WXB-CONFIRM SUCCESS 30
    expect_captured_once WXB-CONFIRM
    log "WXB-CONFIRM: USERPAYING, polled, then SUCCESS with one capture"

    charge k-wx-2 WXB-POOR "$(wechat_barcode 1351)"
    expect "WXB-POOR answer" 402 "$ST"
    expect "WXB-POOR state" FAILED "$(field .state)"
    expect "WXB-POOR error" NOTENOUGH "$(field .error.code)"
    expect "WXB-POOR captures" 0 "$(captures WXB-POOR)"

    charge k-wx-3 WXB-PAID "$(wechat_barcode 1200)"
    expect "WXB-PAID answer" 201 "$ST"
    ST=$(curl -sS -o "$T/r.json" -w '%{http_code}' -X POST "$API/v1/charges/WXB-PAID/refunds" \
        -H 'Idempotency-Key: k-wx-r1' -d '{"refund_id":"WXR-1","amount":500}')
    expect "WXB-PAID refund accepted (WeChat processes it later)" "202 PENDING" "$ST $(jq -r .state "$T/r.json")"
    wait_until 30 bash -c "[ \"\$(curl -s $API/v1/refunds/WXR-1 | jq -r .state)\" = SUCCESS ]" ||
        fail "WXR-1 not SUCCESS: $(api /v1/refunds/WXR-1)"
    expect "WXB-PAID refunded at the simulator" 500 "$(sim '/_sim/ledger?order_id=WXB-PAID' | jq '[.data[].refunded] | add')"
    expect "WXB-PAID amount_refunded" 500 "$(charge_json WXB-PAID | jq .amount_refunded)"
    log "WXB-PAID: paid with a payment code, refunded through APIv3 by out_trade_no"
    ;;
reverse)
    charge k-wx-9 WXB-GONE "$(wechat_barcode 2252)"
    expect "WXB-GONE first answer" 202 "$ST"
    expect "WXB-GONE first state" PENDING "$(field .state)"
    wait_state WXB-GONE CANCELED 40
    expect "WXB-GONE at the simulator" canceled "$(sim_status WXB-GONE)"
    expect "WXB-GONE captures" 0 "$(captures WXB-GONE)"
    expect "WXB-GONE charge.canceled events" 1 "$(events_of WXB-GONE charge.canceled)"
    trail=$(api /v1/charges/WXB-GONE/events)
    expect "WXB-GONE reversed for barcode_timeout" 1 "$(jq '[.data[] | select(.cause == "barcode_timeout" and .to == "CANCELED")] | length' <<<"$trail")"
    log "WXB-GONE: never confirmed, reversed over mutual TLS after barcode_timeout_s"
    ;;
esac
pass
