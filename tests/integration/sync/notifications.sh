#!/usr/bin/env bash
# notifications.sh PAYTERM - the gateways' notifications at the real daemon
# (SPEC sections 5 and 6), every gateway:
#   1. the simulator's own at-least-once delivery (deliberate duplicates, a
#      random delay, Alipay's WAIT_BUYER_PAY sent after TRADE_SUCCESS) racing
#      the sync engine's pay answers and queries -> one charge.succeeded per
#      order, the duplicates counted in /metrics;
#   2. captured notifications replayed by hand (re-signed where the gateway
#      signs at delivery time) -> the gateway's success reply, nothing new;
#   3. a validly signed notification whose amount differs from the charge ->
#      acknowledged, review raised (one charge.review event), no
#      charge.succeeded, the state unchanged; a replay of it changes nothing;
#   4. a notification with a bad signature -> 400 with the gateway's fail
#      body, counted as bad_signature, never applied; the same notification
#      validly signed is then applied once (so the 400 was the signature's);
#   5. validly signed notifications that must not bind (SPEC section 5): a
#      Stripe event naming an Alipay charge's order id, another
#      PaymentIntent with a Stripe charge's order id, another merchant's app
#      id / mchid / appid / merchantID, a field missing, a trade the gateway
#      never had -> acknowledged, counted as foreign, audited, nothing moved.
# The daemon never polls here (backoff of 10 minutes): what moves a charge is
# the notification, bound by its trade number or confirmed by the daemon's
# own query, never the sync engine finding the payment by itself.  Where a
# test forges a notification of a paid trade, the simulated customer pays
# first (POST /_sim/pay, which sends no notification) and the forged one
# carries the gateway's own trade number, as the real one would.
# Notifications are forged with `payterm sign` (Alipay RSA2 with the
# simulator's Alipay key, Stripe HMAC with the whsec, 2C2P JWT with the
# merchant secret) and the wxforge helper (WeChat: AES-256-GCM resource and
# the platform key's signature), all from the simulator's directory.
. "$(dirname "$0")/synclib.sh" "$@"
WXFORGE=${PT_WXFORGE:?PT_WXFORGE must name the wxforge helper (set by CMake)}
echo '{"sync": {"backoff_base_ms": 600000, "backoff_max_ms": 600000}}' >"$T/no-polling.json"
sync_start "$T/no-polling.json"
GWJ=$T/sim/gateways.json
ALIPAY_APP_ID=$(jq -r .gateways.alipay.app_id "$GWJ")
WX_MCHID=$(jq -r .gateways.wechat.mchid "$GWJ")
WX_APPID=$(jq -r .gateways.wechat.appid "$GWJ")
WX_SERIAL=$(jq -r .gateways.wechat.platform_serial "$GWJ")
C2P_MID=$(jq -r '.gateways["2c2p"].merchant_id' "$GWJ")

# post_notify GATEWAY BODYFILE [curl args] -> NST (status), NBODY (reply text)
post_notify() {
    local path ctype
    case $1 in
    alipay) path=/notify/alipay ctype='application/x-www-form-urlencoded; charset=utf-8' ;;
    wechat) path=/notify/wechat ctype=application/json ;;
    stripe) path=/webhooks/stripe ctype=application/json ;;
    2c2p) path=/notify/2c2p ctype=application/json ;;
    esac
    NST=$(curl -sS --max-time 10 -o "$T/notify.reply" -w '%{http_code}' -X POST "$API$path" \
        -H "Content-Type: $ctype" --data-binary "@$2" "${@:3}")
    NBODY=$(cat "$T/notify.reply")
}
ok_reply() { # the gateway's exact "received" reply
    case $1 in
    alipay) echo success ;;
    wechat) echo '{"code":"SUCCESS"}' ;;
    stripe) echo '{"received":true}' ;;
    2c2p) echo '' ;;
    esac
}
fail_reply() {
    case $1 in
    alipay) echo fail ;;
    wechat) echo '{"code":"FAIL","message":"signature verification failed"}' ;;
    stripe) echo '{"error":"invalid signature"}' ;;
    2c2p) echo 'invalid signature' ;;
    esac
}
notify_metric() { metric payterm_notifications_total "gateway=\"$1\",result=\"$2\""; }
event_count() { all_events | jq 'length'; }

# ---- forging ----------------------------------------------------------------------
# forge GATEWAY ORDER AMOUNT ID OUT [bad]: a success notification for ORDER
# paying AMOUNT minor units, dedup id ID, written to OUT (Stripe and WeChat
# also OUT.h with the signature headers).  With "bad" the signature is
# broken (one character of it changed), everything else left valid.  The
# trade number is the simulator's for ORDER (what the gateway would send);
# F_TRADE, F_APP (Alipay app_id, WeChat appid), F_MCH (WeChat mchid, 2C2P
# merchantID) override a field, "-" leaves it out.
forge() {
    local gw=$1 o=$2 amount=$3 id=$4 out=$5 bad=${6:-}
    local tn=${F_TRADE:-$(sim_trade_no "$gw" "$o")}
    [ -n "$tn" ] || tn="2026113022001$id"
    local app=${F_APP:-} mch=${F_MCH:-}
    case $gw in
    alipay)
        local dec
        dec=$(printf '%d.%02d' $((amount / 100)) $((amount % 100)))
        jq -n --arg o "$o" --arg a "$dec" --arg id "$id" --arg app "${app:-$ALIPAY_APP_ID}" \
            --arg tn "$tn" '{
            gmt_create: "2026-11-30 13:00:00", gmt_payment: "2026-11-30 13:00:05",
            charset: "utf-8", notify_time: "2026-11-30 13:00:06", subject: "Forged",
            buyer_id: "2088102177846875", version: "1.0", notify_id: $id,
            notify_type: "trade_status_sync", out_trade_no: $o, total_amount: $a,
            receipt_amount: $a, buyer_pay_amount: $a, trade_status: "TRADE_SUCCESS",
            trade_no: $tn, auth_app_id: $app, app_id: $app,
            seller_id: "2088102177649450"} | with_entries(select(.value != "-"))' >"$out.params"
        local sign
        # Alipay signs a notification over every field but sign and sign_type.
        sign=$("$PAYTERM" sign --gateway alipay --key "$T/sim/alipay_private_key.pem" <"$out.params" | jq -r .sign)
        [ -z "$bad" ] || sign=$(corrupt "$sign")
        jq -r --arg s "$sign" '. + {sign_type: "RSA2", sign: $s}
            | to_entries | map("\(.key | @uri)=\(.value | @uri)") | join("&")' "$out.params" |
            tr -d '\n' >"$out"
        ;;
    stripe)
        local pi=${F_TRADE:-}
        [ -n "$pi" ] || pi=$(charge_json "$o" | jq -r '.gateway_trade_no // "pi_unknown"')
        jq -cn --arg o "$o" --argjson a "$amount" --arg id "$id" --arg pi "$pi" '{
            id: $id, object: "event", api_version: "2024-06-20", created: now | floor,
            data: {object: {id: $pi, object: "payment_intent", amount: $a, amount_received: $a,
                            currency: "usd", metadata: {order_id: $o}, status: "succeeded"}},
            livemode: false, pending_webhooks: 1, type: "payment_intent.succeeded"}' |
            tr -d '\n' >"$out"
        local header
        header=$("$PAYTERM" sign --gateway stripe --secret-file "$T/sim/stripe_webhook_secret" \
            --timestamp "$(date +%s)" <"$out" | jq -r .header)
        [ -z "$bad" ] || header=$(corrupt "$header")
        printf 'Stripe-Signature: %s\n' "$header" >"$out.h"
        ;;
    2c2p)
        local dec token
        dec=$(printf '%d.%02d' $((amount / 100)) $((amount % 100)))
        jq -cn --arg o "$o" --argjson a "$dec" --arg id "$id" --arg m "${mch:-$C2P_MID}" \
            --arg tn "$tn" '{
            merchantID: $m, invoiceNo: $o, amount: $a, currencyCode: "THB",
            transactionDateTime: "20261130130005", agentCode: "KTB", channelCode: "VI",
            approvalCode: "720931", referenceNo: $id, tranRef: $tn, respCode: "0000",
            respDesc: "Success"} | with_entries(select(.value != "-"))' | tr -d '\n' >"$out.payload"
        token=$("$PAYTERM" sign --gateway 2c2p --secret-file "$T/sim/2c2p_secret_key" <"$out.payload" | jq -r .token)
        [ -z "$bad" ] || token=$(corrupt "$token")
        jq -cn --arg t "$token" '{payload: $t}' | tr -d '\n' >"$out"
        ;;
    wechat)
        jq -cn --arg o "$o" --argjson a "$amount" --arg m "${mch:-$WX_MCHID}" \
            --arg app "${app:-$WX_APPID}" --arg tn "$tn" '{
            amount: {currency: "CNY", payer_currency: "CNY", payer_total: $a, total: $a},
            appid: $app, attach: "", bank_type: "OTHERS", mchid: $m, out_trade_no: $o,
            payer: {openid: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}, promotion_detail: [],
            success_time: "2026-11-30T13:00:05+08:00", trade_state: "SUCCESS",
            trade_state_desc: "支付成功", trade_type: "NATIVE", transaction_id: $tn}
            | with_entries(select(.value != "-"))' >"$out.plain"
        "$WXFORGE" body "$T/sim" "EV-$id" <"$out.plain" >"$out"
        "$WXFORGE" headers "$T/sim" "$WX_SERIAL" <"$out" >"$out.h"
        if [ -n "$bad" ]; then
            local sig
            sig=$(sed -n 's/^Wechatpay-Signature: //p' "$out.h")
            sed -i "s|^Wechatpay-Signature: .*|Wechatpay-Signature: $(corrupt "$sig")|" "$out.h"
        fi
        ;;
    esac
}
# sim_trade_no GATEWAY ORDER: the simulator's trade number for ORDER ("" if none).
sim_trade_no() {
    sim "/_sim/ledger?gateway=$1&order_id=$2" | jq -r '.data[0].trade_no // ""'
}
# sim_pay GATEWAY ORDER: the simulated customer pays ORDER now; the gateway
# sends no notification of it.
sim_pay() {
    local r
    r=$(sim /_sim/pay -H 'Content-Type: application/json' \
        -d "$(jq -cn --arg g "$1" --arg o "$2" '{gateway: $g, order_id: $o}')")
    [ "$(jq -r .status <<<"$r")" = captured ] || fail "POST /_sim/pay $1 $2: $r"
}
# corrupt TEXT: the same text with one character of its middle changed.
corrupt() {
    local s=$1 i=$((${#1} / 2)) c
    c=${s:i:1}
    if [ "$c" = A ]; then c=B; else c=A; fi
    printf '%s%s%s' "${s:0:i}" "$c" "${s:i+1}"
}
headers_of() { # curl -H arguments from OUT.h
    local -n _arr=$2
    _arr=()
    [ -f "$1.h" ] || return 0
    while IFS= read -r line; do _arr+=(-H "$line"); done <"$1.h"
}
send_forged() { # send_forged GATEWAY OUT
    local hs
    headers_of "$2" hs
    post_notify "$1" "$2" "${hs[@]}"
}

# ---- 1. the simulator's own deliveries ------------------------------------------------
log "1. charges the simulated customers pay; their notifications race the sync engine"
declare -A PAID=([NT-ALI-BAR]=alipay.barcode [NT-ALI-QR]=alipay.qr [NT-WX-QR]=wechat.qr
    [NT-STR-CARD]=stripe.card_on_file [NT-2C2P-RD]=2c2p.redirect)
for o in "${!PAID[@]}"; do
    charge "k-$o" "$o" "$(body_for "${PAID[$o]}" 2300)"
    case $ST in 201 | 202) ;; *) fail "$o: POST /v1/charges answered $ST: $(field -c .)" ;; esac
done
for o in "${!PAID[@]}"; do wait_state "$o" SUCCESS 30; done
wait_notes 40
notes=$(sim /_sim/notifications)
for gw in alipay wechat stripe 2c2p; do
    sent_dups=$(jq --arg g "$gw" '[.data[] | select(.gateway == $g and .duplicate and .delivered)] | length' <<<"$notes")
    [ "$sent_dups" -ge 1 ] || fail "the simulator delivered no duplicate $gw notification: $(jq -c --arg g "$gw" '[.data[] | select(.gateway == $g)]' <<<"$notes")"
    # Each deliberate duplicate is acknowledged and counted (a delivery the
    # simulator timed out on and retried would count once more).
    counted=$(notify_metric "$gw" duplicate)
    [ "$counted" -ge "$sent_dups" ] || fail "$gw duplicates counted by the daemon: expected >= $sent_dups, got $counted"
done
reordered=$(jq '[.data[] | select(.gateway == "alipay" and .kind == "WAIT_BUYER_PAY" and .delivered)] | length' <<<"$notes")
expect "Alipay WAIT_BUYER_PAY notifications delivered after the success" 1 "$reordered"
# The late WAIT_BUYER_PAY (an older state) was recorded and ignored.
expect "Alipay notifications ignored" 1 "$(notify_metric alipay ignored)"
for o in "${!PAID[@]}"; do expect_captured_once "$o"; done
EVENTS_BEFORE=$(event_count)
log "   5 orders, 5 captures, 5 charge.succeeded; duplicates acknowledged and ignored"

# ---- 2. replays by hand --------------------------------------------------------------
log "2. captured notifications replayed by hand"
dump_note() { # dump_note ID FILE: the body the simulator delivered
    sqlite3 -readonly "$T/sim/sim.db" "SELECT writefile('$2', body) FROM outbox WHERE id = $1" >/dev/null
}
for gw in alipay wechat stripe 2c2p; do
    for id in $(jq -r --arg g "$gw" '.data[] | select(.gateway == $g and .delivered and (.duplicate | not)) | .id' <<<"$notes"); do
        f=$T/replay-$id
        dump_note "$id" "$f"
        [ -s "$f" ] || fail "cannot read notification $id from $T/sim/sim.db"
        hs=()
        case $gw in
        stripe) # signed at delivery time: sign the same event again, now
            hs=(-H "Stripe-Signature: $("$PAYTERM" sign --gateway stripe --secret-file "$T/sim/stripe_webhook_secret" --timestamp "$(date +%s)" <"$f" | jq -r .header)")
            ;;
        wechat)
            "$WXFORGE" headers "$T/sim" "$WX_SERIAL" <"$f" >"$f.h"
            headers_of "$f" hs
            ;;
        esac
        kind=$(jq -r --argjson i "$id" '.data[] | select(.id == $i) | .kind' <<<"$notes")
        # An event payterm does not act on (Stripe's payment_intent.created)
        # is ignored every time; any other is recorded once, then a duplicate.
        what=duplicate
        [ "$kind" != payment_intent.created ] || what=ignored
        before=$(notify_metric "$gw" $what)
        post_notify "$gw" "$f" "${hs[@]}"
        expect "$gw replay of notification $id ($kind): status" 200 "$NST"
        expect "$gw replay of notification $id ($kind): reply" "$(ok_reply "$gw")" "$NBODY"
        expect "$gw replay of notification $id ($kind) counted as $what" $((before + 1)) "$(notify_metric "$gw" $what)"
    done
done
expect "events after the replays" "$EVENTS_BEFORE" "$(event_count)"
for o in "${!PAID[@]}"; do expect "$o state after the replays" SUCCESS "$(state "$o")"; done
log "   every replay acknowledged with the gateway's reply, no new event"

# ---- 3. amount mismatch ------------------------------------------------------------------
# Orders the simulated customer never pays (amounts ending in 52), so the only
# success the daemon can hear of is the forged one.
log "3. validly signed notifications with an amount that differs from the charge"
declare -A MIS=([NT-MIS-ALI]=alipay.qr [NT-MIS-WX]=wechat.qr [NT-MIS-STR]=stripe.card_on_file [NT-MIS-2C2P]=2c2p.redirect)
for o in "${!MIS[@]}"; do
    charge "k-$o" "$o" "$(body_for "${MIS[$o]}" 1252)"
    expect "$o first answer" 202 "$ST"
    wait_state "$o" PENDING 20
done
n=0
for o in "${!MIS[@]}"; do
    gw=${MIS[$o]%%.*}
    n=$((n + 1))
    f=$T/mismatch-$gw
    sim_pay "$gw" "$o" # the gateway took 12.52; its notification says 12.53
    forge "$gw" "$o" 1253 "42000000000000009$n" "$f"
    before=$(notify_metric "$gw" review)
    send_forged "$gw" "$f"
    expect "$o mismatched notification: status" 200 "$NST"
    expect "$o mismatched notification: reply" "$(ok_reply "$gw")" "$NBODY"
    c=$(charge_json "$o")
    expect "$o review after the mismatch" true "$(jq -r .review <<<"$c")"
    case $(jq -r .review_reason <<<"$c") in amount_mismatch*) ;; *) fail "$o review_reason: expected amount_mismatch..., got $(jq -c .review_reason <<<"$c")" ;; esac
    expect "$o state after the mismatch" PENDING "$(jq -r .state <<<"$c")"
    expect "$o counted as review" $((before + 1)) "$(notify_metric "$gw" review)"
    send_forged "$gw" "$f" # the gateway delivers it again
    expect "$o mismatched notification again: status" 200 "$NST"
    expect "$o charge.succeeded events" 0 "$(events_of "$o" charge.succeeded)"
    expect "$o charge.review events" 1 "$(events_of "$o" charge.review)"
    expect "$o captures at the simulator" 1 "$(captures "$o")"
done
log "   4 mismatches: acknowledged, review raised once, nothing fulfilled"

# ---- 4. bad signatures ----------------------------------------------------------------
log "4. notifications with a bad signature"
declare -A BAD=([NT-BAD-ALI]=alipay.qr [NT-BAD-WX]=wechat.qr [NT-BAD-STR]=stripe.card_on_file [NT-BAD-2C2P]=2c2p.redirect)
for o in "${!BAD[@]}"; do
    charge "k-$o" "$o" "$(body_for "${BAD[$o]}" 1352)"
    expect "$o first answer" 202 "$ST"
    wait_state "$o" PENDING 20
done
n=0
for o in "${!BAD[@]}"; do
    gw=${BAD[$o]%%.*}
    n=$((n + 1))
    f=$T/bad-$gw
    # The right amount: only the signature is wrong.
    forge "$gw" "$o" 1352 "42000000000000008$n" "$f" bad
    before=$(notify_metric "$gw" bad_signature)
    events=$(event_count)
    send_forged "$gw" "$f"
    expect "$o bad signature: status" 400 "$NST"
    expect "$o bad signature: reply" "$(fail_reply "$gw")" "$NBODY"
    expect "$o bad signature counted" $((before + 1)) "$(notify_metric "$gw" bad_signature)"
    expect "$o bad signature: state" PENDING "$(state "$o")"
    expect "$o bad signature: review" false "$(charge_json "$o" | jq -r .review)"
    expect "$o bad signature: events" "$events" "$(event_count)"
    # The same notification, signed properly, is applied (exactly once);
    # the gateway has taken the money by then.
    sim_pay "$gw" "$o"
    forge "$gw" "$o" 1352 "42000000000000008$n" "$f"
    send_forged "$gw" "$f"
    expect "$o good signature: status" 200 "$NST"
    expect "$o good signature: state" SUCCESS "$(state "$o")"
    send_forged "$gw" "$f"
    expect "$o charge.succeeded events" 1 "$(events_of "$o" charge.succeeded)"
done
bad_total=$(metric payterm_notifications_total 'result="bad_signature"')
expect "bad signatures in /metrics" 4 "$bad_total"
log "   4 bad signatures: 400 with each gateway's fail body, counted, never applied"

# ---- 5. notifications that must not bind ---------------------------------------------------
log "5. validly signed notifications bound to no charge of ours"
# expect_foreign WHAT GATEWAY ORDER STATE TRADE: the last notification was
# acknowledged and counted foreign, and ORDER is unchanged (STATE, TRADE).
expect_foreign() {
    local what=$1 gw=$2 o=$3 want_state=$4 want_trade=$5 c
    expect "$what: status" 200 "$NST"
    expect "$what: reply" "$(ok_reply "$gw")" "$NBODY"
    expect "$what: counted foreign" $((FOREIGN + 1)) "$(notify_metric "$gw" foreign)"
    c=$(charge_json "$o")
    expect "$what: $o state" "$want_state" "$(jq -r .state <<<"$c")"
    expect "$what: $o trade number" "$want_trade" "$(jq -r '.gateway_trade_no // ""' <<<"$c")"
    expect "$what: $o review" false "$(jq -r .review <<<"$c")"
    expect "$what: $o events" "$EVENTS_OF_O" "$(all_events | jq --arg o "$o" '[.[] | select(.order_id == $o)] | length')"
    expect "$what: $o audited" 1 "$(api "/v1/charges/$o/events" | jq '[.data[] | select(.cause == "notification_foreign")] | length')"
}
foreign_case() { # foreign_case WHAT GATEWAY ORDER ID [F_* overrides via env]
    FOREIGN=$(notify_metric "$2" foreign)
    EVENTS_OF_O=$(all_events | jq --arg o "$3" '[.[] | select(.order_id == $o)] | length')
    local before_state before_trade
    before_state=$(state "$3")
    before_trade=$(charge_json "$3" | jq -r '.gateway_trade_no // ""')
    forge "$2" "$3" "$(charge_json "$3" | jq -r .amount)" "$4" "$T/foreign-$4"
    send_forged "$2" "$T/foreign-$4"
    expect_foreign "$1" "$2" "$3" "$before_state" "$before_trade"
}
# a. A Stripe event naming an Alipay charge's order id (two lanes, one
#    Stripe account, per-lane order numbers).
charge k-NT-FX-ALI NT-FX-ALI "$(body_for alipay.qr 1452)"
wait_state NT-FX-ALI PENDING 20
F_TRADE=pi_other_lane foreign_case "Stripe event for an Alipay charge" stripe NT-FX-ALI evt_fx_1
# b. Another PaymentIntent with a Stripe charge's metadata.order_id.
charge k-NT-FX-STR NT-FX-STR "$(body_for stripe.card_on_file 1450)"
wait_state NT-FX-STR SUCCESS 20
F_TRADE=pi_other_lane foreign_case "another PaymentIntent, same order id" stripe NT-FX-STR evt_fx_2
# c. Another merchant's ids, or none, on paid trades of ours.
for spec in "alipay.qr NT-FX-ALI2 F_APP=2021009999999999" "wechat.qr NT-FX-WX1 F_APP=wx0000000000000000" \
    "wechat.qr NT-FX-WX2 F_MCH=1900009999" "wechat.qr NT-FX-WX3 F_APP=-" "2c2p.redirect NT-FX-2C1 F_MCH=JT99" \
    "2c2p.redirect NT-FX-2C2 F_MCH=-"; do
    read -r gm o override <<<"$spec"
    gw=${gm%%.*}
    charge "k-$o" "$o" "$(body_for "$gm" 1552)"
    wait_state "$o" PENDING 20
    sim_pay "$gw" "$o"
    eval "$override foreign_case \"$gw notification with $override\" $gw $o fx-$o"
done
# d. A trade the gateway never had for this order (a made-up number, the
#    charge's own trade not known yet): the daemon's query does not confirm it.
charge k-NT-FX-WX4 NT-FX-WX4 "$(body_for wechat.qr 1652)"
wait_state NT-FX-WX4 PENDING 20
F_TRADE=4200000000000000777 foreign_case "a trade WeChat does not know" wechat NT-FX-WX4 fx-wx4
expect "foreign notifications in /metrics" 9 "$(metric payterm_notifications_total 'result="foreign"')"
log "   9 notifications of other gateways, merchants and trades: acknowledged, counted, nothing moved"

wait_notes 30
expect "charge.succeeded events for one order twice" 0 \
    "$(all_events | jq '[.[] | select(.type == "charge.succeeded") | .order_id] | length - (unique | length)')"
pass
