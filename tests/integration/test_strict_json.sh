#!/usr/bin/env bash
# test_strict_json.sh - SPEC 5 "Input strictness" for JSON bodies over real
# HTTP: U+0000, invalid UTF-8, duplicate names, numbers that are not plain
# integers.  Each is a 400 invalid_request naming the field, stored and
# replayed like any 400, and every reply is valid UTF-8 JSON (a reply built
# from the bad bytes would not be).
source "$(dirname "$0")/lib.sh"

# The last reply is valid UTF-8 (iconv, not jq: jq silently replaces bad
# bytes) and JSON.
expect_clean_json()
{
    iconv -f UTF-8 -t UTF-8 <"$PT_BODY_FILE" >/dev/null 2>&1 ||
        fail "reply of ${PT_LAST_REQ:-the last request} is not valid UTF-8"
    jq -e . <"$PT_BODY_FILE" >/dev/null 2>&1 ||
        fail "reply of ${PT_LAST_REQ:-the last request} is not JSON"
}

# expect_refused FIELD_REGEX - 400 invalid_request, clean, naming the field.
expect_refused()
{
    expect_error 400 invalid_request
    expect_clean_json
    expect_match "(^|; )$1: " "$(pt_message)" "message names $1"
}

expect_no_charge()
{
    pt_get "/v1/charges/$1"
    expect_error 404 not_found
}

case_nul_in_a_string()
{
    local a b
    a=$(charge_body NUL | sed 's/"NUL"/"NUL\\u0000X"/')
    b=$(charge_body NUL | sed 's/"NUL"/"NUL\\u0000Y"/')
    pt_post /v1/charges nul-key "$a"
    expect_refused order_id
    expect_contains U+0000 "$(pt_message)"
    pt_save nul
    expect_no_charge NUL
    # Stored and replayed; the body that differs after the NUL is another
    # request, not a replay of the first.
    pt_post /v1/charges nul-key "$a"
    expect_status 400
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved nul)" "$PT_BODY_FILE" "replay of the NUL body"
    pt_post /v1/charges nul-key "$b"
    expect_error 422 idempotency_key_reused
    expect_no_charge NUL
}

case_amount_plain_integer_only()
{
    local i=0 amount
    for amount in 0123 1200.0 1.2e3 9223372036854775808 1e30 1e400 -5 0 '"100"'; do
        i=$((i + 1))
        pt_post /v1/charges "amt-$i" "$(charge_body "amt-$i" | sed "s/\"amount\":100/\"amount\":$amount/")"
        expect_refused amount
        expect_no_charge "amt-$i"
    done
    # The largest integer is an integer: refused for limits.max_amount only.
    pt_post /v1/charges amt-max "$(charge_body amt-max '.amount = 1' | sed 's/"amount":1/"amount":9223372036854775807/')"
    expect_refused amount
    expect_match '^amount: must not exceed limits.max_amount' "$(pt_message)"
}

case_invalid_utf8()
{
    local body
    body=$(charge_body u8-1 | sed $'s/"Coffee"/"Caf\xc3("/')
    pt_post /v1/charges u8-key "$body"
    expect_refused subject
    pt_save u8
    pt_post /v1/charges u8-key "$body"
    expect_status 400
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved u8)" "$PT_BODY_FILE" "replay of the invalid UTF-8 body"
    # An encoded surrogate, an overlong slash.
    pt_post /v1/charges u8-key-2 "$(charge_body u8-2 | sed $'s/"Coffee"/"\xed\xa0\x80"/')"
    expect_refused subject
    pt_post /v1/charges u8-key-3 "$(charge_body u8-3 | sed $'s/"Coffee"/"\xc0\xaf"/')"
    expect_refused subject
    # Bad bytes in a member name are never echoed.
    pt_post /v1/charges u8-key-4 $'{"colo\xffur":"red"}'
    expect_refused body
    expect_no_charge u8-1
}

case_duplicate_names()
{
    pt_post /v1/charges dup-1 "$(charge_body dup-1 | sed 's/}$/,"amount":200}/')"
    expect_refused amount
    expect_match '^amount: given twice' "$(pt_message)"
    pt_post /v1/charges dup-2 "$(charge_body dup-2 | sed 's/}$/,"metadata":{"lane":"3","l\\u0061ne":"4"}}/')"
    expect_refused 'metadata\.lane'
    expect_match '^metadata\.lane: given twice' "$(pt_message)"
    expect_no_charge dup-1
    expect_no_charge dup-2
}

case_cancel_and_review_bodies()
{
    pt_post /v1/charges sc-key "$(charge_body sc-1)"
    expect_status 202
    # Trailing bytes after {} used to be ignored, and the charge canceled.
    pt_post /v1/charges/sc-1/cancel sc-cancel '{} x'
    expect_refused body
    pt_post /v1/charges/sc-1/review sc-review '{"action":"hold","operator":"ann","action":"clear"}'
    expect_refused action
    pt_post /v1/charges/sc-1/review sc-review-2 '{"action":"hold","operator":"ann","note":"ok\u0000 really"}'
    expect_refused note
    pt_get /v1/charges/sc-1
    expect_json '"\(.state) \(.review)"' 'INIT false'
}

pt_init
pt_start

pt_case "U+0000 in a string: 400 naming the field; bodies differing after it do not replay each other" case_nul_in_a_string
pt_case "amount: only a plain JSON integer (0123, 1200.0, 1.2e3, 2^63, 1e30, -5, 0 refused)" case_amount_plain_integer_only
pt_case "invalid UTF-8: 400 naming the field, valid UTF-8 reply, replayed" case_invalid_utf8
pt_case "duplicate names, top level and in metadata, escaped too" case_duplicate_names
pt_case "cancel and review bodies are checked the same way" case_cancel_and_review_bodies

pt_stop
pt_done
