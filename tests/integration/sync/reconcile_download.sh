#!/usr/bin/env bash
# reconcile_download.sh PAYTERM [ready|pending] - reconciliation with the
# bills the gateways serve (SPEC 19), through the real daemon and simulator:
# POST /v1/reconciliations downloads WeChat Pay's trade bill (GET
# /v3/bill/tradebill, then its file, SHA-1 checked) and Stripe's day of
# charges and refunds (paged lists) and compares them with the lane's
# records.  The simulator's books are changed the ways a gateway's can
# differ (/_sim/ledger/alter, /_sim/ledger/forget, a sale made at the
# gateway outside payterm), so every discrepancy kind is reached from real
# downloads.  "pending": the simulator's bills are not ready yet
# (--bill-ready-after), and the run says so.  "v2": WeChat Pay's bill
# through APIv2 POST /pay/downloadbill (gateways.wechat.bill_api "v2").
. "$(dirname "$0")/synclib.sh" "$@"
MODE=${2:-ready}
[ "$MODE" != pending ] || SIM_EXTRA_ARGS="--bill-ready-after 00:00"

if [ "$MODE" = v2 ]; then
    echo '{"sync": {"max_attempts": 10}, "gateways": {"wechat": {"bill_api": "v2"}}}' >"$T/extra.json"
elif [ "$MODE" = daily ]; then
    # The daily run, due at once: yesterday's bills at start.
    echo '{"sync": {"max_attempts": 10}, "reconcile": {"daily": true, "after": "00:00"}}' >"$T/extra.json"
else
    echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json"
fi
sync_start "$T/extra.json"
CFG=(-c "$T/base.json" -c "$T/sim/gateways.json" -c "$T/extra.json")
[ -z "$STORE_CONFIG" ] || CFG+=(-c "$STORE_CONFIG")
cli() { # cli ARGS... -> RC, OUT (stdout), ERR (stderr)
    RC=0
    OUT=$(timeout 120 "$PAYTERM" "$@" "${CFG[@]}" 2>"$T/cli.err" </dev/null) || RC=$?
    ERR=$(cat "$T/cli.err")
    [ "$RC" != 124 ] || fail "payterm $* did not end within 120 s"
}
expect_match() { [[ $3 =~ $2 ]] || fail "$1: '$3' does not match /$2/"; }
reconcile() { # reconcile KEY GATEWAY DATE -> ST, BODY (file), REPLAYED
    BODY=$T/run.json
    ST=$(curl -sS --max-time 120 -D "$T/run.h" -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/reconciliations" -H "Idempotency-Key: $1" -H 'Content-Type: application/json' \
        -d "{\"gateway\":\"$2\",\"date\":\"$3\"}")
    REPLAYED=0
    if grep -qi '^Idempotency-Replayed: *true' "$T/run.h"; then REPLAYED=1; fi
}
kinds() { jq -r '[.discrepancies[] | "\(.kind) \(.order_id)\(if .refund_id then "/" + .refund_id else "" end)"] | join("; ")' "$1"; }
sim_books() { sim "/_sim/ledger/$1" -f -H 'Content-Type: application/json' -d "$2" >/dev/null || fail "POST /_sim/ledger/$1 $2"; }

# The bill days: China time for WeChat Pay, UTC for Stripe.  Payments a
# minute before either midnight would be the next day's: wait it out.
while [ "$(date -u +%H%M)" -ge 2358 ] || [ "$(date -u -d '+8 hours' +%H%M)" -ge 2358 ]; do sleep 5; done
WX_DAY=$(date -u -d '+8 hours' +%F)
ST_DAY=$(date -u +%F)

paid() { # paid ORDER BODY
    charge "k-$1" "$1" "$2"
    wait_state "$1" SUCCESS 30
}
refund_paid() { # refund_paid ORDER REFUND_ID AMOUNT
    curl -sS -o /dev/null -X POST "$API/v1/charges/$1/refunds" -H "Idempotency-Key: k-$2" \
        -H 'Content-Type: application/json' -d "{\"refund_id\":\"$2\",\"amount\":$3}"
    REFUND=$2
    ok() { [ "$(api "/v1/refunds/$REFUND" | jq -r .state)" = SUCCESS ]; }
    wait_until 60 ok || fail "refund $2 is not SUCCESS: $(api "/v1/refunds/$2")"
}

if [ "$MODE" = daily ]; then
    # Yesterday in each bill time zone; the daemon ran both on its own.
    WX_YDAY=$(date -u -d '+8 hours -1 day' +%F) ST_YDAY=$(date -u -d '-1 day' +%F)
    ran() { [ "$(status_of_run "$1" "$2")" = 200 ]; }
    status_of_run() { curl -s -o /dev/null -w '%{http_code}' "$API/v1/reconciliations/$1/$2"; }
    wait_until 30 ran stripe "$ST_YDAY" || fail "no daily run of stripe $ST_YDAY"
    wait_until 30 ran wechat "$WX_YDAY" || fail "no daily run of wechat $WX_YDAY"
    expect "daily: stripe yesterday, done (no sale)" "done 0 []" \
        "$(api "/v1/reconciliations/stripe/$ST_YDAY" | jq -r '"\(.state) \(.matched) \(.discrepancies | tostring)"')"
    expect "daily: wechat yesterday, pending (no bill: no trade)" pending \
        "$(api "/v1/reconciliations/wechat/$WX_YDAY" | jq -r .state)"
    expect "daily: only yesterday" 404 "$(status_of_run stripe "$ST_DAY")"
    grep -q "reconciliation wechat $WX_YDAY: not done; tried again in 15 min" "$T"/payterm*.log ||
        fail "the pending day is not scheduled again: $(grep reconciliation "$T"/payterm*.log)"
    wait_until 30 ran alipay "$WX_YDAY" || fail "no daily run of alipay $WX_YDAY"
    expect "daily: alipay yesterday, done (an empty bill: no trade)" "done download 0" \
        "$(api "/v1/reconciliations/alipay/$WX_YDAY" | jq -r '"\(.state) \(.source) \(.matched)"')"
    pass
    exit 0
fi

if [ "$MODE" = pending ]; then
    paid DL-WX-P "$(wechat_barcode 1000)"
    reconcile k-pending wechat "$WX_DAY"
    expect "pending: 201" 201 "$ST"
    expect "pending: state" pending "$(jq -r .state "$BODY")"
    expect_match "pending: WeChat's own answer" 'STATEMENT_CREATING' "$(jq -r .error "$BODY")"
    expect "pending: the latest run" pending \
        "$(api "/v1/reconciliations/wechat/$WX_DAY" | jq -r .state)"
    expect "pending: no review" false "$(api /v1/charges/DL-WX-P | jq -r .review)"
    reconcile k-pending-alipay alipay "$WX_DAY"
    expect "pending, alipay: 201 pending" "201 pending" "$ST $(jq -r .state "$BODY")"
    expect_match "pending, alipay: Alipay's own answer" 'isp.bill_not_exist' "$(jq -r .error "$BODY")"
    # Yesterday's bill is ready (00:00 today): a run of it is done, and the
    # payment of today is no discrepancy of yesterday's.
    reconcile k-yesterday wechat "$(date -u -d '+8 hours -1 day' +%F)"
    expect "yesterday: 201 $(cat "$BODY")" "201 pending" "$ST $(jq -r .state "$BODY")"
    expect_match "yesterday: no bill (no trade that day)" 'NO_STATEMENT_EXIST' "$(jq -r .error "$BODY")"
    pass
    exit 0
fi

# ---- WeChat Pay ---------------------------------------------------------------------
paid DL-WX-A "$(wechat_barcode 1000)"
paid DL-WX-B "$(wechat_barcode 2000)"
paid DL-WX-C "$(wechat_barcode 1500)"
refund_paid DL-WX-A DL-WX-A-R1 300
refund_paid DL-WX-B DL-WX-B-R1 400

reconcile k-wx-1 wechat "$WX_DAY"
expect "wechat, books as taken: 201" 201 "$ST"
expect "wechat, books as taken: done, from a download" "done download" "$(jq -r '"\(.state) \(.source)"' "$BODY")"
expect "wechat, books as taken: no discrepancy" "" "$(kinds "$BODY")"
expect "wechat, books as taken: matched (3 payments, 2 refunds)" 5 "$(jq .matched "$BODY")"
expect "wechat, books as taken: the bill's side" '{"trades":3,"amount":4500,"refunds":2,"refunded":700}' "$(jq -c .bill "$BODY")"

# The books now say B was 21.00, D was taken in HKD, A's refund was 3.50;
# they know nothing of C, nor of B's refund; and they hold a sale and a
# refund made at WeChat Pay outside payterm (another till, the portal).
WX=$T/sim/gateways.json
WX_EP=$(jq -r .gateways.wechat.endpoint "$WX")
wx() { jq -r ".gateways.wechat.$1" "$WX"; }
outside_xml=$(jq -nc --arg a "$(wx appid)" --arg m "$(wx mchid)" --arg c "$WX_AUTH_CODE" \
    '{appid:$a,mch_id:$m,nonce_str:"outside0000000000000000000000001",sign_type:"HMAC-SHA256",out_trade_no:"DL-WX-OUTSIDE",body:"Outside",total_fee:"4200",fee_type:"CNY",spbill_create_ip:"127.0.0.1",auth_code:$c}' |
    "$PAYTERM" sign --gateway wechat-v2 --key-file "$T/sim/$(wx apiv2_key_file)" | jq -r .xml)
curl -sS --cacert "$T/sim/ca.pem" "$WX_EP/pay/micropay" -H 'Content-Type: text/xml' -d "$outside_xml" |
    grep -q '<result_code><!\[CDATA\[SUCCESS\]\]></result_code>' || fail "the outside wechat sale was not taken"
wx_refund_body='{"out_trade_no":"DL-WX-A","out_refund_no":"DL-WX-A-OUTSIDE","amount":{"refund":100,"total":1000,"currency":"CNY"}}'
wx_auth=$(printf '%s' "$wx_refund_body" | "$PAYTERM" sign --gateway wechat --key "$T/sim/$(wx private_key_file)" \
    --mchid "$(wx mchid)" --serial "$(wx serial_no)" --method POST --url /v3/refund/domestic/refunds \
    --timestamp "$(date +%s)" --nonce outside0000000000000000000000002 | jq -r .authorization)
curl -sS --cacert "$T/sim/ca.pem" "$WX_EP/v3/refund/domestic/refunds" -H "Authorization: $wx_auth" \
    -H 'Content-Type: application/json' -H 'Accept: application/json' -d "$wx_refund_body" |
    jq -e '.status == "SUCCESS" or .status == "PROCESSING"' >/dev/null || fail "the outside wechat refund was not made"
wx_refunded() { [ "$(sim "/_sim/ledger?gateway=wechat&order_id=DL-WX-A" | jq '[.. | objects | select(.order_id? == "DL-WX-A") | .refunded][0]')" = 400 ]; }
wait_until 30 wx_refunded || fail "the outside wechat refund did not succeed: $(sim "/_sim/ledger?gateway=wechat&order_id=DL-WX-A")"
paid DL-WX-D "$(wechat_barcode 1200)"
sim_books alter '{"gateway":"wechat","order_id":"DL-WX-B","amount":2100}'
sim_books alter '{"gateway":"wechat","order_id":"DL-WX-D","currency":"HKD"}'
sim_books alter '{"gateway":"wechat","refund_id":"DL-WX-A-R1","amount":350}'
sim_books forget '{"gateway":"wechat","order_id":"DL-WX-C"}'
sim_books forget '{"gateway":"wechat","refund_id":"DL-WX-B-R1"}'
reconcile k-wx-2 wechat "$WX_DAY"
cp "$BODY" "$T/wx2.json"
expect "wechat, books changed: 201 done" "201 done" "$ST $(jq -r .state "$BODY")"
expect "wechat, books changed: every kind" \
    "gateway_only DL-WX-OUTSIDE; local_only DL-WX-C; amount_mismatch DL-WX-B; currency_mismatch DL-WX-D; refund_gateway_only DL-WX-A/DL-WX-A-OUTSIDE; refund_local_only DL-WX-B/DL-WX-B-R1; refund_amount_mismatch DL-WX-A/DL-WX-A-R1" "$(kinds "$BODY")"
expect "wechat, books changed: B's amounts" "2000 2100" \
    "$(jq -r '.discrepancies[] | select(.kind == "amount_mismatch") | "\(.amount_local) \(.amount_gateway)"' "$BODY")"
expect "wechat: B under review" "true reconciliation_amount_mismatch" "$(api /v1/charges/DL-WX-B | jq -r '"\(.review) \(.review_reason)"')"
expect "wechat: C under review" "true reconciliation_local_only" "$(api /v1/charges/DL-WX-C | jq -r '"\(.review) \(.review_reason)"')"
expect "wechat: D under review" "true reconciliation_currency_mismatch" "$(api /v1/charges/DL-WX-D | jq -r '"\(.review) \(.review_reason)"')"
reconcile k-wx-2 wechat "$WX_DAY"
expect "wechat, the same key: replayed" "201 1" "$ST $REPLAYED"
cmp -s "$T/wx2.json" "$BODY" || fail "the same key's run differs: $(cat "$BODY")"
{ api "/v1/reconciliations/wechat/$WX_DAY"; } >"$T/wx2.get"
expect "wechat: GET serves the latest run" "$(cat "$T/wx2.json")" "$(cat "$T/wx2.get")"

if [ "$MODE" = v2 ]; then
    # Every bill came through downloadbill (the day, the day before, the
    # day after), none through APIv3's tradebill.
    expect "v2: no tradebill asked" 0 "$(grep -c 'GET /v3/bill/tradebill' "$T/sim.log" || true)"
    grep -q "POST /pay/downloadbill" "$T/sim.log" || fail "v2: no downloadbill in $T/sim.log"
    grep -q "downloadbill $WX_DAY: 5 rows" "$T/sim.log" || fail "v2: the day's bill: $(grep downloadbill "$T/sim.log")"
    # A day without trades: WeChat Pay's "No Bill Exist", pending as with APIv3.
    reconcile k-v2-empty wechat "$(date -u -d "$WX_DAY - 3 days" +%F)"
    expect "v2, a day without a bill: 201 pending" "201 pending" "$ST $(jq -r .state "$BODY")"
    expect_match "v2, a day without a bill: WeChat's own answer" 'No Bill Exist \(error_code 20002\)' "$(jq -r .error "$BODY")"
    # downloadbill failing (HTTP 500, WeChat's SYSTEMERROR): a failed run.
    sim_fault '{"gateway":"wechat","mode":"http_500_after_commit","count":-1,"path":"/pay/downloadbill"}'
    reconcile k-v2-down wechat "$WX_DAY"
    expect "v2, downloadbill failing: 201 failed" "201 failed" "$ST $(jq -r .state "$BODY")"
    sim_clear
    pass
    exit 0
fi

# A neighbouring day's bill that cannot be read fails the run: without it a
# payment at midnight would look like a discrepancy.
WX_BEFORE=$(date -u -d "$WX_DAY - 1 day" +%F)
sim_fault "{\"gateway\":\"wechat\",\"mode\":\"http_500_after_commit\",\"count\":-1,\"path\":\"/v3/bill/tradebill?bill_date=$WX_BEFORE\"}"
reconcile k-wx-3 wechat "$WX_DAY"
expect "wechat, the day before unreadable: 201 failed" "201 failed" "$ST $(jq -r .state "$BODY")"
expect "wechat, the day before unreadable: no discrepancy claimed" "null" "$(jq -c .discrepancies "$BODY")"
sim_clear
{ api "/v1/reconciliations/wechat/$WX_DAY"; } >"$T/wx3.get"
expect "wechat: a failed run is the latest" failed "$(jq -r .state "$T/wx3.get")"
# Tomorrow's bill (a run of today asks for it) is not there to be had,
# whatever the gateway answers for it (Alipay refuses the current day's):
# left out, not a failed run.
WX_AFTER=$(date -u -d "$WX_DAY + 1 day" +%F)
sim_fault "{\"gateway\":\"wechat\",\"mode\":\"http_500_after_commit\",\"count\":-1,\"path\":\"/v3/bill/tradebill?bill_date=$WX_AFTER\"}"
reconcile k-wx-4 wechat "$WX_DAY"
expect "wechat, tomorrow's bill refused: the run is done" "201 done" "$ST $(jq -r .state "$BODY")"
sim_clear

# ---- Stripe -----------------------------------------------------------------------------
paid DL-ST-A "$(stripe_card 1000)"
paid DL-ST-B "$(stripe_card 2500)"
paid DL-ST-C "$(stripe_card 700)"
paid DL-ST-D "$(stripe_card 900)"
refund_paid DL-ST-A DL-ST-A-R1 250
refund_paid DL-ST-B DL-ST-B-R1 100
# A sale made at Stripe outside payterm (another till, the dashboard).
SK=$(cat "$T/sim/stripe_secret_key")
curl -sS --cacert "$T/sim/ca.pem" -u "$SK:" "$(jq -r .gateways.stripe.endpoint "$T/sim/gateways.json")/v1/payment_intents" \
    -H 'Idempotency-Key: outside-1' -d amount=4200 -d currency=usd -d confirm=true \
    -d payment_method=pm_card_visa -d 'metadata[order_id]=DL-ST-OUTSIDE' | jq -e '.status == "succeeded"' >/dev/null ||
    fail "the outside sale was not taken"
# ... and a refund of A made there, named as payterm names its own.
curl -sS --cacert "$T/sim/ca.pem" -u "$SK:" "$(jq -r .gateways.stripe.endpoint "$T/sim/gateways.json")/v1/refunds" \
    -H 'Idempotency-Key: outside-2' -d "payment_intent=$(api /v1/charges/DL-ST-A | jq -r .gateway_trade_no)" \
    -d amount=100 -d 'metadata[order_id]=DL-ST-A' -d 'metadata[refund_id]=DL-ST-A-OUTSIDE' |
    jq -e '.status == "succeeded"' >/dev/null || fail "the outside stripe refund was not made"
sim_books alter '{"gateway":"stripe","order_id":"DL-ST-B","amount":2600}'
sim_books alter '{"gateway":"stripe","order_id":"DL-ST-D","currency":"EUR"}'
sim_books alter '{"gateway":"stripe","refund_id":"DL-ST-A-R1","amount":260}'
sim_books forget '{"gateway":"stripe","order_id":"DL-ST-C"}'
sim_books forget '{"gateway":"stripe","refund_id":"DL-ST-B-R1"}'
cli reconcile --gateway stripe --date "$ST_DAY"
expect "stripe via the CLI: exit status 3 ($ERR)" 3 "$RC"
printf '%s\n' "$OUT" >"$T/st.json"
expect "stripe: every kind" \
    "gateway_only DL-ST-OUTSIDE; local_only DL-ST-C; amount_mismatch DL-ST-B; currency_mismatch DL-ST-D; refund_gateway_only DL-ST-A/DL-ST-A-OUTSIDE; refund_local_only DL-ST-B/DL-ST-B-R1; refund_amount_mismatch DL-ST-A/DL-ST-A-R1" "$(kinds "$T/st.json")"
expect "stripe: the amounts of D (its currency the discrepancy)" "900 USD EUR" \
    "$(jq -r '.discrepancies[] | select(.kind == "currency_mismatch") | "\(.amount_local) \(.currency_local) \(.currency_gateway)"' "$T/st.json")"
expect "stripe: matched (A)" 1 "$(jq .matched "$T/st.json")"
expect_match "stripe via the CLI: names its key" 'Idempotency-Key cli-reconcile-stripe-' "$ERR"
cli reconcile --gateway stripe --date "$ST_DAY" --key fixed-1
expect "stripe, a named key: exit status" 3 "$RC"
FIRST=$OUT
sleep 1 # a new run would have another run_at
cli reconcile --gateway stripe --date "$ST_DAY" --key fixed-1
expect "stripe, the same key again: the same run, byte for byte" "$FIRST" "$OUT"
reconcile k-tomorrow stripe "$(date -u -d '+2 days' +%F)"
expect_match "a date after today: refused, naming it" '^date: ' "$(jq -r .error.message "$BODY")"

# ---- refusals: the request, an unreachable gateway, a gateway without downloads -----
reconcile "" wechat "$WX_DAY"
expect "no key" "400 idempotency_key_missing" "$ST $(jq -r .error.code "$BODY")"
reconcile k-bad-date wechat 2026-02-30
expect "a date that is none" "400 invalid_request" "$ST $(jq -r .error.code "$BODY")"
expect_match "names the field" '^date: ' "$(jq -r .error.message "$BODY")"
reconcile k-bad-gw paypal "$WX_DAY"
expect_match "a gateway that is none" '^gateway: ' "$(jq -r .error.message "$BODY")"
sim_fault '{"gateway":"wechat","mode":"refuse_connect","count":-1}'
reconcile k-wx-down wechat "$WX_DAY"
expect "wechat unreachable: a failed run" "201 failed" "$ST $(jq -r .state "$BODY")"
expect_match "wechat unreachable: says so" 'could not be asked' "$(jq -r .error "$BODY")"
sim_clear
expect "metrics keep the last done run" 1 \
    "$(curl -sS "$API/metrics" | awk '/^payterm_reconciliation_discrepancies\{gateway="wechat",kind="local_only"\}/ {print $2}')"
# ---- Alipay: the link, the zip, its GBK detail file -----------------------------------
paid DL-AP-A "$(alipay_barcode 1250)"
paid DL-AP-B "$(alipay_barcode 800)"
paid DL-AP-C "$(alipay_barcode 300)"
# A goods name with a comma and quotes: a quoted value in the bill (RFC 4180).
paid DL-AP-D "$(alipay_barcode 500 | sed 's/"subject":"Latte"/"subject":"Tea, \\"large\\""/')"
refund_paid DL-AP-A DL-AP-A-R1 250
refund_paid DL-AP-B DL-AP-B-R1 100
reconcile k-alipay-1 alipay "$WX_DAY"
expect "alipay, books as taken: done from a download, coverage bill" "201 done download bill" \
    "$ST $(jq -r '"\(.state) \(.source) \(.coverage)"' "$BODY")"
expect "alipay, books as taken: no discrepancy" "" "$(kinds "$BODY")"
expect "alipay, books as taken: the bill's side" '{"trades":4,"amount":2850,"refunds":2,"refunded":350}' "$(jq -c .bill "$BODY")"
sim_books alter '{"gateway":"alipay","order_id":"DL-AP-B","amount":900}'
sim_books forget '{"gateway":"alipay","order_id":"DL-AP-C"}'
sim_books forget '{"gateway":"alipay","refund_id":"DL-AP-B-R1"}'
sim_books alter '{"gateway":"alipay","refund_id":"DL-AP-A-R1","amount":260}'
# A sale and a refund made at Alipay outside payterm (another till, the
# merchant portal): gateway.do calls signed with the merchant's key.
alipay_call() { # alipay_call METHOD BIZ_JSON -> the answer's code
    local params sign ep=$(jq -r .gateways.alipay.endpoint "$T/sim/gateways.json")
    params=$(jq -nc --arg m "$1" --arg biz "$2" --arg ts "$(TZ=Asia/Shanghai date '+%F %T')" \
        --arg app "$(jq -r .gateways.alipay.app_id "$T/sim/gateways.json")" \
        '{app_id:$app,method:$m,charset:"utf-8",sign_type:"RSA2",timestamp:$ts,version:"1.0",biz_content:$biz}')
    sign=$("$PAYTERM" sign --gateway alipay --key "$T/sim/alipay_app_private_key.pem" <<<"$params" | jq -r .sign)
    local args=() k
    for k in app_id method charset sign_type timestamp version biz_content; do
        args+=(--data-urlencode "$k=$(jq -r --arg k "$k" '.[$k]' <<<"$params")")
    done
    curl -sS --cacert "$T/sim/ca.pem" "$ep" "${args[@]}" --data-urlencode "sign=$sign" |
        jq -r 'to_entries[0].value.code'
}
expect "an outside alipay sale is taken" 10000 "$(alipay_call alipay.trade.pay \
    "{\"out_trade_no\":\"DL-AP-OUTSIDE\",\"scene\":\"bar_code\",\"auth_code\":\"$AUTH_CODE\",\"total_amount\":\"42.00\",\"subject\":\"Outside\"}")"
expect "an outside alipay refund is made" 10000 "$(alipay_call alipay.trade.refund \
    '{"out_trade_no":"DL-AP-A","refund_amount":"1.00","out_request_no":"DL-AP-A-OUTSIDE"}')"
reconcile k-alipay-2 alipay "$WX_DAY"
# (Alipay's trade bill has no currency column - domestic acquiring, all
# CNY - so currency_mismatch cannot arise from it: docs/reconcile.md.)
expect "alipay, books changed: every kind its bill can show" \
    "gateway_only DL-AP-OUTSIDE; local_only DL-AP-C; amount_mismatch DL-AP-B; refund_gateway_only DL-AP-A/DL-AP-A-OUTSIDE; refund_local_only DL-AP-B/DL-AP-B-R1; refund_amount_mismatch DL-AP-A/DL-AP-A-R1" "$(kinds "$BODY")"
expect "alipay, books changed: matched A and D" 2 "$(jq .matched "$BODY")"
# The link lives 30 s; a link of a day not ready is Alipay's isp.bill_not_exist.
reconcile k-alipay-3 alipay "$(date -u -d '+8 hours +1 day' +%F)"
expect_match "alipay: tomorrow refused" '^date: ' "$(jq -r .error.message "$BODY")"
# ---- gateways without a downloaded bill: each local record asked about ------------------
paid DL-2C-A "$(c2p_redirect 150000)"
refund_paid DL-2C-A DL-2C-A-R1 50000
reconcile k-2c2p 2c2p "$ST_DAY"
expect "2c2p: done by queries, coverage local" "201 done queries local" \
    "$ST $(jq -r '"\(.state) \(.source) \(.coverage)"' "$BODY")"
expect "2c2p: the charge and its refund matched" "2 " "$(jq .matched "$BODY") $(kinds "$BODY")"
# Its books changed: what the inquiries answer changes.
paid DL-2C-B "$(c2p_redirect 80000)"
paid DL-2C-C "$(c2p_redirect 90000)"
paid DL-2C-D "$(c2p_redirect 70000)"
paid DL-2C-E "$(c2p_redirect 60000)"
refund_paid DL-2C-E DL-2C-E-R1 10000
sim_books forget '{"gateway":"2c2p","order_id":"DL-2C-D"}'
sim_books forget "{\"gateway\":\"2c2p\",\"refund_id\":\"$(api /v1/refunds/DL-2C-E-R1 | jq -r .gateway_refund_no)\"}"
sim_books alter '{"gateway":"2c2p","order_id":"DL-2C-B","amount":81000}'
sim_books alter '{"gateway":"2c2p","order_id":"DL-2C-C","currency":"SGD"}'
# (2C2P's refunds carry no merchant id: its books name one by its number.)
sim_books alter "{\"gateway\":\"2c2p\",\"refund_id\":\"$(api /v1/refunds/DL-2C-A-R1 | jq -r .gateway_refund_no)\",\"amount\":40000}"
reconcile k-2c2p-2 2c2p "$ST_DAY"
expect "2c2p, books changed: every kind queries can find (not the gateway_only ones)" \
    "local_only DL-2C-D; amount_mismatch DL-2C-B; currency_mismatch DL-2C-C; refund_local_only DL-2C-E/DL-2C-E-R1; refund_amount_mismatch DL-2C-A/DL-2C-A-R1" "$(kinds "$BODY")"
pass
