#!/usr/bin/env bash
# reconcile.sh PAYTERM - a gateway's bill of a day against the lane's records
# (SPEC 19), through the real daemon, simulator and CLI: WeChat Pay payments
# and a refund taken through payterm, then WeChat's trade bill of the day as
# the merchant downloads it - one line altered, one missing, one payterm never
# took - given to `payterm reconcile --bill`.  What the shop relies on: each
# discrepancy found by kind and nothing else, the local charges concerned put
# under review (audited once per kind, however often the day is run), the run
# served by GET /v1/reconciliations/{gateway}/{date} byte for byte, a bill
# that does not add up refused whole with its line named.
. "$(dirname "$0")/synclib.sh" "$@"

echo '{"sync": {"max_attempts": 10}}' >"$T/extra.json"
sync_start "$T/extra.json"
CFG=(-c "$T/base.json" -c "$T/sim/gateways.json" -c "$T/extra.json")
[ -z "$STORE_CONFIG" ] || CFG+=(-c "$STORE_CONFIG")

cli() { # cli ARGS... -> RC, OUT (stdout), ERR (stderr)
    RC=0
    OUT=$(timeout 60 "$PAYTERM" "$@" "${CFG[@]}" 2>"$T/cli.err" </dev/null) || RC=$?
    ERR=$(cat "$T/cli.err")
    [ "$RC" != 124 ] || fail "payterm $* did not end within 60 s"
}
expect_match() { [[ $3 =~ $2 ]] || fail "$1: '$3' does not match /$2/"; }
status_of() { curl -s -o /dev/null -w '%{http_code}' "$API$1"; }

# WeChat's bill day is China time (+08:00).  Payments a minute before its
# midnight would be tomorrow's bill: wait that minute out.
china_clock() { date -u -d '+8 hours' +%H%M; }
while [ "$(china_clock)" -ge 2358 ]; do sleep 5; done
DAY=$(date -u -d '+8 hours' +%F)

paid() { # paid ORDER AMOUNT
    charge "k-$1" "$1" "$(wechat_barcode "$2")"
    wait_state "$1" SUCCESS 30
}
paid RECON-WX-A 1000
paid RECON-WX-B 2000
paid RECON-WX-C 1500
cli refund RECON-WX-A --refund-id RECON-WX-A-R1 --amount 300
expect "refund RECON-WX-A-R1 ($ERR)" 0 "$RC"
refund_paid() { [ "$(api /v1/refunds/RECON-WX-A-R1 | jq -r .state)" = SUCCESS ]; }
wait_until 60 refund_paid || fail "refund RECON-WX-A-R1 is not SUCCESS: $(api /v1/refunds/RECON-WX-A-R1)"
trade_no() { api "/v1/charges/$1" | jq -r .gateway_trade_no; }

# ---- the bill, in WeChat Pay's trade bill layout (docs/reconcile.md) ---------------
HEADER='交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注'
SUM_HEADER='总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额'
pay_row() { # pay_row ORDER TRADE_NO YUAN
    printf '`%s 10:00:00,`wxd678efh567hg6787,`1230000109,`0,`,`%s,`%s,`oUpF8uMu,`MICROPAY,`SUCCESS,`OTHERS,`CNY,`%s,`0.00,`0,`0,`0.00,`0.00,`,`,`Dumplings,`,`0.00000,`0.60%%,`%s,`0.00,`\n' \
        "$DAY" "$2" "$1" "$3" "$3"
}
refund_row() { # refund_row ORDER TRADE_NO REFUND_ID REFUND_NO YUAN
    printf '`%s 11:00:00,`wxd678efh567hg6787,`1230000109,`0,`,`%s,`%s,`oUpF8uMu,`MICROPAY,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`%s,`%s,`%s,`0.00,`ORIGINAL,`SUCCESS,`Dumplings,`,`0.00000,`0.60%%,`0.00,`%s,`\n' \
        "$DAY" "$2" "$1" "$4" "$3" "$5" "$5"
}
bill() { # bill ROWS TOTAL_COUNT ORDER_TOTAL REFUND_TOTAL > file
    printf '%s\n%s%s\n`%s,`%s,`%s,`0.00,`0.00000,`%s,`%s\n' "$HEADER" "$1" "$SUM_HEADER" \
        "$2" "$3" "$4" "$3" "$4"
}
A=$(trade_no RECON-WX-A) B=$(trade_no RECON-WX-B)
# A as taken, B for 21.00 instead of 20.00, C missing, a sale payterm never
# made (X), A's refund as made.
ROWS=$(pay_row RECON-WX-A "$A" 10.00; pay_row RECON-WX-B "$B" 21.00
    pay_row RECON-WX-X 4200000000000000000099 42.00
    refund_row RECON-WX-A "$A" RECON-WX-A-R1 50300000000000000001 3.00)
bill "$ROWS
" 4 73.00 3.00 >"$T/bill.csv"

expect "no run yet" 404 "$(status_of "/v1/reconciliations/wechat/$DAY")"
cli reconcile --gateway wechat --date "$DAY" --bill "$T/bill.csv"
expect "reconcile: exit status 3, discrepancies ($ERR)" 3 "$RC"
printf '%s\n' "$OUT" >"$T/run1.json"
kinds() { jq -r '[.discrepancies[] | "\(.kind) \(.order_id)"] | join("; ")' "$1"; }
expect "reconcile: the discrepancies" \
    "gateway_only RECON-WX-X; local_only RECON-WX-C; amount_mismatch RECON-WX-B" "$(kinds "$T/run1.json")"
expect "reconcile: B's amounts" "2000 2100" \
    "$(jq -r '.discrepancies[] | select(.kind == "amount_mismatch") | "\(.amount_local) \(.amount_gateway)"' "$T/run1.json")"
expect "reconcile: matched (A, A's refund)" 2 "$(jq .matched "$T/run1.json")"
expect "reconcile: the bill's side" '{"trades":3,"amount":7300,"refunds":1,"refunded":300}' \
    "$(jq -c .bill "$T/run1.json")"
expect "reconcile: payterm's side" '{"charges":3,"amount":4500,"refunds":1,"refunded":300}' \
    "$(jq -c .local "$T/run1.json")"
expect_match "reconcile: stderr" '2 matched, 3 discrepancies' "$ERR"
{ api "/v1/reconciliations/wechat/$DAY"; echo; } >"$T/get1.json" # the CLI ends its line
cmp -s "$T/run1.json" "$T/get1.json" || fail "GET differs from the run: $(cat "$T/get1.json")"

# ---- the reviews: B and C under review, audited once; A and X not -------------------
review_of() { api "/v1/charges/$1" | jq -r '"\(.review) \(.review_reason)"'; }
expect "B under review" "true reconciliation_amount_mismatch" "$(review_of RECON-WX-B)"
expect "C under review" "true reconciliation_local_only" "$(review_of RECON-WX-C)"
expect "A not under review" "false null" "$(review_of RECON-WX-A)"
audits() { api "/v1/charges/$1/events" | jq --arg r "$2" '[.data[] | select(.cause == "review_raised" and (.detail // "" | endswith($r)))] | length'; }
expect "B's review audited once" 1 "$(audits RECON-WX-B reconciliation_amount_mismatch)"
expect "a charge.review event for C" 1 "$(events_of RECON-WX-C charge.review)"

# ---- /metrics: the day's discrepancies by kind ---------------------------------------
metrics() { curl -sS "$API/metrics"; }
expect "metrics: gateway_only" 1 "$(metrics | awk '/^payterm_reconciliation_discrepancies\{gateway="wechat",kind="gateway_only"\}/ {print $2}')"
expect "metrics: amount_mismatch" 1 "$(metrics | awk '/^payterm_reconciliation_discrepancies\{gateway="wechat",kind="amount_mismatch"\}/ {print $2}')"
expect "metrics: refund_local_only" 0 "$(metrics | awk '/^payterm_reconciliation_discrepancies\{gateway="wechat",kind="refund_local_only"\}/ {print $2}')"
expect "metrics: the bill date" "${DAY//-/}" "$(metrics | awk '/^payterm_reconciliation_bill_date\{gateway="wechat"\}/ {print $2}')"
expect "metrics: nothing for Stripe (no run)" 0 "$(metrics | grep -c 'reconciliation.*gateway="stripe"')"

# ---- the same bill again: the same discrepancies, nothing audited twice -------------
cli reconcile --gateway wechat --date "$DAY" --bill "$T/bill.csv"
expect "reconcile again: exit status ($ERR)" 3 "$RC"
expect "reconcile again: the same discrepancies" "$(kinds "$T/run1.json")" "$(kinds <(printf '%s\n' "$OUT"))"
expect "B's review still audited once" 1 "$(audits RECON-WX-B reconciliation_amount_mismatch)"
expect "C's review still audited once" 1 "$(audits RECON-WX-C reconciliation_local_only)"

# ---- a bill that does not add up: refused whole, its line named ---------------------
bill "$ROWS
" 5 73.00 3.00 >"$T/short.csv"
cli reconcile --gateway wechat --date "$DAY" --bill "$T/short.csv"
expect "short bill: exit status" 1 "$RC"
expect_match "short bill: names the line" 'line [0-9]+' "$ERR"
expect "short bill: the day's latest run failed" failed \
    "$(api "/v1/reconciliations/wechat/$DAY" | jq -r .state)"
expect_match "short bill: its error names the line" 'line [0-9]+' \
    "$(api "/v1/reconciliations/wechat/$DAY" | jq -r .error)"

# ---- the routes and the CLI refuse what is not a day or a gateway -------------------
expect "GET: not a date" 400 "$(status_of /v1/reconciliations/wechat/2026-02-30)"
expect "GET: not a gateway" 400 "$(status_of "/v1/reconciliations/paypal/$DAY")"
expect "GET: another day" 404 "$(status_of /v1/reconciliations/wechat/2001-01-01)"
cli reconcile --gateway wechat --date 2026-13-01 --bill "$T/bill.csv"
expect "CLI: not a date" 2 "$RC"
cli reconcile --gateway wechat --date "$DAY"
expect "CLI without --bill: the daemon downloads the simulator's books, as taken ($ERR)" 0 "$RC"
expect "CLI without --bill: a download" download "$(jq -r .source <<<"$OUT")"
cli reconcile --gateway wechat --date "$DAY" --bill "$T/nothing.csv"
expect "CLI: a bill that is not there" 1 "$RC"
expect_match "CLI: names the file" 'nothing.csv' "$ERR"

# ---- Alipay's bill as the merchant portal gives it: the zip, GBK inside -------------
VEC=$(cd "$(dirname "$0")/../../vectors/alipay_bill" && pwd)
cli reconcile --gateway alipay --date 2026-12-05 --bill "$VEC/bill.zip"
expect "alipay zip: exit status 3, none of its sales is this lane's ($ERR)" 3 "$RC"
expect "alipay zip: the bill's side" '{"trades":3,"amount":2035,"refunds":1,"refunded":500}' "$(jq -c .bill <<<"$OUT")"
expect "alipay zip: the discrepancies" \
    "gateway_only -; gateway_only LANE1-0001; gateway_only LANE1-0002; refund_gateway_only LANE1-0001/LANE1-0001-R1" \
    "$(jq -r '[.discrepancies[] | "\(.kind) \(.order_id // "-")\(if .refund_id then "/" + .refund_id else "" end)"] | join("; ")' <<<"$OUT")"
cli reconcile --gateway alipay --date 2026-12-05 --bill "$VEC/detail.csv"
expect "alipay detail file alone: the same" 3 "$RC"
cli reconcile --gateway alipay --date 2026-12-06 --bill "$VEC/bill.zip"
expect "alipay zip of another day: refused" 1 "$RC"
expect_match "alipay zip of another day: names the line" 'Alipay bill line 6: ' "$ERR"
pass
