#!/usr/bin/env bash
# qr_expiry.sh PAYTERM - QR codes expire (SPEC 18; issue 32: "a customer
# paying a 25-hour-old Alipay code is captured").
#
# Nobody waits: time passes for the lane and for the gateways alike - the
# daemon's wall and boot-time clocks move together (PAYTERM_TEST_CLOCK_FILE,
# so no step of the wall clock is seen) and the simulator's clock moves by
# the same amount (POST /_sim/clock).  qr_timeout_s is 90; polls are rare
# (backoff 30-60 s), so what ends a code is its expiry, not a poll.
#
#   * Every QR or payment-page create carries the gateway's expiry: Alipay
#     timeout_express "2m" (90 s in whole minutes, rounded up), WeChat
#     time_expire (RFC 3339, +08:00) and 2C2P paymentExpiry (yyyy-MM-dd
#     HH:mm:ss, UTC+7) 90 s after the create; the simulator records them.
#   * 100 s later, unpaid: an Alipay code nobody scanned (its close is
#     answered ACQ.TRADE_NOT_EXIST), one scanned and left (closed: Alipay's
#     own 2 minutes have not passed), one whose close answer is lost (HTTP
#     500 after the commit: the query finds it closed), a WeChat code
#     (WeChat refuses a close in an order's first 5 minutes: payterm relies
#     on the time_expire it sent and confirms by query) and a 2C2P page (no
#     close at all: the same) all end CANCELED with error qr_expired, one
#     charge.canceled each, never under review, nothing captured; no close
#     is sent for the WeChat code nor the 2C2P page.
#   * Paid just before the close (Alipay) or the expiry (WeChat), without a
#     notification: the payment wins - SUCCESS, captured once, one
#     charge.succeeded, no charge.canceled.
#   * 25 hours later a WeChat code, now older than 5 minutes, is closed;
#     and a customer paying any expired code - a 25-hour-old Alipay code
#     among them - is refused by the simulator: nothing is captured.
. "$(dirname "$0")/synclib.sh" "$@"

CLOCK=$T/clock
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
PASSED_MS=0
write_clock() { echo "$PASSED_MS boot=$PASSED_MS synced=1" >"$CLOCK"; }
write_clock
# time_passes SECONDS: for the board (its wall and boot-time clocks) and for
# the gateways, then a sync pass.
time_passes() {
    PASSED_MS=$((PASSED_MS + $1 * 1000))
    write_clock
    sim /_sim/clock -H 'Content-Type: application/json' -d "{\"advance_ms\":$(($1 * 1000))}" \
        >"$T/clock.json" || fail "POST /_sim/clock failed"
    expect "the simulator's clock moved" "$PASSED_MS" "$(jq .advance_ms "$T/clock.json" 2>/dev/null)"
    sleep 0.3 # the daemon reads its clock file every 100 ms
    api /v1/sync -X POST >/dev/null
}

cat >"$T/extra.json" <<'JSON'
{"qr_timeout_s": 90,
 "sync": {"backoff_base_ms": 30000, "backoff_max_ms": 60000}}
JSON
# Nobody pays by himself (amounts ending in 52): the test is the customer.
# WeChat refuses a close in an order's first 5 minutes, as it documents.
SIM_EXTRA_ARGS="--wechat-close-after-ms 300000"
sync_start "$T/extra.json"

row() { sim "/_sim/ledger?order_id=$1" | jq -c '.data[0]'; }
rowf() { row "$1" | jq -r ".$2"; }
# open ORDER BODY: a code or page shown, unpaid.
open_code() {
    charge "k-$1" "$1" "$2"
    expect "$1 create" "202 PENDING" "$ST $(field .state)"
}
# The customer tries to pay ORDER at the gateway: HTTP status of /_sim/pay.
customer_pays() {
    sim /_sim/pay -o "$T/pay.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        -d "{\"gateway\":\"$1\",\"order_id\":\"$2\"}"
}
# how_it_ended ORDER: the detail of the charge's move to CANCELED by its expiry.
how_it_ended() { api "/v1/charges/$1/events" | jq -r '[.data[] | select(.cause == "qr_expired")] | .[0].detail'; }
expect_expired() { # ORDER: ended by its expiry, exactly once, nothing captured
    expect "$1 state" CANCELED "$(state "$1")"
    expect "$1 error" qr_expired "$(charge_json "$1" | jq -r .error.code)"
    expect "$1 review" false "$(charge_json "$1" | jq -r .review)"
    expect "$1 charge.canceled events" 1 "$(events_of "$1" charge.canceled)"
    expect "$1 charge.succeeded events" 0 "$(events_of "$1" charge.succeeded)"
    expect "$1 captures" 0 "$(captures "$1")"
}

# ---- the creates carry the gateway's expiry ---------------------------------------------
open_code QE-ALI-LOST "$(alipay_qr 1252)"
open_code QE-ALI-SCAN "$(alipay_qr 2252)"
open_code QE-ALI-NOSCAN "$(alipay_qr 3252)"
open_code QE-ALI-RACE "$(alipay_qr 4252)"
open_code QE-WX-Q "$(wechat_qr 1252)"
open_code QE-WX-RACE "$(wechat_qr 2252)"
open_code QE-C2P "$(c2p_redirect 1252)"

expect "Alipay expiry field" timeout_express "$(rowf QE-ALI-LOST expiry_field)"
expect "Alipay timeout_express (90 s in whole minutes, rounded up)" 2m "$(rowf QE-ALI-LOST expiry)"
# expiry_after_create ORDER ZONE: seconds from the create to the expiry the
# gateway was sent (ZONE: what date(1) needs to read it).
expiry_after_create() {
    local r e c
    r=$(row "$1")
    e=$(jq -r .expiry <<<"$r")
    c=$(jq '.created_at / 1000 | floor' <<<"$r")
    echo $(($(date -d "$e$2" +%s) - c))
}
expect "WeChat expiry field" time_expire "$(rowf QE-WX-Q expiry_field)"
[[ "$(rowf QE-WX-Q expiry)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\+08:00$ ]] ||
    fail "WeChat time_expire is not RFC 3339 in China time: $(rowf QE-WX-Q expiry)"
d=$(expiry_after_create QE-WX-Q "")
[ "$d" -ge 88 ] && [ "$d" -le 91 ] || fail "WeChat time_expire is $d s after the create, want 90"
expect "2C2P expiry field" paymentExpiry "$(rowf QE-C2P expiry_field)"
[[ "$(rowf QE-C2P expiry)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9]{2}:[0-9]{2}:[0-9]{2}$ ]] ||
    fail "2C2P paymentExpiry is not yyyy-MM-dd HH:mm:ss: $(rowf QE-C2P expiry)"
d=$(expiry_after_create QE-C2P " +0700")
[ "$d" -ge 88 ] && [ "$d" -le 91 ] || fail "2C2P paymentExpiry (UTC+7) is $d s after the create, want 90"
log "each create carried the gateway's expiry"

# ---- 100 s later --------------------------------------------------------------------------
expect "/_sim/scan QE-ALI-SCAN" 200 "$(sim /_sim/scan -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/json' -d '{"gateway":"alipay","order_id":"QE-ALI-SCAN"}')"
expect "QE-ALI-RACE paid by its customer" 200 "$(customer_pays alipay QE-ALI-RACE)"
expect "QE-WX-RACE paid by its customer" 200 "$(customer_pays wechat QE-WX-RACE)"
# The first Alipay request from now on - the close of QE-ALI-LOST, the
# oldest due - is executed and its answer lost.
sim_fault '{"gateway":"alipay","mode":"http_500_after_commit","count":1}'
time_passes 100
for o in QE-ALI-LOST QE-ALI-SCAN QE-ALI-NOSCAN QE-ALI-RACE QE-WX-Q QE-WX-RACE QE-C2P; do
    wait_final "$o" 90
done
sim_clear
wait_notes 30
for o in QE-ALI-LOST QE-ALI-SCAN QE-ALI-NOSCAN QE-WX-Q QE-C2P; do expect_expired "$o"; done
# How each ended (the audit of its move to CANCELED says).
expect "QE-ALI-LOST (its close answer lost)" "closed, confirmed by query" \
    "$(how_it_ended QE-ALI-LOST)"
expect "QE-ALI-SCAN (scanned, closed)" "closed at the gateway" "$(how_it_ended QE-ALI-SCAN)"
expect "QE-ALI-NOSCAN (ACQ.TRADE_NOT_EXIST)" "closed at the gateway" \
    "$(how_it_ended QE-ALI-NOSCAN)"
for o in QE-WX-Q QE-C2P; do
    expect "$o (no close)" "expiry confirmed by query" "$(how_it_ended "$o")"
done
for o in QE-ALI-LOST QE-ALI-SCAN QE-ALI-NOSCAN; do
    expect "$o at the simulator" canceled "$(sim_status "$o")"
done
expect "QE-ALI-SCAN closes" 1 "$(rowf QE-ALI-SCAN closes)"
# No close where the gateway would refuse it or has none: the expiry sent
# is what ended them, and the simulator agrees.
for o in QE-WX-Q QE-C2P; do
    expect "$o closes sent" 0 "$(rowf "$o" closes)"
    expect "$o expired at the simulator" true "$(rowf "$o" expired)"
done
expect "QE-ALI-RACE closes (refused: it was paid)" 1 "$(rowf QE-ALI-RACE closes)"
expect "QE-WX-RACE closes" 0 "$(rowf QE-WX-RACE closes)"
for o in QE-ALI-RACE QE-WX-RACE; do
    expect_captured_once "$o"
    expect "$o charge.canceled events" 0 "$(events_of "$o" charge.canceled)"
done
log "100 s on: five codes expired once each, two late payments won"

# ---- 25 hours later ----------------------------------------------------------------------------
open_code QE-ALI-OLD "$(alipay_qr 5252)"
open_code QE-WX-CLOSE "$(wechat_qr 3252)"
time_passes $((25 * 3600))
for o in QE-ALI-OLD QE-WX-CLOSE; do wait_final "$o" 90; done
wait_notes 30
for o in QE-ALI-OLD QE-WX-CLOSE; do
    expect_expired "$o"
    expect "$o at the simulator" canceled "$(sim_status "$o")"
done
expect "QE-WX-CLOSE closes (an order older than 5 minutes)" 1 "$(rowf QE-WX-CLOSE closes)"
# The customer of each expired code tries to pay it now.
for gw_o in alipay:QE-ALI-OLD alipay:QE-ALI-LOST alipay:QE-ALI-SCAN wechat:QE-WX-Q \
    wechat:QE-WX-CLOSE 2c2p:QE-C2P; do
    o=${gw_o#*:}
    expect "$o paid 25 hours on" 409 "$(customer_pays "${gw_o%%:*}" "$o")"
    expect "$o captures after the attempt" 0 "$(captures "$o")"
done
sleep 1
for o in QE-ALI-OLD QE-ALI-LOST QE-WX-Q QE-C2P; do
    expect "$o state at the end" CANCELED "$(state "$o")"
    expect "$o charge.succeeded at the end" 0 "$(events_of "$o" charge.succeeded)"
done
log "25 hours on: closed, and nobody could pay an expired code"
pass
