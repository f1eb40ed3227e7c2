#!/usr/bin/env bash
# test_offline_limits.sh - the offline acceptance policy (SPEC 5, 10):
# per-currency max_amount and max_total, offline.max_count; each refusal is
# 503 offline_limit_exceeded with Retry-After, stores nothing and releases
# the key, so the same key succeeds once the condition passes.
source "$(dirname "$0")/lib.sh"

# Small limits so a handful of charges reaches each of them.
LIMITS='.offline = {limits: {USD: {max_amount: 1000, max_total: 2500},
                             CNY: {max_amount: 50000, max_total: 500000}},
                    max_count: 5}'

usd() { charge_body "$1" ".amount = $2"; }

# expect_limit KEY BODY MESSAGE_PART - 503 offline_limit_exceeded, not stored.
expect_limit()
{
    local key=$1 body=$2 part=$3 order
    order=$(jq -r .order_id <<<"$body")
    pt_post /v1/charges "$key" "$body"
    expect_error 503 offline_limit_exceeded
    expect_match '^[1-9][0-9]*$' "$(pt_header Retry-After)" "Retry-After of the 503"
    expect_no_header Idempotency-Replayed
    expect_contains "$part" "$(pt_message)" "message"
    pt_get "/v1/charges/$order"
    expect_error 404 not_found
}

# expect_queue COUNT USD_COUNT USD_AMOUNT - the queue figures of /v1/status.
expect_queue()
{
    pt_get /v1/status
    expect_status 200
    expect_json '"\(.queue.count) \(.queue.by_currency.USD.count // 0) \(.queue.by_currency.USD.amount // 0)"' \
        "$1 $2 $3"
}

case_max_amount()
{
    expect_limit ma-key "$(usd ma-1 1001)" offline.limits.USD.max_amount
    # Exactly the limit is allowed.
    pt_post /v1/charges ma-key-ok "$(usd ma-2 1000)"
    expect_status 202
    expect_queue 1 1 1000
    # force_offline is held to the same limits.
    expect_limit ma-key-f "$(usd ma-3 1001 | jq -c '.offline = "force_offline"')" max_amount
    # Released: the same key with an amount inside the limit is accepted.
    pt_post /v1/charges ma-key "$(usd ma-1 900)"
    expect_status 202
    expect_no_header Idempotency-Replayed
    expect_queue 2 2 1900
}

case_max_total()
{
    # Queue so far: 1000 + 900 USD.  500 more makes 2400; then 101 would
    # pass max_total (2500) and is refused, while 100 reaches it exactly.
    pt_post /v1/charges mt-key-1 "$(usd mt-1 500)"
    expect_status 202
    expect_queue 3 3 2400
    expect_limit mt-key-2 "$(usd mt-2 101)" offline.limits.USD.max_total
    pt_post /v1/charges mt-key-3 "$(usd mt-3 100)"
    expect_status 202
    expect_queue 4 4 2500
    # The same key stays refused while the condition holds (not stored).
    expect_limit mt-key-2 "$(usd mt-2 101)" max_total
    expect_limit mt-key-4 "$(usd mt-4 1)" offline.limits.USD.max_total
}

case_max_count()
{
    # Four queued charges; a fifth fills the queue for every currency.
    pt_post /v1/charges mc-key-0 "$(charge_body mc-0 '.currency = "CNY" | .amount = 100')"
    expect_status 202
    expect_queue 5 4 2500
    expect_limit mc-key "$(charge_body mc-1 '.currency = "CNY" | .amount = 100')" offline.max_count
    expect_limit mc-key-usd "$(usd mc-2 1)" offline.max_count
}

case_cancel_frees_room()
{
    # Canceling a queued charge frees one place and 1000 USD of the total:
    # the keys refused above now succeed, with the same requests.
    pt_post /v1/charges/ma-2/cancel cancel-ma-2 -
    expect_status 200
    expect_json '.state' CANCELED
    expect_queue 4 3 1500
    pt_post /v1/charges mt-key-2 "$(usd mt-2 101)"
    expect_status 202
    expect_no_header Idempotency-Replayed
    pt_save mt2
    expect_queue 5 4 1601
    # From now on that key replays its 202.
    pt_post /v1/charges mt-key-2 "$(usd mt-2 101)"
    expect_status 202
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved mt2)" "$PT_BODY_FILE" "replay of mt-key-2"
    expect_limit mc-key "$(charge_body mc-1 '.currency = "CNY" | .amount = 100')" offline.max_count
    pt_post /v1/charges/mt-3/cancel cancel-mt-3 '{}'
    expect_status 200
    pt_post /v1/charges mc-key "$(charge_body mc-1 '.currency = "CNY" | .amount = 100')"
    expect_status 202
    pt_get /v1/status
    expect_json '"\(.queue.count) \(.queue.by_currency.CNY.count) \(.queue.by_currency.CNY.amount)"' \
        "5 2 200"
}

case_limits_hold_across_restart()
{
    # The totals come from the database, not from memory.  (The last case:
    # the daemon restarted here belongs to this case's subshell.)
    pt_stop
    pt_start
    expect_queue 5 3 1501
    expect_limit rs-key "$(usd rs-1 1000)" offline.max_count
    pt_stop
}

case_status_shape()
{
    pt_get /v1/status
    expect_status 200
    expect_json '.online' false
    expect_json '.queue | keys | join(",")' by_currency,count,oldest_age_s
    expect_json '.queue.oldest_age_s | (type == "number" and . >= 0)' true
    expect_json '.queue.by_currency | keys | join(",")' CNY,USD
    expect_json '[.pending, .unknown, .review] | map(tostring) | join(",")' 0,0,0
    expect_json '.version | test("^[0-9]+\\.[0-9]+\\.[0-9]+")' true
}

pt_init
pt_config "$LIMITS"
pt_start

pt_case "503 offline_limit_exceeded: offline.limits.<CUR>.max_amount" case_max_amount
pt_case "503 offline_limit_exceeded: offline.limits.<CUR>.max_total" case_max_total
pt_case "503 offline_limit_exceeded: offline.max_count" case_max_count
pt_case "canceling a queued charge frees room; the refused keys then succeed" case_cancel_frees_room
pt_case "GET /v1/status shape and queue figures" case_status_shape
pt_case "queue totals survive a restart" case_limits_hold_across_restart

pt_done
