#!/usr/bin/env bash
# units.sh PAYTERM - each gateway's own amount units (SPEC 18, issue 32) at
# the real daemon and simulator.  The API's amount is ISO 4217 minor units;
# the simulator reads each wire amount with the gateway's own rules
# (platform/sim/sim_units.c) and its ledger keeps ISO minor units, so an
# adapter that converts wrongly shows as a wrong captured amount:
#   1. Stripe: MGA (zero-decimal at Stripe, two decimals in ISO) 10.00 MGA is
#      captured as 10.00 MGA, not 1000 MGA; ISK (sent as two-decimal values
#      ending in 00) 500 kronur as 500, not 5; JPY as asked; KWD 1.230 as
#      asked;
#   2. amounts Stripe cannot represent (10.50 MGA, 1.235 KWD) are 400
#      invalid_request naming amount, with nothing stored and nothing sent;
#   3. Stripe refunds in MGA and ISK go back in Stripe's units, and one it
#      cannot represent is refused the same way;
#   4. Alipay (total_amount has at most two decimals) takes 1.230 KWD as
#      "1.23" and refuses 1.235 KWD; 2C2P takes JPY in whole yen.
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/units.json" <<'EOF'
{"gateways": {"alipay": {"currencies": ["CNY", "KWD"]}}}
EOF
sync_start "$T/units.json"

stripe_in() { printf '"amount":%d,"currency":"%s","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa"' "$1" "$2"; }
alipay_in() { printf '"amount":%d,"currency":"%s","gateway":"alipay","method":"barcode","payment_code":"%s","subject":"Dates"' "$1" "$2" "$AUTH_CODE"; }
c2p_in() { printf '"amount":%d,"currency":"%s","gateway":"2c2p","method":"redirect","subject":"Room 7"' "$1" "$2"; }

expect_captured_as() { # ORDER AMOUNT CURRENCY: ISO minor units at the simulator
    local l
    l=$(ledger "$1")
    expect "$1 captured currency at the simulator" "$3" "$(jq -r '.[0].currency' <<<"$l")"
    expect "$1 captured amount at the simulator (ISO minor units)" "$2" "$(jq -r '.[0].amount' <<<"$l")"
    expect_captured_once "$1"
}

# refused KEY ORDER FIELDS WHY: a 400 naming amount; nothing stored or sent.
refused() {
    charge "$1" "$2" "$3"
    expect "$2 status" 400 "$ST"
    expect "$2 error" invalid_request "$(field .error.code)"
    case $(field .error.message) in *"amount"*"$4"*) ;;
    *) fail "$2: the message should name amount and say '$4': $(field .error.message)" ;; esac
    expect "$2 stored" not_found "$(state "$2")"
    expect "$2 trades at the simulator" 0 "$(ledger "$2" | jq length)"
}

log "1. Stripe captures each amount in the currency's own units"
charge k-mga UNITS-MGA "$(stripe_in 1000 MGA)"
expect "MGA charge status" 201 "$ST"
expect_captured_as UNITS-MGA 1000 MGA
charge k-isk UNITS-ISK "$(stripe_in 500 ISK)"
expect "ISK charge status" 201 "$ST"
expect_captured_as UNITS-ISK 500 ISK
charge k-jpy UNITS-JPY "$(stripe_in 1200 JPY)"
expect "JPY charge status" 201 "$ST"
expect_captured_as UNITS-JPY 1200 JPY
charge k-kwd UNITS-KWD "$(stripe_in 1230 KWD)"
expect "KWD charge status" 201 "$ST"
expect_captured_as UNITS-KWD 1230 KWD

log "2. amounts Stripe cannot represent are refused before anything is stored"
refused k-mga-frac UNITS-MGA-FRAC "$(stripe_in 1050 MGA)" "1050 MGA cannot be sent to stripe"
refused k-kwd-odd UNITS-KWD-ODD "$(stripe_in 1235 KWD)" "1235 KWD cannot be sent to stripe"

log "3. refunds in Stripe's units"
refund() { # refund KEY ORDER FIELDS -> ST, BODY
    BODY="$T/last.json"
    ST=$(curl -sS --max-time 30 -o "$BODY" -w '%{http_code}' -X POST \
        "$API/v1/charges/$2/refunds" -H 'Content-Type: application/json' \
        -H "Idempotency-Key: $1" -d "{$3}")
}
sim_refunded() { sim "/_sim/ledger?order_id=$1" | jq '[.data[].refunded] | add // 0'; }
refund k-r-mga UNITS-MGA '"refund_id":"R-UNITS-MGA","amount":500'
expect "MGA refund status" 201 "$ST"
expect "MGA refund state" SUCCESS "$(field .state)"
expect "MGA refunded at the simulator (ISO minor units)" 500 "$(sim_refunded UNITS-MGA)"
refund k-r-isk UNITS-ISK '"refund_id":"R-UNITS-ISK","amount":200'
expect "ISK refund status" 201 "$ST"
expect "ISK refunded at the simulator (ISO minor units)" 200 "$(sim_refunded UNITS-ISK)"
refund k-r-mga2 UNITS-MGA '"refund_id":"R-UNITS-MGA2","amount":250'
expect "MGA refund of 2.50 status" 400 "$ST"
expect "MGA refund of 2.50 error" invalid_request "$(field .error.code)"
case $(field .error.message) in *amount*"250 MGA cannot be sent to stripe"*) ;;
*) fail "the refused refund's message should name amount: $(field .error.message)" ;; esac
expect "refused refund stored" not_found "$(api /v1/refunds/R-UNITS-MGA2 | jq -r '.error.code // .state')"
expect "MGA refunded at the simulator after the refused refund" 500 "$(sim_refunded UNITS-MGA)"
expect "MGA refunds executed at the simulator" 1 "$(sim "/_sim/ledger?order_id=UNITS-MGA" | jq '.data[0].refunds')"

log "4. Alipay's two decimals, 2C2P's ISO units"
charge k-ali-kwd UNITS-ALI-KWD "$(alipay_in 1230 KWD)"
expect "Alipay KWD charge status" 201 "$ST"
expect_captured_as UNITS-ALI-KWD 1230 KWD
refused k-ali-kwd-odd UNITS-ALI-KWD-ODD "$(alipay_in 1235 KWD)" "1235 KWD cannot be sent to alipay"
charge k-c2p-jpy UNITS-C2P-JPY "$(c2p_in 1500 JPY)"
expect "2C2P JPY charge status" 202 "$ST"
wait_state UNITS-C2P-JPY SUCCESS
expect_captured_as UNITS-C2P-JPY 1500 JPY
pass
