#!/usr/bin/env bash
# refund_notifications.sh PAYTERM - refund notifications at the real daemon
# (SPEC 5a "Gateway refund notifications ... are verified and bound like
# payment notifications", SPEC 5 "Gateway notifications"): "a refund
# notification for another charge's refund or from another gateway changes
# nothing".  Every notification here is validly signed (WeChat: AES-256-GCM
# resource under the APIv3 key and the platform key's signature, by the
# wxforge helper; Stripe: HMAC with the real whsec, by `payterm sign`), so
# what is tested is the binding, never the signature.
#
# Each case asserts what the merchant cares about: the refund's state and
# refund number, the charge's amount_refunded, the simulator's ledger (money
# returned, refunds executed) and the fulfilment feed (refund.succeeded /
# refund.failed, each at most once), for the refund named and for the one
# whose fields were borrowed.
#
#   W1  WeChat REFUND.SUCCESS naming refund A's out_refund_no (and its refund
#       number and amount) but refund B's order      -> foreign, audited
#   W2  WeChat REFUND.SUCCESS naming a refund of a Stripe charge, on the
#       WeChat route                                 -> foreign, audited
#   W3  WeChat REFUND.SUCCESS for A from another mchid, or without one
#                                                    -> foreign, audited
#   W4  WeChat REFUND.SUCCESS for an out_refund_no payterm never made
#                                                    -> acknowledged, foreign
#   W5  WeChat REFUND.SUCCESS for A with a refund number other than the one
#       WeChat gave payterm                          -> foreign, audited
#   W7  WeChat REFUND.SUCCESS for refund C with C's own refund number but no
#       amount (0), and for D with D's number in another currency -> bound,
#       review raised, not believed: C and D stay PENDING, no event
#   W6  WeChat REFUND.SUCCESS for refund U, still PROCESSING at WeChat and
#       whose refund number payterm never learned (its answer was lost): a
#       made-up number -> payterm queries, applies the query's PROCESSING
#       (U becomes PENDING with WeChat's real number), no event; again ->
#       a duplicate
#   S1  Stripe refund.updated for refund S (UNKNOWN: its answer was lost)
#       naming another charge's order and PaymentIntent -> foreign
#   S2  Stripe refund.updated naming a WeChat charge's refund -> foreign,
#       audited
#   S3  Stripe refund.updated, the genuine one for S -> SUCCESS once (by the
#       daemon's query); delivered again -> duplicate; a later event of the
#       same refund -> ignored (and counted so); one refund.succeeded
#   G   the simulator's own REFUND.SUCCESS for A, B, C, D and U (each delivered at
#       least twice) -> SUCCESS once each; replayed by hand -> duplicate
#
# WeChat's refunds stay PROCESSING at the simulator for the pay delay
# (SIM_PAY_DELAY_MS, 75 s here), long enough for W1-W7 to run while a wrong
# binding would still be visible; the daemon never resends or resolves an
# UNKNOWN refund on its own here (backoff of 10 minutes), so only a
# notification (or the query it causes) can move one.
. "$(dirname "$0")/synclib.sh" "$@"
WXFORGE=${PT_WXFORGE:?PT_WXFORGE must name the wxforge helper (set by CMake)}
SIM_PAY_DELAY_MS=${SIM_PAY_DELAY_MS:-75000}
echo '{"sync": {"backoff_base_ms": 600000, "backoff_max_ms": 600000, "max_attempts": 10}}' >"$T/no-polling.json"
sync_start "$T/no-polling.json"
GWJ=$T/sim/gateways.json
WX_MCHID=$(jq -r .gateways.wechat.mchid "$GWJ")
WX_APPID=$(jq -r .gateways.wechat.appid "$GWJ")
WX_SERIAL=$(jq -r .gateways.wechat.platform_serial "$GWJ")
if [ -z "$WX_MCHID" ] || [ "$WX_MCHID" = null ]; then fail "no WeChat mchid in $GWJ"; fi

# ---- helpers ------------------------------------------------------------------------
# post_notify GATEWAY BODYFILE [curl args] -> NST (status), NBODY (reply text)
post_notify() {
    local path
    case $1 in
    wechat) path=/notify/wechat ;;
    stripe) path=/webhooks/stripe ;;
    esac
    NST=$(curl -sS --max-time 20 -o "$T/notify.reply" -w '%{http_code}' -X POST "$API$path" \
        -H 'Content-Type: application/json' --data-binary "@$2" "${@:3}")
    NBODY=$(cat "$T/notify.reply")
}
headers_of() { # headers_of FILE ARRAY: curl -H arguments from FILE.h
    local -n _arr=$2
    _arr=()
    [ -f "$1.h" ] || return 0
    while IFS= read -r line; do _arr+=(-H "$line"); done <"$1.h"
}
send() { # send GATEWAY FILE
    local hs
    headers_of "$2" hs
    post_notify "$1" "$2" "${hs[@]}"
}
ok_reply() { case $1 in wechat) echo '{"code":"SUCCESS"}' ;; stripe) echo '{"received":true}' ;; esac; }
notify_metric() { metric payterm_notifications_total "gateway=\"$1\",result=\"$2\""; }

# refund KEY ORDER FIELDS -> ST, BODY
refund() {
    BODY="$T/last.json"
    ST=$(curl -sS --max-time 30 -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/charges/$2/refunds" -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $1" -d "{$3}")
}
refund_json() { api "/v1/refunds/$1"; }
refund_state() { refund_json "$1" | jq -r '.state // .error.code'; }
refund_in() { [ "$(refund_state "$1")" = "$2" ]; }
wait_refund() { # wait_refund REFUND_ID STATE [SECONDS]
    wait_until "${3:-30}" refund_in "$1" "$2" ||
        fail "refund $1: expected $2 within ${3:-30} s, it is $(refund_json "$1" | jq -c '{state,gateway_refund_no,attempts,review,review_reason,error}')"
}
sim_refunded() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunded] | add // 0'; }
sim_refunds() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunds] | add // 0'; }
# The simulator's own refund number for a refund (WeChat: by out_refund_no;
# Stripe, which has no refund key: the order's one refund).
sim_refund_no() {
    sqlite3 -readonly "$T/sim/sim.db" \
        "SELECT refund_no FROM refunds WHERE gateway = '$1' AND (refund_key = '$2' OR order_id = '$3') ORDER BY id LIMIT 1"
}
foreign_audits() { # foreign_audits ORDER REFUND_ID -> notification_foreign rows of the refund
    api "/v1/charges/$1/events" |
        jq --arg r "$2" '[.data[] | select(.cause == "notification_foreign" and .refund_id == $r)] | length'
}

# snapshot: everything a wrong binding could change, for every refund, as
# one JSON object {refund_id: "state=... review=... ..."} (four requests).
snapshot() {
    local refunds charges led ev
    refunds=$(api "/v1/refunds?limit=100")
    charges=$(api "/v1/charges?limit=100")
    led=$(sim /_sim/ledger)
    ev=$(all_events)
    jq -cn --argjson r "$refunds" --argjson c "$charges" --argjson l "$led" --argjson e "$ev" '
        [$r.data[] | . as $x
         | {key: .refund_id,
            value: ("state=\(.state) review=\(.review) refund_no=\(.gateway_refund_no // "")"
                + " amount_refunded=\([$c.data[] | select(.order_id == $x.order_id) | .amount_refunded] | first)"
                + " sim_refunded=\([$l.data[] | select(.order_id == $x.order_id) | .refunded] | add // 0)"
                + " sim_refunds=\([$l.data[] | select(.order_id == $x.order_id) | .refunds] | add // 0)"
                + " succeeded=\([$e[] | select(.type == "refund.succeeded" and .refund.refund_id == $x.refund_id)] | length)"
                + " failed=\([$e[] | select(.type == "refund.failed" and .refund.refund_id == $x.refund_id)] | length)")}]
        | from_entries + {"#events": ($e | length), "#refunds": ($r.data | length)}'
}
snap() { snapshot | jq -r --arg r "$1" '.[$r]'; } # snap REFUND_ID
# before: remembers the snapshot; unchanged WHAT [REFUND_ID...]: every refund
# (but those named) and the feed are as they were (the feed EV_ADD events
# longer, the named refunds' own, which the caller checks).
before() {
    SNAP=$(snapshot)
    local m
    m=$(api /metrics)
    FOREIGN_WX=$(metric_in "$m" wechat foreign)
    FOREIGN_STRIPE=$(metric_in "$m" stripe foreign)
}
unchanged() {
    local what=$1 report
    shift
    # One jq for every comparison: the test must stay well inside the
    # simulator's refund delay, also on a loaded machine.
    report=$(jq -rn --argjson a "$SNAP" --argjson b "$(snapshot)" --argjson add "${EV_ADD:-0}" '
        ($ARGS.positional) as $skip
        | ([$a | keys[] | select(. != "#events" and (. as $k | $skip | index($k) | not))
            | select($a[.] != $b[.]) | "\(.): expected '"'"'\($a[.])'"'"', got '"'"'\($b[.])'"'"'"]
           + (if $b["#events"] != $a["#events"] + $add
              then ["events in the feed: expected \($a["#events"] + $add), got \($b["#events"])"] else [] end))
        | join("; ")' --args "$@")
    [ -z "$report" ] || fail "$what: $report"
}
# metric_in METRICS_TEXT GATEWAY RESULT: a payterm_notifications_total sample.
metric_in() {
    awk -v f="gateway=\"$2\",result=\"$3\"" 'index($0, "payterm_notifications_total{") == 1 && index($0, f) {s += $NF} END {print s + 0}' <<<"$1"
}
acknowledged_foreign() { # acknowledged_foreign WHAT GATEWAY
    local want=$FOREIGN_WX
    [ "$2" = wechat ] || want=$FOREIGN_STRIPE
    expect "$1: status" 200 "$NST"
    expect "$1: reply" "$(ok_reply "$2")" "$NBODY"
    expect "$1: counted foreign" $((want + 1)) "$(notify_metric "$2" foreign)"
}

# ---- forging ------------------------------------------------------------------------
# wx_refund_note OUT EVENT_ID [EVENT_TYPE]: a WeChat refund notification of
# the resource given by the R_* variables (R_MCHID "-" leaves mchid out;
# R_CURRENCY adds amount.currency, which WeChat's own example leaves out).
wx_refund_note() {
    local out=$1 id=$2 type=${3:-REFUND.SUCCESS}
    jq -cn --arg m "${R_MCHID-$WX_MCHID}" --arg otn "$R_ORDER" --arg tid "$R_TRADE" \
        --arg orn "$R_REFUND" --arg rid "$R_NO" --argjson a "$R_AMOUNT" --argjson tot "$R_TOTAL" \
        --arg st "${type#REFUND.}" --arg cur "${R_CURRENCY:-}" '{
        mchid: $m, out_trade_no: $otn, transaction_id: $tid, out_refund_no: $orn,
        refund_id: $rid, refund_status: $st, success_time: "2026-12-01T10:00:05+08:00",
        user_received_account: "支付用户零钱",
        amount: ({total: $tot, refund: $a, payer_total: $tot, payer_refund: $a}
                 + if $cur == "" then {} else {currency: $cur} end)}
        | with_entries(select(.value != "-"))' >"$out.plain"
    "$WXFORGE" body "$T/sim" "$id" "$type" <"$out.plain" >"$out"
    "$WXFORGE" headers "$T/sim" "$WX_SERIAL" <"$out" >"$out.h"
}
# wx_set REFUND_ID: R_* from payterm's refund and its charge (WeChat's own
# numbers, as a genuine notification would carry them).
wx_set() {
    local rj cj
    rj=$(refund_json "$1")
    cj=$(charge_json "$(jq -r .order_id <<<"$rj")")
    R_REFUND=$1
    R_ORDER=$(jq -r .order_id <<<"$rj")
    R_TRADE=$(jq -r .gateway_trade_no <<<"$cj")
    R_NO=$(jq -r '.gateway_refund_no // ""' <<<"$rj")
    [ -n "$R_NO" ] || R_NO=$(sim_refund_no wechat "$1" "-")
    R_AMOUNT=$(jq .amount <<<"$rj")
    R_TOTAL=$(jq .amount <<<"$cj")
    unset R_MCHID
}
# stripe_refund_event OUT EVENT_ID TYPE: a Stripe event of the Refund given
# by the S_* variables, signed with the simulator's whsec now.
stripe_refund_event() {
    local out=$1 id=$2 type=$3
    jq -cn --arg id "$id" --arg type "$type" --arg re "$S_NO" --argjson a "$S_AMOUNT" \
        --arg pi "$S_PI" --arg o "$S_ORDER" --arg r "$S_REFUND" --arg st "${S_STATUS:-succeeded}" '{
        id: $id, object: "event", api_version: "2024-06-20", created: (now | floor),
        data: {object: {id: $re, object: "refund", amount: $a, currency: "usd",
                        payment_intent: $pi, status: $st, reason: null,
                        metadata: {refund_id: $r, order_id: $o}}},
        livemode: false, pending_webhooks: 1, type: $type}' | tr -d '\n' >"$out"
    printf 'Stripe-Signature: %s\n' "$("$PAYTERM" sign --gateway stripe \
        --secret-file "$T/sim/stripe_webhook_secret" --timestamp "$(date +%s)" <"$out" | jq -r .header)" >"$out.h"
}

# wx_pay ORDER AMOUNT: the simulated customer pays ORDER (POST /_sim/pay
# sends no notification), then its TRANSACTION.SUCCESS with WeChat's own
# transaction id is delivered: how the WeChat charges here reach SUCCESS.
wx_pay() {
    local o=$1 amount=$2 tn r
    r=$(sim /_sim/pay -H 'Content-Type: application/json' -d "{\"gateway\":\"wechat\",\"order_id\":\"$o\"}")
    [ "$(jq -r .status <<<"$r")" = captured ] || fail "POST /_sim/pay wechat $o: $r"
    tn=$(jq -r .trade_no <<<"$r")
    jq -cn --arg o "$o" --argjson a "$amount" --arg m "$WX_MCHID" --arg app "$WX_APPID" --arg tn "$tn" '{
        amount: {currency: "CNY", payer_currency: "CNY", payer_total: $a, total: $a},
        appid: $app, attach: "", bank_type: "OTHERS", mchid: $m, out_trade_no: $o,
        payer: {openid: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}, promotion_detail: [],
        success_time: "2026-12-01T09:00:05+08:00", trade_state: "SUCCESS",
        trade_state_desc: "支付成功", trade_type: "NATIVE", transaction_id: $tn}' >"$T/pay-$o.plain"
    "$WXFORGE" body "$T/sim" "EV-PAY-$o" <"$T/pay-$o.plain" >"$T/pay-$o"
    "$WXFORGE" headers "$T/sim" "$WX_SERIAL" <"$T/pay-$o" >"$T/pay-$o.h"
    send wechat "$T/pay-$o"
    expect "$o payment notification" 200 "$NST"
    wait_state "$o" SUCCESS 10
}

# ---- the charges and their refunds ---------------------------------------------------
log "setup: WeChat charges CA CB CC CU, Stripe charges CS CS2, all paid"
CA=RNWXA01 CB=RNWXB01 CC=RNWXC01 CU=RNWXU01 CS=RN-STR-S1 CS2=RN-STR-S2
for o in $CA $CB $CC $CU; do
    charge "k-$o" "$o" "$(wechat_qr 1000)"
    expect "$o charge" 202 "$ST"
    wait_state "$o" PENDING 10
    wx_pay "$o" 1000
done
for o in $CS $CS2; do
    charge "k-$o" "$o" "$(stripe_card 1000)"
    expect "$o charge" 201 "$ST"
done

# U and S: the gateway executes the refund, its answer is lost (UNKNOWN, no
# refund number known to payterm).  Made first, while no other request of
# that gateway is in flight, so the fault takes the refund's own POST.
RU=RFU-WX-1 RS=RFS-STR-1
# The simulator settles U this long after: the cases that need WeChat's
# refunds still PROCESSING must be over by then.
WINDOW_END=$((SECONDS + SIM_PAY_DELAY_MS / 1000 - 2))
sim_fault '{"gateway":"wechat","mode":"drop_after_commit","count":1,"method":"POST"}'
refund "kr-$RU" "$CU" "\"refund_id\":\"$RU\",\"amount\":500"
expect "$RU: answer lost" "202 UNKNOWN" "$ST $(field .state)"
sim_fault '{"gateway":"stripe","mode":"drop_after_commit","count":1,"method":"POST"}'
refund "kr-$RS" "$CS" "\"refund_id\":\"$RS\",\"amount\":600"
expect "$RS: answer lost" "202 UNKNOWN" "$ST $(field .state)"
sim_clear
expect "$RU: executed at the simulator" 1 "$(sim_refunds "$CU")"
expect "$RS: executed at the simulator" 1 "$(sim_refunds "$CS")"
expect "$RS: money back at the simulator (Stripe refunds at once)" 600 "$(sim_refunded "$CS")"
# A, B, C, D: WeChat answers PROCESSING, with its refund number.
RA=RFA-WX-1 RB=RFB-WX-1 RC=RFC-WX-1 RD=RFD-WX-1 RS2=RFS-STR-2
refund "kr-$RA" "$CA" "\"refund_id\":\"$RA\",\"amount\":300"
expect "$RA" "202 PENDING" "$ST $(field .state)"
refund "kr-$RB" "$CB" "\"refund_id\":\"$RB\",\"amount\":400"
expect "$RB" "202 PENDING" "$ST $(field .state)"
refund "kr-$RC" "$CC" "\"refund_id\":\"$RC\",\"amount\":300"
expect "$RC" "202 PENDING" "$ST $(field .state)"
refund "kr-$RD" "$CC" "\"refund_id\":\"$RD\",\"amount\":400"
expect "$RD" "202 PENDING" "$ST $(field .state)"
refund "kr-$RS2" "$CS2" "\"refund_id\":\"$RS2\",\"amount\":200"
expect "$RS2" "201 SUCCESS" "$ST $(field .state)"
NA=$(refund_json $RA | jq -r .gateway_refund_no)
NB=$(refund_json $RB | jq -r .gateway_refund_no)
expect "$RA refund number is WeChat's" "$(sim_refund_no wechat $RA -)" "$NA"
expect "$RB refund number is WeChat's" "$(sim_refund_no wechat $RB -)" "$NB"
expect "$RU refund number (never answered)" "" "$(refund_json $RU | jq -r '.gateway_refund_no // ""')"

# ---- WeChat ----------------------------------------------------------------------------
log "W1: REFUND.SUCCESS with A's out_refund_no, number and amount, but B's order"
before
wx_set $RA
B_TRADE=$(charge_json $CB | jq -r .gateway_trade_no)
R_ORDER=$CB R_TRADE=$B_TRADE R_TOTAL=1000 wx_refund_note "$T/w1" EV-RN-W1
send wechat "$T/w1"
acknowledged_foreign "W1 A's refund, B's order" wechat
unchanged "W1"
expect "W1: audited on A's charge" 1 "$(foreign_audits $CA $RA)"

log "W2: REFUND.SUCCESS naming a Stripe charge's refund, on the WeChat route"
before
R_REFUND=$RS R_ORDER=$CS R_TRADE=$(charge_json $CS | jq -r .gateway_trade_no) \
    R_NO=$(sim_refund_no stripe - $CS) R_AMOUNT=600 R_TOTAL=1000 wx_refund_note "$T/w2" EV-RN-W2
send wechat "$T/w2"
acknowledged_foreign "W2 a Stripe refund on /notify/wechat" wechat
unchanged "W2"
expect "W2: audited on the Stripe refund's charge" 1 "$(foreign_audits $CS $RS)"

log "W3: REFUND.SUCCESS for A from another mchid, and without one"
before
wx_set $RA
R_MCHID=1900009999 wx_refund_note "$T/w3a" EV-RN-W3A
send wechat "$T/w3a"
acknowledged_foreign "W3 another mchid" wechat
unchanged "W3 another mchid"
before
wx_set $RA
R_MCHID=- wx_refund_note "$T/w3b" EV-RN-W3B
send wechat "$T/w3b"
acknowledged_foreign "W3 no mchid" wechat
unchanged "W3 no mchid"
expect "W1+W3: audited on A's charge" 3 "$(foreign_audits $CA $RA)"

log "W4: REFUND.SUCCESS for an out_refund_no payterm never made"
before
wx_set $RA
R_REFUND=RFX-NEVER-1 R_NO=50300000000000000000000000001 wx_refund_note "$T/w4" EV-RN-W4
send wechat "$T/w4"
acknowledged_foreign "W4 unknown out_refund_no" wechat
unchanged "W4"
expect "W4: no such refund made by it" not_found "$(refund_state RFX-NEVER-1)"

log "W5: REFUND.SUCCESS for A with a refund number WeChat did not give A"
before
wx_set $RA
R_NO=50300000000000000000000000005 wx_refund_note "$T/w5" EV-RN-W5
send wechat "$T/w5"
acknowledged_foreign "W5 another refund number" wechat
unchanged "W5"
expect "W1+W3+W5: audited on A's charge" 4 "$(foreign_audits $CA $RA)"

log "W7: REFUND.SUCCESS with the refund's own number but no amount / another currency"
before
REVIEW=$(notify_metric wechat review)
wx_set $RC
R_AMOUNT=0 wx_refund_note "$T/w7a" EV-RN-W7A
send wechat "$T/w7a"
expect "W7 no amount: status" 200 "$NST"
expect "W7 no amount: reply" "$(ok_reply wechat)" "$NBODY"
expect "W7 no amount: $RC" "state=PENDING review=true" "$(snap $RC | cut -d' ' -f1-2)"
wx_set $RD
R_CURRENCY=USD wx_refund_note "$T/w7b" EV-RN-W7B
send wechat "$T/w7b"
expect "W7 another currency: status" 200 "$NST"
expect "W7 another currency: $RD" "state=PENDING review=true" "$(snap $RD | cut -d' ' -f1-2)"
expect "W7: counted review" $((REVIEW + 2)) "$(notify_metric wechat review)"
for r in $RC $RD; do
    expect "W7: $r review_reason" true "$(refund_json "$r" | jq '.review_reason | test("mismatch|without_amount")')"
done
# Apart from the review flags, nothing moved.
SNAP=$(jq -c --arg c "$RC" --arg d "$RD" '.[$c] |= sub("review=false"; "review=true") | .[$d] |= sub("review=false"; "review=true")' <<<"$SNAP")
unchanged "W7"

log "W6: REFUND.SUCCESS for U (PROCESSING at WeChat, number unknown to payterm), made-up number"
expect "W6: $RU still PROCESSING at the simulator" 0 "$(sim_refunded $CU)"
before
wx_set $RU
R_NO=50300000000000000000000000666 wx_refund_note "$T/w6" EV-RN-W6
send wechat "$T/w6"
expect "W6: status" 200 "$NST"
expect "W6: reply" "$(ok_reply wechat)" "$NBODY"
U_REAL=$(sim_refund_no wechat $RU -)
expect "W6: $RU after the query (PROCESSING at WeChat)" \
    "state=PENDING review=false refund_no=$U_REAL amount_refunded=0 sim_refunded=0 sim_refunds=1 succeeded=0 failed=0" \
    "$(snap $RU)"
unchanged "W6 (the others)" $RU
expect "W6: the forged number was not taken" 0 "$(refund_json $RU | jq --arg n 50300000000000000000000000666 '[select(.gateway_refund_no == $n)] | length')"
DUP=$(notify_metric wechat duplicate)
send wechat "$T/w6"
expect "W6 again: status" 200 "$NST"
expect "W6 again: counted duplicate" $((DUP + 1)) "$(notify_metric wechat duplicate)"
expect "W6 again: $RU" "PENDING" "$(refund_state $RU)"
[ $SECONDS -lt $WINDOW_END ] ||
    fail "the WeChat cases took longer than the simulator's refund delay ($SIM_PAY_DELAY_MS ms): their 'unchanged' proves less; raise SIM_PAY_DELAY_MS"
expect "W1-W6 ran while A was PROCESSING at the simulator" 0 "$(sim_refunded $CA)"

# ---- Stripe ----------------------------------------------------------------------------
S_PI=$(charge_json $CS | jq -r .gateway_trade_no)
S2_PI=$(charge_json $CS2 | jq -r .gateway_trade_no)
S_NO=$(sim_refund_no stripe - $CS)
[ -n "$S_NO" ] || fail "no Stripe refund of $CS at the simulator"

log "S1: refund.updated for S (UNKNOWN) naming another charge's order and PaymentIntent"
before
S_REFUND=$RS S_ORDER=$CS2 S_PI=$S2_PI S_AMOUNT=600 stripe_refund_event "$T/s1" evt_rn_s1 refund.updated
send stripe "$T/s1"
acknowledged_foreign "S1 S's refund_id, another charge" stripe
unchanged "S1"
expect "W2+S1: audited on S's charge" 2 "$(foreign_audits $CS $RS)"

log "S2: refund.updated naming a WeChat charge's refund, on the Stripe route"
before
S_REFUND=$RA S_ORDER=$CA S_PI=$(charge_json $CA | jq -r .gateway_trade_no) S_NO=$NA S_AMOUNT=300 \
    stripe_refund_event "$T/s2" evt_rn_s2 refund.updated
send stripe "$T/s2"
acknowledged_foreign "S2 a WeChat refund on /webhooks/stripe" stripe
unchanged "S2"
expect "W1+W3+W5+S2: audited on A's charge" 5 "$(foreign_audits $CA $RA)"

log "S3: the genuine refund.updated for S: applied once"
before
S_REFUND=$RS S_ORDER=$CS S_AMOUNT=600 stripe_refund_event "$T/s3" evt_rn_s3 refund.updated
send stripe "$T/s3"
expect "S3: status" 200 "$NST"
expect "S3: reply" "$(ok_reply stripe)" "$NBODY"
expect "S3: $RS" \
    "state=SUCCESS review=false refund_no=$S_NO amount_refunded=600 sim_refunded=600 sim_refunds=1 succeeded=1 failed=0" \
    "$(snap $RS)"
DUP=$(notify_metric stripe duplicate)
# The same event delivered again (Stripe signs every delivery anew).
S_REFUND=$RS S_ORDER=$CS S_AMOUNT=600 stripe_refund_event "$T/s3" evt_rn_s3 refund.updated
send stripe "$T/s3"
expect "S3 again: status" 200 "$NST"
expect "S3 again: counted duplicate" $((DUP + 1)) "$(notify_metric stripe duplicate)"
# Another event about the same, now final, refund.
IGNORED=$(notify_metric stripe ignored)
S_REFUND=$RS S_ORDER=$CS S_AMOUNT=600 stripe_refund_event "$T/s3b" evt_rn_s3b refund.updated
send stripe "$T/s3b"
expect "S3 a later event of the final refund: status" 200 "$NST"
expect "S3 a later event of the final refund: counted ignored" $((IGNORED + 1)) "$(notify_metric stripe ignored)"
expect "S3 after both: $RS" \
    "state=SUCCESS review=false refund_no=$S_NO amount_refunded=600 sim_refunded=600 sim_refunds=1 succeeded=1 failed=0" \
    "$(snap $RS)"
EV_ADD=1 unchanged "S3 (the others)" $RS

# ---- the genuine WeChat notifications ---------------------------------------------------------
log "G: the simulator settles A, B, C, D and U and notifies REFUND.SUCCESS (at least twice each)"
for r in $RA $RB $RC $RD $RU; do wait_refund "$r" SUCCESS $((SIM_PAY_DELAY_MS / 1000 + 30)); done
wait_notes 40
# C and D: the genuine notification is believed (their review, raised by
# W7, stays for an operator); CC's amount_refunded is both of them.
for pair in "$RA $CA 300 false 300 1" "$RB $CB 400 false 400 1" "$RC $CC 700 true 700 2" \
    "$RD $CC 700 true 700 2" "$RU $CU 500 false 500 1"; do
    read -r r o a rv sa sn <<<"$pair"
    expect "G: $r" \
        "state=SUCCESS review=$rv refund_no=$(sim_refund_no wechat "$r" -) amount_refunded=$a sim_refunded=$sa sim_refunds=$sn succeeded=1 failed=0" \
        "$(snap "$r")"
done
notes=$(sim /_sim/notifications)
sent=$(jq '[.data[] | select(.gateway == "wechat" and .kind == "REFUND.SUCCESS" and .delivered)] | length' <<<"$notes")
[ "$sent" -ge 10 ] || fail "the simulator delivered $sent WeChat REFUND.SUCCESS notifications, expected at least 10: $(jq -c '[.data[] | select(.kind == "REFUND.SUCCESS")]' <<<"$notes")"
# Each of A's deliveries replayed by hand (re-signed now, as WeChat does):
# a duplicate each time, nothing new.
before
for id in $(jq -r --arg o "$CA" '.data[] | select(.kind == "REFUND.SUCCESS" and .order_id == $o and .delivered) | .id' <<<"$notes"); do
    f=$T/replay-$id
    sqlite3 -readonly "$T/sim/sim.db" "SELECT writefile('$f', body) FROM outbox WHERE id = $id" >/dev/null
    [ -s "$f" ] || fail "cannot read notification $id from $T/sim/sim.db"
    "$WXFORGE" headers "$T/sim" "$WX_SERIAL" <"$f" >"$f.h"
    DUP=$(notify_metric wechat duplicate)
    send wechat "$f"
    expect "G replay of $id: status" 200 "$NST"
    expect "G replay of $id: reply" "$(ok_reply wechat)" "$NBODY"
    expect "G replay of $id: counted duplicate" $((DUP + 1)) "$(notify_metric wechat duplicate)"
done
unchanged "G replays"
expect "refunds executed more than once" 0 "$(sim /_sim/ledger | jq '[.data[] | select(.refunded > .amount)] | length')"
expect "refund events twice for one refund" 0 \
    "$(all_events | jq '[.[] | select(.type == "refund.succeeded" or .type == "refund.failed") | .refund.refund_id] | length - (unique | length)')"
pass
