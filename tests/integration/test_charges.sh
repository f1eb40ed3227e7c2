#!/usr/bin/env bash
# test_charges.sh - POST /v1/charges: every row of the SPEC 5 outcome table
# that can happen while the gateways cannot be reached, which answers are
# stored and replayed (byte-identical, Idempotency-Replayed: true) and which
# release the key.
source "$(dirname "$0")/lib.sh"

# 404 for the order: nothing was stored.
expect_no_charge()
{
    pt_get "/v1/charges/$1"
    expect_error 404 not_found
}

# POSTs the same request again and checks it is a byte-identical replay of
# the saved response NAME with status STATUS.
expect_replay()
{
    local name=$1 status=$2 key=$3 body=$4
    pt_post /v1/charges "$key" "$body"
    expect_status "$status"
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved "$name")" "$PT_BODY_FILE" "replayed body of $name"
}

case_key_missing()
{
    local body
    body=$(charge_body km-1)
    pt_post /v1/charges - "$body"
    expect_error 400 idempotency_key_missing
    expect_contains Idempotency-Key "$(pt_message)" "message"
    expect_no_header Idempotency-Replayed
    # An empty header is a missing key (curl sends "Name;" as an empty header).
    pt_request POST /v1/charges -H 'Content-Type: application/json' -H 'Idempotency-Key;' \
        --data-binary "$body"
    expect_error 400 idempotency_key_missing
    expect_no_charge km-1
}

case_key_invalid()
{
    local body long
    body=$(charge_body ki-1)
    long=$(printf 'k%.0s' $(seq 256))
    for key in 'has space' "$long" $'caf\xc3\xa9' $'tab\there' '""'; do
        pt_post /v1/charges "$key" "$body"
        expect_error 400 idempotency_key_invalid
    done
    expect_no_charge ki-1
    # 255 visible characters is the longest key; quoted, it is still 255.
    pt_post /v1/charges "${long:1}" "$body"
    expect_status 202
    pt_post /v1/charges "\"${long:1}\"" "$body"
    expect_status 202
    expect_header Idempotency-Replayed true
}

case_invalid_request_names_fields()
{
    local msg
    pt_post /v1/charges ir-1 '{"order_id":"bad id!","amount":-5,"currency":"usd","gateway":"paypal","method":"card_on_file","offline":"sometimes","colour":"red"}'
    expect_error 400 invalid_request
    msg=$(pt_message)
    for field in order_id amount currency gateway offline colour; do
        expect_match "(^|; )$field: " "$msg" "message names field $field"
    done
    # Every required field missing.
    pt_post /v1/charges ir-2 '{}'
    expect_error 400 invalid_request
    msg=$(pt_message)
    for field in order_id amount currency gateway method; do
        expect_match "(^|; )$field: " "$msg" "message names missing field $field"
    done
    # Method-specific fields, fractional amounts, limits.max_amount.
    pt_post /v1/charges ir-3 "$(charge_body ir-3 '.amount = 1.5 | .payment_code = "123456"')"
    expect_error 400 invalid_request
    msg=$(pt_message)
    expect_match '(^|; )amount: ' "$msg" "fractional amount named"
    expect_match '(^|; )payment_code: only for method barcode' "$msg" "payment_code named"
    pt_post /v1/charges ir-4 "$(charge_body ir-4 '.gateway = "alipay" | .method = "barcode" |
        del(.payment_method) | .amount = 10000001 | .currency = "CNY"')"
    expect_error 400 invalid_request
    msg=$(pt_message)
    expect_match '(^|; )amount: must not exceed limits.max_amount' "$msg" "max_amount named"
    expect_match '(^|; )payment_code: required' "$msg" "payment_code required"
    # A gateway that is not configured on this device (wechat, see below).
    pt_post /v1/charges ir-5 '{"order_id":"ir-5","amount":100,"currency":"CNY","gateway":"wechat","method":"qr"}'
    expect_error 400 invalid_request
    expect_match '(^|; )gateway: .*not configured' "$(pt_message)" \
        "unconfigured gateway named"
    # A method the gateway does not offer.
    pt_post /v1/charges ir-6 "$(charge_body ir-6 '.method = "barcode"')"
    expect_error 400 invalid_request
    expect_match '(^|; )method: stripe does not offer' "$(pt_message)"
    # Not JSON, empty, an array, a field given twice.
    pt_post /v1/charges ir-7 'order_id=x&amount=1'
    expect_error 400 invalid_request
    expect_match '^body: ' "$(pt_message)"
    pt_post /v1/charges ir-8 -
    expect_error 400 invalid_request
    expect_match '^body: required' "$(pt_message)"
    pt_post /v1/charges ir-9 '[1,2]'
    expect_error 400 invalid_request
    pt_post /v1/charges ir-10 '{"order_id":"ir-10","order_id":"ir-10b","amount":100,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_1"}'
    expect_error 400 invalid_request
    expect_match '(^|; )order_id: given twice' "$(pt_message)"
    pt_post /v1/charges ir-11 "$(charge_body ir-11 | sed 's/}$/,"metadata":{"a":"1","a":"2"}}/')"
    expect_error 400 invalid_request
    expect_match '(^|; )metadata\.a: given twice' "$(pt_message)"
    for o in ir-3 ir-4 ir-5 ir-6 ir-10 ir-10b ir-11; do expect_no_charge "$o"; done
}

case_invalid_request_stored_and_replayed()
{
    local bad good
    bad=$(charge_body irs-1 '.amount = 0')
    good=$(charge_body irs-1)
    pt_post /v1/charges irs-key "$bad"
    expect_error 400 invalid_request
    expect_no_header Idempotency-Replayed
    pt_save irs
    expect_replay irs 400 irs-key "$bad"
    # The key is spent on the bad request: the corrected body is another
    # request under the same key.
    pt_post /v1/charges irs-key "$good"
    expect_error 422 idempotency_key_reused
    expect_no_charge irs-1
}

case_queued_202_and_replay()
{
    local body
    body=$(charge_body q-1 '.metadata = {"lane":"3"}')
    pt_post /v1/charges q-key "$body"
    expect_status 202
    expect_no_header Idempotency-Replayed
    expect_header Content-Type application/json
    pt_save q1
    expect_json '.order_id' q-1
    expect_json '.state' INIT
    expect_json '.gateway + "/" + .method' stripe/card_on_file
    expect_json '.amount' 100
    expect_json '.currency' USD
    expect_json '.review' false
    expect_json '.review_reason' null
    expect_json '.gateway_trade_no' null
    expect_json '.attempts' 0
    expect_json '.error' null
    expect_json '.metadata.lane' 3
    expect_json '.id | type' number
    expect_json '.created_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z$")' true
    expect_json '.updated_at | test("Z$")' true
    expect_replay q1 202 q-key "$body"
    expect_replay q1 202 q-key "$body"
    # The stored charge is the one the client was told about.
    pt_get /v1/charges/q-1
    expect_status 200
    expect_same_bytes "$(pt_saved q1)" "$PT_BODY_FILE" "GET /v1/charges/q-1"
    # force_offline queues without trying.
    pt_post /v1/charges q-key-2 "$(charge_body q-2 '.offline = "force_offline"')"
    expect_status 202
    expect_json '.state' INIT
    expect_json '.offline' force_offline
    # Alipay barcode in CNY queues too.
    pt_post /v1/charges q-key-3 '{"order_id":"q-3","amount":8888,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"287634438256643941","subject":"Large latte"}'
    expect_status 202
    expect_json '.state + " " + .currency' 'INIT CNY'
}

case_key_reused_422()
{
    local body
    body=$(charge_body r-1)
    pt_post /v1/charges r-key "$body"
    expect_status 202
    pt_save r1
    pt_post /v1/charges r-key "$(charge_body r-1 '.amount = 200')"
    expect_error 422 idempotency_key_reused
    expect_no_header Idempotency-Replayed
    expect_contains r-key "$(pt_message)" "message names the key"
    # Another order under the same key is a reuse too.
    pt_post /v1/charges r-key "$(charge_body r-2)"
    expect_error 422 idempotency_key_reused
    expect_no_charge r-2
    # 422 is not stored: the key still answers with its first response.
    expect_replay r1 202 r-key "$body"
    pt_get /v1/charges/r-1
    expect_json '.amount' 100
}

case_same_order_other_key_200()
{
    local id
    pt_post /v1/charges so-key-1 "$(charge_body so-1)"
    expect_status 202
    id=$(jq .id <"$PT_BODY_FILE")
    # Same parameters in another order, defaults spelled out: the same charge.
    pt_post /v1/charges so-key-2 "$(charge_body so-1 '{subject, payment_method, method,
        gateway, currency, amount, order_id, offline: "prefer_online"}')"
    expect_status 200
    expect_no_header Idempotency-Replayed
    expect_json '.id' "$id"
    expect_json '.order_id + " " + .state' 'so-1 INIT'
    pt_save so2
    expect_replay so2 200 so-key-2 "$(charge_body so-1 '{subject, payment_method, method,
        gateway, currency, amount, order_id, offline: "prefer_online"}')"
    pt_get '/v1/charges?limit=100'
    expect_json '[.data[] | select(.order_id == "so-1")] | length' 1
}

case_order_conflict_409()
{
    pt_post /v1/charges oc-key-1 "$(charge_body oc-1)"
    expect_status 202
    pt_save oc1
    for change in '.amount = 101' '.currency = "CNY"' '.subject = "Tea"' \
        '.offline = "force_offline"' '.metadata = {"lane":"4"}'; do
        pt_post /v1/charges "oc-key-x$RANDOM$RANDOM" "$(charge_body oc-1 "$change")"
        expect_error 409 order_id_conflict
        expect_contains oc-1 "$(pt_message)" "message names the order"
    done
    pt_post /v1/charges oc-key-2 "$(charge_body oc-1 '.amount = 999')"
    expect_error 409 order_id_conflict
    expect_no_header Idempotency-Replayed
    pt_save oc2
    expect_replay oc2 409 oc-key-2 "$(charge_body oc-1 '.amount = 999')"
    # The charge is untouched.
    pt_get /v1/charges/oc-1
    expect_same_bytes "$(pt_saved oc1)" "$PT_BODY_FILE" "charge oc-1 after the conflicts"
}

case_canonical_body_replays()
{
    local a b c
    a='{"order_id":"cj-1","amount":100,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_1","metadata":{"a":"1","b":"2"}}'
    # Same members, other order, nested too, with insignificant whitespace.
    b=$'{\n  "metadata" : { "b" : "2", "a" : "1" },\n\t"payment_method":"pm_1", "method" : "card_on_file",\r\n "gateway":"stripe","currency":"USD",  "amount" : 100 , "order_id":"cj-1"\n}\n'
    c='{ "amount":100,"order_id":"cj-1","currency":"USD","method":"card_on_file","gateway":"stripe","payment_method":"pm_1","metadata":{"a":"1","b":"2"} }'
    pt_post /v1/charges cj-key "$a"
    expect_status 202
    pt_save cj
    expect_replay cj 202 cj-key "$b"
    expect_replay cj 202 cj-key "$c"
    # A value inside a string is significant.
    pt_post /v1/charges cj-key "${a/\"1\"/\" 1\"}"
    expect_error 422 idempotency_key_reused
}

case_quoted_key_equals_bare()
{
    local body
    body=$(charge_body qk-1)
    pt_post /v1/charges '"qk-abc"' "$body"
    expect_status 202
    pt_save qk
    expect_replay qk 202 qk-abc "$body"
    expect_replay qk 202 '"qk-abc"' "$body"
    # And the other way round.
    body=$(charge_body qk-2)
    pt_post /v1/charges qk-def "$body"
    expect_status 202
    pt_save qk2
    expect_replay qk2 202 '"qk-def"' "$body"
    pt_post /v1/charges '"qk-def"' "$(charge_body qk-2 '.amount = 5')"
    expect_error 422 idempotency_key_reused
}

# expect_offline_not_allowed KEY BODY [MESSAGE PART] - 503
# offline_not_allowed with Retry-After, nothing stored, not replayed.
expect_offline_not_allowed()
{
    local key=$1 body=$2 part=${3:-} order
    order=$(jq -r .order_id <<<"$body")
    pt_post /v1/charges "$key" "$body"
    expect_error 503 offline_not_allowed
    expect_match '^[1-9][0-9]*$' "$(pt_header Retry-After)" "Retry-After of the 503"
    expect_no_header Idempotency-Replayed
    expect_contains "$part" "$(pt_message)" "message"
    # Not stored: the same request is evaluated again, not replayed.
    pt_post /v1/charges "$key" "$body"
    expect_error 503 offline_not_allowed
    expect_no_header Idempotency-Replayed
    expect_no_charge "$order"
}

case_offline_not_allowed()
{
    expect_offline_not_allowed na-key-1 "$(charge_body na-1 '.offline = "require_online"')" \
        require_online
    # Methods the customer completes on the gateway's page or code are
    # always online, whatever the client asks.
    expect_offline_not_allowed na-key-2 '{"order_id":"na-2","amount":100,"currency":"CNY","gateway":"alipay","method":"qr"}'
    expect_offline_not_allowed na-key-3 '{"order_id":"na-3","amount":100,"currency":"CNY","gateway":"alipay","method":"qr","offline":"force_offline"}'
    expect_offline_not_allowed na-key-4 '{"order_id":"na-4","amount":100,"currency":"THB","gateway":"2c2p","method":"redirect"}'
    # A currency without offline.limits cannot go offline.
    expect_offline_not_allowed na-key-5 "$(charge_body na-5 '.currency = "THB"')" \
        offline.limits.THB
    # The key was released: the same key serves another request at once.
    pt_post /v1/charges na-key-1 "$(charge_body na-1)"
    expect_status 202
    expect_no_header Idempotency-Replayed
    pt_post /v1/charges na-key-5 "$(charge_body na-5)"
    expect_status 202
}

case_body_too_large_413()
{
    local big
    # 16 KiB is allowed (it is just not a valid charge), one byte more is not.
    big=$(charge_body tl-1 ".subject = \"$(head -c 20000 /dev/zero | tr '\0' s)\"")
    pt_post /v1/charges tl-key "${big:0:16384}"
    expect_error 400 invalid_request
    pt_post /v1/charges tl-key2 "${big:0:16385}"
    expect_error 413 payload_too_large
    # Also without Content-Length (chunked), and with Expect: 100-continue.
    printf '%s' "$big" >"$PT_TMP/big.json"
    pt_request POST /v1/charges -H 'Idempotency-Key: tl-key3' -H 'Transfer-Encoding: chunked' \
        -H 'Content-Type: application/json' --data-binary "@$PT_TMP/big.json"
    expect_error 413 payload_too_large
    pt_request POST /v1/charges -H 'Idempotency-Key: tl-key4' -H 'Expect: 100-continue' \
        -H 'Content-Type: application/json' --data-binary "@$PT_TMP/big.json"
    expect_error 413 payload_too_large
    # Nothing was stored under those keys.
    pt_post /v1/charges tl-key2 "$(charge_body tl-1)"
    expect_status 202
    expect_no_header Idempotency-Replayed
    pt_post /v1/charges tl-key3 "$(charge_body tl-3)"
    expect_status 202
}

# audit ORDER - "from>to cause actor" per audit row, comma-separated.
audit()
{
    pt_get "/v1/charges/$1/events"
    expect_status 200
    jq -r '[.data[] | "\(.from)>\(.to) \(.cause) \(.actor)"] | join(",")' <"$PT_BODY_FILE"
}

# expect_nothing_to_send ORDER - after a 503 the order must not wait in the
# queue: either it was never stored, or it was canceled before anything
# left the device (SPEC 5: the background sync never surprises a client).
expect_nothing_to_send()
{
    pt_get "/v1/charges/$1"
    case $PT_STATUS in
    404) ;;
    200) expect_json '"\(.state) \(.attempts)"' 'CANCELED 0' ;;
    *) fail "GET /v1/charges/$1: $PT_STATUS" ;;
    esac
}

case_first_contact()
{
    # A daemon that has not tried its gateways yet counts them reachable:
    # the first charge for each takes the online path (INIT committed,
    # PROCESSING, provably not sent).  The last case: it rewrites the base
    # configuration and runs a daemon of its own.
    pt_config "del(.gateways.wechat) | .data_dir = \"$PT_TMP/data-first\" |
        .offline.limits.USD.max_amount = 500"
    PT_PORT=""
    PT_WARMUP=0 pt_start
    pt_get /v1/status
    expect_json .online true
    # Stripe, prefer_online, over the offline limit: sent, not sent, and it
    # may not wait: 503, the key released, nothing left to send (the order
    # was committed before the send, so it may remain, CANCELED).
    pt_post /v1/charges fc-key-1 "$(charge_body fc-1 '.amount = 600')"
    expect_error 503 offline_limit_exceeded
    expect_match '^[1-9][0-9]*$' "$(pt_header Retry-After)" "Retry-After"
    expect_contains max_amount "$(pt_message)"
    expect_nothing_to_send fc-1
    pt_post /v1/charges fc-key-1 "$(charge_body fc-1b '.amount = 400')"
    expect_status 202
    expect_no_header Idempotency-Replayed
    # Stripe is believed down now: the next one, a customer at the till,
    # still tries it at once (SPEC 18, its own request the try), and is
    # queued when that send provably did not leave.
    expect_eq "null>INIT created api,INIT>PROCESSING send sync,PROCESSING>INIT not_sent sync" \
        "$(audit fc-1b)" "audit of fc-1b"
    # Alipay, untried, prefer_online within the limits: not sent, queued.
    pt_post /v1/charges fc-key-2 '{"order_id":"fc-2","amount":100,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"287634438256643941"}'
    expect_status 202
    expect_json '"\(.state) \(.attempts)"' 'INIT 0'
    pt_save fc2
    expect_eq "null>INIT created api,INIT>PROCESSING send sync,PROCESSING>INIT not_sent sync" \
        "$(audit fc-2)" "audit of fc-2"
    pt_post /v1/charges fc-key-2 '{"order_id":"fc-2","amount":100,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"287634438256643941"}'
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved fc2)" "$PT_BODY_FILE" "replay of fc-2"
    # 2C2P, untried: a redirect is always online.  The daemon probes the
    # gateway before creating anything: 503 offline_not_allowed, nothing
    # stored.
    pt_post /v1/charges fc-key-3 '{"order_id":"fc-3","amount":100,"currency":"THB","gateway":"2c2p","method":"redirect"}'
    expect_error 503 offline_not_allowed
    expect_match '^[1-9][0-9]*$' "$(pt_header Retry-After)" "Retry-After"
    expect_no_charge fc-3
    pt_post /v1/charges fc-key-3 "$(charge_body fc-3b '.offline = "force_offline"')"
    expect_status 202
    expect_no_header Idempotency-Replayed
    pt_get /v1/status
    expect_json '"\(.online) \(.queue.count) \(.processing)"' 'false 3 0'
    pt_stop
}

pt_init
# WeChat stays unconfigured: a charge for it must be refused as invalid.
pt_config 'del(.gateways.wechat)'
pt_start

pt_case "400 idempotency_key_missing" case_key_missing
pt_case "400 idempotency_key_invalid (space, >255, non-ASCII, control, empty quotes)" case_key_invalid
pt_case "400 invalid_request names each wrong field" case_invalid_request_names_fields
pt_case "400 invalid_request is stored and replayed" case_invalid_request_stored_and_replayed
pt_case "202 queued offline, replayed byte for byte" case_queued_202_and_replay
pt_case "422 idempotency_key_reused, not stored" case_key_reused_422
pt_case "200 same order_id, another key, same parameters; replayed" case_same_order_other_key_200
pt_case "409 order_id_conflict with other parameters; replayed" case_order_conflict_409
pt_case "reordered keys and whitespace replay instead of 422" case_canonical_body_replays
pt_case "quoted key \"abc\" is the bare key abc" case_quoted_key_equals_bare
pt_case "503 offline_not_allowed (require_online, qr, redirect, no limits): not stored, key released" case_offline_not_allowed
pt_case "413 for bodies over 16 KiB, key not stored" case_body_too_large_413
pt_case "first contact with untried gateways: 202 after a send that failed; 503s leave nothing to send" case_first_contact

pt_stop
pt_done
