#!/usr/bin/env bash
# reports.sh PAYTERM - X and Z reports (SPEC 19) through the real daemon and
# simulator: a day of sales and refunds, closed; what the shop relies on -
# every final charge and refund counted in exactly one Z report, the totals
# equal to what the simulator's ledger took, a closed report given back byte
# for byte (after a restart too), the chain of hashes checkable by anyone
# with jq and sha256sum, a close that runs once per Idempotency-Key - and
# the CLI (report x, report z [N], close-day).
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
# close KEY [BODY] -> ST, BODY (file), REPLAYED
close_day() {
    BODY=$T/close.json
    local args=(-X POST "$API/v1/reports/z" -H "Idempotency-Key: $1")
    [ $# -lt 2 ] || args+=(-H 'Content-Type: application/json' -d "$2")
    ST=$(curl -sS --max-time 30 -D "$T/close.h" -o "$BODY" -w '%{http_code}' "${args[@]}")
    REPLAYED=0
    if grep -qi '^Idempotency-Replayed: *true' "$T/close.h"; then REPLAYED=1; fi
}
# hash_of FILE: SHA-256 of the report's canonical JSON without hash (jq -S
# sorts the keys; the reports hold only ASCII strings and integers).
hash_of() { jq -S -c 'del(.hash)' "$1" | tr -d '\n' | sha256sum | cut -d' ' -f1; }
line() { # line FILE GATEWAY METHOD CURRENCY -> "charges amount refunds refunded net"
    jq -r --arg g "$2" --arg m "$3" --arg c "$4" \
        '.totals[$g][$m][$c] // {} | "\(.charges) \(.amount) \(.refunds) \(.refunded) \(.net)"' "$1"
}
paid() { # paid ORDER FIELDS: a charge that the gateway took
    charge "k-$1" "$1" "$2"
    expect "$1: charge" 201 "$ST"
    expect "$1: state" SUCCESS "$(field .state)"
}

# ---- day 1: three sales, a refund, a refusal ---------------------------------------
paid D1-A "$(stripe_card 1000)"
paid D1-B "$(stripe_card 500)"
paid D1-C "$(alipay_barcode 1250)"
cli refund D1-B --refund-id D1-B-R1 --amount 200
expect "refund D1-B-R1 ($ERR)" 0 "$RC"

api /v1/reports/x >"$T/x1.json"
expect "X report: next Z" 1 "$(jq .z "$T/x1.json")"
expect "X report: Stripe line" "2 1500 1 200 1300" "$(line "$T/x1.json" stripe card_on_file USD)"
expect "X report: Alipay line" "1 1250 0 0 1250" "$(line "$T/x1.json" alipay barcode CNY)"
expect "X report: no hash" null "$(jq .hash "$T/x1.json")"
expect_same() { cmp -s "$2" "$3" || fail "$1: $(cat "$2") vs $(cat "$3")"; }
expect "X report read twice (reading closes nothing; only its end moves)" \
    "$(jq -c 'del(.to)' "$T/x1.json")" "$(api /v1/reports/x | jq -c 'del(.to)')"

# ---- closing: guarded by its key, no body ------------------------------------------
close_day ""
expect "close without a key" "400 idempotency_key_missing" "$ST $(field .error.code)"
close_day close-body '{"z":7}'
expect "close with a body" "400 invalid_request" "$ST $(field .error.code)"
expect_match() { [[ $3 =~ $2 ]] || fail "$1: '$3' does not match /$2/"; }
expect_match "the refusal names the body" '^body: ' "$(field .error.message)"
close_day close-1
expect "close 1" "201 0" "$ST $REPLAYED"
cp "$BODY" "$T/z1.json"
expect "Z 1: number" 1 "$(jq .z "$T/z1.json")"
expect "Z 1: prev_hash" "$(printf '0%.0s' $(seq 64))" "$(jq -r .prev_hash "$T/z1.json")"
expect "Z 1: hash over its canonical JSON" "$(hash_of "$T/z1.json")" "$(jq -r .hash "$T/z1.json")"
expect "Z 1: the X report's totals" "$(jq -c .totals "$T/x1.json")" "$(jq -c .totals "$T/z1.json")"
expect "Z 1: canonical JSON as served" "$(jq -S -c . "$T/z1.json")" "$(cat "$T/z1.json")"
close_day close-1
expect "close 1 again (the same key)" "201 1" "$ST $REPLAYED"
expect_same "close 1 replayed byte for byte" "$T/z1.json" "$BODY"
api /v1/reports/z/1 >"$T/z1.get"
expect_same "GET /v1/reports/z/1 byte for byte" "$T/z1.json" "$T/z1.get"
for bad in 0 01 -1 abc 99999999999999999 9007199254740992; do
    expect "GET /v1/reports/z/$bad" 400 "$(curl -s -o /dev/null -w '%{http_code}' "$API/v1/reports/z/$bad")"
done
expect "GET /v1/reports/z/2 (not closed)" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$API/v1/reports/z/2")"
expect "X report after the close" "2 {}" "$(api /v1/reports/x | jq -c '"\(.z) \(.totals)"' -r)"

# ---- day 2: a sale, and a refund of a day-1 sale, closed from the CLI ---------------
paid D2-A "$(stripe_card 700)"
cli refund D1-A --refund-id D1-A-R1 --amount 300
expect "refund D1-A-R1 ($ERR)" 0 "$RC"
cli report x
expect "report x: exit status ($ERR)" 0 "$RC"
expect "report x: next Z" 2 "$(jq .z <<<"$OUT")"
cli close-day --key close-2
expect "close-day: exit status ($ERR)" 0 "$RC"
printf '%s\n' "$OUT" >"$T/z2.json"
expect "close-day: stderr" "payterm close-day: day closed: Z report 2: 1 charges, 1 refunds" "$ERR"
expect "Z 2: Stripe line (a refund of day 1 counts on day 2)" "1 700 1 300 400" \
    "$(line "$T/z2.json" stripe card_on_file USD)"
expect "Z 2: nothing of Alipay" "null null null null null" "$(line "$T/z2.json" alipay barcode CNY)"
expect "Z 2: chained to Z 1" "$(jq -r .hash "$T/z1.json")" "$(jq -r .prev_hash "$T/z2.json")"
expect "Z 2: from = Z 1's to" "$(jq -r .to "$T/z1.json")" "$(jq -r .from "$T/z2.json")"
expect "Z 2: hash" "$(hash_of "$T/z2.json")" "$(jq -r .hash "$T/z2.json")"
cli close-day --key close-2
expect "close-day again: exit status ($ERR)" 0 "$RC"
expect "close-day again: the same report" "$(cat "$T/z2.json")" "$OUT"
expect "close-day again: stderr" \
    "payterm close-day: day closed: Z report 2: 1 charges, 1 refunds (closed before, by the first run with this key)" "$ERR"
cli report z
expect "report z: the last ($ERR)" "0 2" "$RC $(jq .z <<<"$OUT")"
cli report z 1
expect "report z 1: exit status ($ERR)" 0 "$RC"
expect "report z 1: byte for byte" "$(cat "$T/z1.json")" "$OUT"
cli report z 9
expect "report z 9: exit status" 1 "$RC"
expect_match "report z 9: stderr" '404' "$ERR"
cli report q
expect "report q: usage" 2 "$RC"

# The default key names the report the close makes: a close that ran
# closes the next one when run again (never answers a later day with it).
cli close-day
expect "close-day (default key): exit status ($ERR)" "0 3" "$RC $(jq .z <<<"$OUT")"
expect_match "close-day (default key): names its key" 'Idempotency-Key cli-close-z3$' "$ERR"
expect "Z 3: nothing became final since Z 2" "{}" "$(jq -c .totals <<<"$OUT")"

# ---- what the store holds: each final row in exactly one report ---------------------
expect "charges in no report" 0 "$(db_query 'SELECT count(*) FROM charges WHERE z IS NULL')"
expect "refunds in no report" 0 "$(db_query 'SELECT count(*) FROM refunds WHERE z IS NULL')"
expect "charges of Z 1" 3 "$(db_query 'SELECT count(*) FROM charges WHERE z = 1')"
expect "refunds of Z 2" "D1-A-R1" "$(db_query 'SELECT refund_id FROM refunds WHERE z = 2')"
# The simulator took what the reports say (the gateway's own books).
sim_total=$(for o in D1-A D1-B D2-A; do sim "/_sim/ledger?order_id=$o" | jq '[.data[] | .amount] | add'; done | jq -s add)
expect "Stripe charges: the simulator's total" "$sim_total" \
    "$(jq -s '[.[].totals.stripe.card_on_file.USD.amount // 0] | add' "$T/z1.json" "$T/z2.json")"

# ---- a restart changes nothing --------------------------------------------------------
daemon_kill TERM
daemon_restart
api /v1/reports/z/1 >"$T/z1.after"
expect_same "Z 1 after a restart" "$T/z1.json" "$T/z1.after"
close_day close-1
expect "close 1's key after a restart" "201 1" "$ST $REPLAYED"
expect_same "close 1 replayed after a restart" "$T/z1.json" "$BODY"
pass
