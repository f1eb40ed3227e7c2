#!/usr/bin/env bash
# currency.sh PAYTERM - Alipay's currency rule (SPEC sections 5 and 8) at the
# real daemon and simulator:
#   1. with gateways.alipay.currencies = [CNY, USD] (cross-border acquiring)
#      a USD charge is sent with trans_currency and captured by the gateway
#      in USD, for exactly the amount asked; a CNY one in CNY;
#   2. a currency not listed is a 400 invalid_request naming `currency`, and
#      nothing reaches the gateway;
#   3. without the list (domestic Alipay: CNY only) USD is refused the same
#      way - before the fix, a USD 10.00 charge was captured as CNY 10.00 and
#      recorded SUCCESS in USD.
. "$(dirname "$0")/synclib.sh" "$@"
echo '{"gateways": {"alipay": {"currencies": ["CNY", "USD"]}}}' >"$T/cross-border.json"
sync_start "$T/cross-border.json"

usd_barcode() { printf '"amount":%d,"currency":"%s","gateway":"alipay","method":"barcode","payment_code":"%s","subject":"Latte"' "$1" "$2" "$AUTH_CODE"; }
expect_captured_in() { # ORDER AMOUNT CURRENCY
    local l
    l=$(ledger "$1")
    expect "$1 captured currency at the simulator" "$3" "$(jq -r '.[0].currency' <<<"$l")"
    expect "$1 captured amount at the simulator" "$2" "$(jq -r '.[0].amount' <<<"$l")"
    expect_captured_once "$1"
}

log "1. listed currencies are captured in the currency asked for"
charge k-cur-usd CUR-USD "$(usd_barcode 1000 USD)"
expect "USD charge status" 201 "$ST"
expect "USD charge currency" USD "$(field .currency)"
expect_captured_in CUR-USD 1000 USD
charge k-cur-cny CUR-CNY "$(usd_barcode 1000 CNY)"
expect "CNY charge status" 201 "$ST"
expect_captured_in CUR-CNY 1000 CNY

log "2. a currency that is not listed is refused before anything is sent"
charge k-cur-eur CUR-EUR "$(usd_barcode 1000 EUR)"
expect "EUR charge status" 400 "$ST"
expect "EUR charge error" invalid_request "$(field .error.code)"
case $(field .error.message) in *"currency: EUR is not accepted by alipay"*gateways.alipay.currencies*) ;;
*) fail "EUR charge message should name currency and gateways.alipay.currencies: $(field .error.message)" ;; esac
expect "EUR trades at the simulator" 0 "$(ledger CUR-EUR | jq length)"

log "3. domestic Alipay (no currencies listed) takes CNY only"
daemon_kill TERM
EXTRA_CONFIG=""
daemon_restart
charge k-cur-usd2 CUR-USD2 "$(usd_barcode 1000 USD)"
expect "USD charge without cross-border acquiring" 400 "$ST"
case $(field .error.message) in *"currency: USD is not accepted by alipay"*) ;;
*) fail "USD charge message should name currency: $(field .error.message)" ;; esac
expect "USD trades at the simulator" 0 "$(ledger CUR-USD2 | jq length)"
pass
