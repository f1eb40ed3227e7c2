#!/usr/bin/env bash
# test_concurrency.sh - racing clients: 24 identical requests (one key) and
# 24 requests with different keys for one order_id each create exactly one
# charge.  One curl process opens all 24 connections at once (-Z), so the
# requests really overlap even on a loaded 2-core machine.
source "$(dirname "$0")/lib.sh"

N=24

# race NAME KEY_PREFIX SAME_KEY ORDER [AMOUNT_STEP] - N concurrent POSTs.
# SAME_KEY=1: every request uses KEY_PREFIX as its key; otherwise request i
# uses KEY_PREFIX-i.  AMOUNT_STEP=1 gives request i the amount 100+i.
# Leaves $dir/status.i, body.i, hdr.i for i in 1..N.
race()
{
    local name=$1 prefix=$2 same=$3 order=$4 step=${5:-0} i key amount status
    dir=$PT_TMP/race.$name
    mkdir -p "$dir"
    : >"$dir/curl.cfg"
    for i in $(seq "$N"); do
        key=$prefix
        [ "$same" = 1 ] || key=$prefix-$i
        amount=$((100 + step * i))
        # printf, not charge_body: 24 jq runs would cost more than the race.
        printf '{"order_id":"%s","amount":%d,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa"}' \
            "$order" "$amount" >"$dir/req.$i"
        cat >>"$dir/curl.cfg" <<EOF
url = "$PT_URL/v1/charges"
request = "POST"
header = "Content-Type: application/json"
header = "Expect:"
header = "Idempotency-Key: $key"
data-binary = "@$dir/req.$i"
output = "$dir/body.$i"
dump-header = "$dir/hdr.$i"
write-out = "%{http_code}\\n"
max-time = $PT_CURL_MAX_S
silent
EOF
        [ "$i" -eq "$N" ] || echo next >>"$dir/curl.cfg"
    done
    curl -Z --parallel-immediate --parallel-max "$N" -K "$dir/curl.cfg" \
        >"$dir/statuses" 2>/dev/null
    for i in $(seq "$N"); do
        status=000 # no answer at all
        [ -s "$dir/hdr.$i" ] && read -r _ status _ <"$dir/hdr.$i"
        echo "$status" >"$dir/status.$i"
        if grep -qi '^Idempotency-Replayed: true' "$dir/hdr.$i"; then
            echo 1 >"$dir/replayed.$i"
        else
            echo 0 >"$dir/replayed.$i"
        fi
    done
}

status_of() { cat "$dir/status.$1"; }
replayed() { [ "$(cat "$dir/replayed.$1")" = 1 ]; }

# Tally of statuses as "202:1 409:23" (sorted by status).
tally() { cat "$dir"/status.* | sort | uniq -c | awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1}'; }

# charges_for ORDER - how many charges the list shows for the order.
charges_for()
{
    pt_get '/v1/charges?limit=100'
    expect_status 200
    jq --arg o "$1" '[.data[] | select(.order_id == $o)] | length' <"$PT_BODY_FILE"
}

case_same_key()
{
    local round i fresh first
    for round in 1 2 3; do
        race "same$round" "same-key-$round" 1 "same-$round"
        fresh=0
        first=""
        for i in $(seq "$N"); do
            case $(status_of "$i") in
            202)
                [ -n "$first" ] || first=$i
                expect_same_bytes "$dir/body.$first" "$dir/body.$i" \
                    "round $round: response $i is the same charge as response $first"
                replayed "$i" || fresh=$((fresh + 1))
                ;;
            409)
                PT_BODY_FILE=$dir/body.$i PT_HDR_FILE=$dir/hdr.$i PT_STATUS=409
                expect_error 409 idempotency_key_in_use
                expect_match '^[1-9][0-9]*$' "$(pt_header Retry-After)" "Retry-After of 409"
                PT_BODY_FILE=$PT_TMP/last.body PT_HDR_FILE=$PT_TMP/last.hdr
                ;;
            *)
                fail "round $round: response $i: expected 202 or 409, got $(status_of "$i"): $(cat "$dir/body.$i") (all: $(tally))"
                ;;
            esac
        done
        [ -n "$first" ] || fail "round $round: no request got 202 ($(tally))"
        expect_eq 1 "$fresh" "round $round: responses that created the charge ($(tally))"
        expect_eq 1 "$(charges_for "same-$round")" "round $round: charges for same-$round"
        pt_log "  round $round: $(tally)"
        # The ones told to retry now get the stored answer.
        pt_post /v1/charges "same-key-$round" "$(cat "$dir/req.1")"
        expect_status 202
        expect_header Idempotency-Replayed true
        expect_same_bytes "$dir/body.$first" "$PT_BODY_FILE" "retry after the race"
    done
}

case_other_keys_same_params()
{
    local i id creator=""
    race other other-key 0 other-1
    for i in $(seq "$N"); do
        case $(status_of "$i") in
        202) [ -z "$creator" ] || fail "two requests created other-1: $creator and $i ($(tally))"
             creator=$i ;;
        200) ;;
        *) fail "response $i: expected 202 (one) or 200, got $(status_of "$i"): $(cat "$dir/body.$i")" ;;
        esac
        replayed "$i" && fail "response $i is marked replayed, but its key is new"
    done
    [ -n "$creator" ] || fail "no request created the charge ($(tally))"
    id=$(jq .id <"$dir/body.$creator")
    for i in $(seq "$N"); do
        expect_eq "$id other-1" "$(jq -r '"\(.id) \(.order_id)"' <"$dir/body.$i")" "charge in response $i"
    done
    expect_eq 1 "$(charges_for other-1)" "charges for other-1"
}

case_other_keys_other_params()
{
    local i creator="" amount
    race conflict conflict-key 0 conflict-1 1
    for i in $(seq "$N"); do
        case $(status_of "$i") in
        202) [ -z "$creator" ] || fail "two requests created conflict-1: $creator and $i ($(tally))"
             creator=$i ;;
        409) PT_BODY_FILE=$dir/body.$i PT_HDR_FILE=$dir/hdr.$i PT_STATUS=409
             expect_error 409 order_id_conflict
             PT_BODY_FILE=$PT_TMP/last.body PT_HDR_FILE=$PT_TMP/last.hdr ;;
        *) fail "response $i: expected 202 (one) or 409, got $(status_of "$i"): $(cat "$dir/body.$i")" ;;
        esac
    done
    [ -n "$creator" ] || fail "no request created the charge ($(tally))"
    expect_eq 1 "$(charges_for conflict-1)" "charges for conflict-1"
    # The charge that exists is the winner's, amount and all.
    amount=$((100 + creator))
    pt_get /v1/charges/conflict-1
    expect_json .amount "$amount"
    expect_same_bytes "$dir/body.$creator" "$PT_BODY_FILE" "the winner's charge"
}

case_distinct_orders()
{
    # 24 independent charges at once: all accepted, none lost.
    local i
    dir=$PT_TMP/race.distinct
    mkdir -p "$dir"
    : >"$dir/curl.cfg"
    for i in $(seq "$N"); do
        printf '{"order_id":"distinct-%d","amount":100,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa"}' \
            "$i" >"$dir/req.$i"
        cat >>"$dir/curl.cfg" <<EOF
url = "$PT_URL/v1/charges"
request = "POST"
header = "Content-Type: application/json"
header = "Expect:"
header = "Idempotency-Key: distinct-key-$i"
data-binary = "@$dir/req.$i"
output = "$dir/body.$i"
write-out = "%{http_code}\\n"
max-time = $PT_CURL_MAX_S
silent
EOF
        [ "$i" -eq "$N" ] || echo next >>"$dir/curl.cfg"
    done
    curl -Z --parallel-immediate --parallel-max "$N" -K "$dir/curl.cfg" \
        >"$dir/statuses" 2>/dev/null
    expect_eq "$N" "$(grep -c '^202$' "$dir/statuses")" \
        "202 answers ($(sort "$dir/statuses" | uniq -c | tr '\n' ' '))"
    pt_get '/v1/charges?limit=100'
    expect_json '[.data[] | select(.order_id | startswith("distinct-"))] | length' "$N"
    expect_json '[.data[].id] | (. == (sort | unique))' true
}

pt_init
pt_start

pt_case "$N concurrent identical requests: one charge, every answer 202 or 409" case_same_key
pt_case "$N concurrent keys, one order_id, same parameters: one charge, the rest 200" case_other_keys_same_params
pt_case "$N concurrent keys, one order_id, other parameters: one charge, the rest 409" case_other_keys_other_params
pt_case "$N concurrent distinct charges: all accepted" case_distinct_orders

pt_stop
pt_done
