#!/usr/bin/env bash
# test_read_api.sh - the read side and the small endpoints: GET a charge,
# the paged list, /v1/status, /healthz, /metrics, POST /v1/sync, unknown
# paths and wrong methods.
source "$(dirname "$0")/lib.sh"

case_get_charge()
{
    pt_post /v1/charges g-key "$(charge_body g-1)"
    expect_status 202
    pt_save g1
    pt_get /v1/charges/g-1
    expect_status 200
    expect_header Content-Type application/json
    expect_no_header Idempotency-Replayed
    expect_same_bytes "$(pt_saved g1)" "$PT_BODY_FILE" "GET /v1/charges/g-1"
    expect_json 'keys | sort | join(",")' \
        amount,amount_refunded,attempts,created_at,currency,error,gateway,gateway_trade_no,id,method,offline,order_id,refunds,review,review_reason,state,subject,updated_at
    pt_get /v1/charges/g-none
    expect_error 404 not_found
    expect_contains g-none "$(pt_message)"
    pt_get '/v1/charges/has%20space'
    expect_error 404 not_found
    pt_get "/v1/charges/$(printf 'x%.0s' $(seq 65))"
    expect_error 404 not_found
    pt_request DELETE /v1/charges/g-1
    expect_error 405 method_not_allowed
    expect_header Allow GET
}

case_list_paging()
{
    local i ids after page
    for i in 1 2 3 4 5; do
        pt_post /v1/charges "l-key-$i" "$(charge_body "l-$i")"
        expect_status 202
    done
    pt_post /v1/charges/l-3/cancel l-cancel -
    expect_status 200
    # INIT charges (g-1 from the case before, l-1 l-2 l-4 l-5) two at a time.
    pt_get '/v1/charges?state=INIT&limit=100'
    expect_json '[.data[].order_id] | join(",")' g-1,l-1,l-2,l-4,l-5
    expect_json .has_more false
    ids=$(jq -r '[.data[].id] | map(tostring) | join(" ")' <"$PT_BODY_FILE")
    # The first page has no cursor.
    after=""
    for page in "g-1,l-1 true" "l-2,l-4 true" "l-5 false"; do
        pt_get "/v1/charges?state=INIT&limit=2${after:+&after=$after}"
        expect_status 200
        expect_json '"\([.data[].order_id] | join(",")) \(.has_more)"' "$page"
        expect_json '[.data[].state] | unique | join(",")' INIT
        after=$(jq '.data[-1].id' <"$PT_BODY_FILE")
    done
    pt_get "/v1/charges?state=INIT&limit=2&after=$after"
    expect_json '"\(.data) \(.has_more)"' '[] false'
    # Exactly a page full is not "more".
    pt_get "/v1/charges?state=INIT&limit=5"
    expect_json '"\(.data | length) \(.has_more)"' '5 false'
    pt_get "/v1/charges?state=INIT&limit=4"
    expect_json '"\(.data | length) \(.has_more)"' '4 true'
    pt_get '/v1/charges?state=CANCELED'
    expect_json "[.data[] | $NOWARM | .order_id] | join(\",\")" l-3
    pt_get '/v1/charges?state=SUCCESS'
    expect_json '"\(.data) \(.has_more)"' '[] false'
    # No filter: every charge, ordered by id.
    pt_get '/v1/charges'
    expect_json "[.data[] | $NOWARM | .order_id] | join(\",\")" g-1,l-1,l-2,l-3,l-4,l-5
    expect_json '[.data[].id] | (. == sort)' true
    expect_eq "$ids" "$(pt_get '/v1/charges?state=INIT'; jq -r '[.data[].id] | map(tostring) | join(" ")' <"$PT_BODY_FILE")" \
        "ids of the INIT charges"
}

case_list_bad_params()
{
    local q
    for q in 'state=BOGUS' 'state=init' 'limit=0' 'limit=101' 'limit=abc' 'after=-1' 'after=1x'; do
        pt_get "/v1/charges?$q"
        expect_error 400 invalid_request
        expect_contains "'${q%%=*}'" "$(pt_message)" "message for $q"
    done
    # An empty value means the default: ?after= starts from the beginning.
    pt_get "/v1/charges?limit=100"
    expect_status 200
    local all
    all=$(jq -c '[.data[].id]' <"$PT_BODY_FILE")
    pt_get "/v1/charges?after=&limit=100"
    expect_status 200
    expect_json '[.data[].id] | tojson' "$all"
}

case_status()
{
    pt_get /v1/status
    expect_status 200
    expect_json 'keys | sort | join(",")' clock,gateways,online,pending,processing,queue,refunds,review,storage,unknown,version
    # SPEC 5, 15: whether a charge would be stored, and the room for it.
    expect_json '.storage | "\(.writable) \(.free_bytes > 0) \(has("reason"))"' 'true true false'
    expect_json '.online' false
    # SPEC 17: on a machine whose clock is right, payterm trusts it.
    expect_json '"\(.clock.trusted) \(.clock.provisional)"' "true false"
    # Each configured gateway as last seen (here: none can be reached).
    expect_json '.gateways | to_entries | map("\(.key)=\(.value.online)") | sort | join(",")' \
        2c2p=false,alipay=false,stripe=false,wechat=false
    # SPEC 5a: refunds in progress.
    expect_json '.refunds | keys | sort | join(",")' pending,processing,queued,review,unknown
    expect_json '"\(.queue.count) \(.queue.by_currency | tojson) \(.pending) \(.unknown) \(.review)"' \
        '5 {"USD":{"count":5,"amount":500}} 0 0 0'
    expect_json '.queue.oldest_age_s | (type == "number" and . >= 0)' true
    expect_eq "$("$PAYTERM" version | grep -o '[0-9][0-9.]*' | head -n 1)" \
        "$(jq -r .version <"$PT_BODY_FILE")" "version in /v1/status and payterm version"
}

case_healthz()
{
    pt_get /healthz
    expect_status 200
    expect_json .status ok
    pt_request POST /healthz
    expect_error 405 method_not_allowed
}

case_metrics()
{
    local name text
    pt_get /metrics
    expect_status 200
    expect_match '^text/plain; version=0\.0\.4' "$(pt_header Content-Type)" "Content-Type of /metrics"
    text=$PT_BODY
    # Prometheus text format: comments, or name{labels} value.
    local bad
    bad=$(grep -vE '^(# (HELP|TYPE) [a-z_:][a-z0-9_:]* .+|[a-z_:][a-z0-9_:]*(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eE]+(Inf)?)$' \
        <<<"$text" | head -n 3)
    [ -z "$bad" ] || fail "lines that are not Prometheus text format:"$'\n'"$bad"
    # SPEC 5: charges by state, queue depth and age, sync attempts by
    # gateway, notifications, request latency histogram.
    for name in payterm_charges payterm_queue_depth payterm_queue_oldest_age_seconds \
        payterm_sync_attempts_total payterm_notifications_total \
        payterm_http_request_duration_seconds payterm_idempotency_total \
        payterm_http_responses_total payterm_refunds payterm_refunds_review \
        payterm_storage_writable payterm_storage_free_bytes; do
        grep -qE "^# TYPE $name (gauge|counter|histogram)\$" <<<"$text" ||
            fail "/metrics has no '# TYPE $name' line"
        grep -qE "^${name}(_bucket|_sum|_count)?(\{| )" <<<"$text" ||
            fail "/metrics has no sample of $name"
    done
    local canceled
    canceled=$(pt_get '/v1/charges?state=CANCELED&limit=100'; jq '.data | length' <"$PT_BODY_FILE")
    expect_contains 'payterm_charges{state="INIT"} 5' "$text"
    expect_contains "payterm_charges{state=\"CANCELED\"} $canceled" "$text"
    expect_contains 'payterm_charges{state="SUCCESS"} 0' "$text"
    # Every configured gateway was found unreachable (lib.sh).
    expect_contains 'payterm_gateway_online{gateway="stripe"} 0' "$text"
    expect_contains 'payterm_online 0' "$text"
    expect_contains 'payterm_storage_writable 1' "$text"
    expect_contains 'payterm_queue_depth 5' "$text"
    expect_contains 'payterm_queue_amount{currency="USD"} 500' "$text"
    expect_contains '# TYPE payterm_http_request_duration_seconds histogram' "$text"
    expect_contains 'payterm_http_request_duration_seconds_bucket{le="+Inf"}' "$text"
    expect_contains 'payterm_http_request_duration_seconds_count' "$text"
    expect_contains 'payterm_sync_attempts_total{gateway="alipay",outcome=' "$text"
    # Counters move: replays are counted.
    local before after
    before=$(awk '/^payterm_idempotency_total\{result="replayed"\}/ {print $2}' <<<"$text")
    pt_post /v1/charges g-key "$(charge_body g-1)"
    expect_header Idempotency-Replayed true
    pt_get /metrics
    after=$(awk '/^payterm_idempotency_total\{result="replayed"\}/ {print $2}' <<<"$PT_BODY")
    expect_eq $((before + 1)) "$after" "replays counted in payterm_idempotency_total"
}

case_sync()
{
    pt_request POST /v1/sync
    expect_status 202
    expect_header Content-Type application/json
    pt_get /v1/sync
    expect_error 405 method_not_allowed
    expect_header Allow POST
}

case_unknown_paths()
{
    local p
    # (GET / is the operator page.)
    for p in /index.html /v1 /v2/charges /v1/charges/g-1/refund /v1/chargesX; do
        pt_get "$p"
        expect_error 404 not_found
    done
    # Only the four gateways have notification routes.
    pt_post /notify/paypal - 'a=b'
    expect_error 404 not_found
    pt_post /webhooks/alipay - '{}'
    expect_error 404 not_found
}

pt_init
pt_start

pt_case "GET /v1/charges/{order_id}: 200, 404" case_get_charge
pt_case "GET /v1/charges?state=&limit=&after=: paging with has_more" case_list_paging
pt_case "GET /v1/charges: bad query parameters are 400" case_list_bad_params
pt_case "GET /v1/status: shape and queue figures" case_status
pt_case "GET /healthz: 200" case_healthz
pt_case "GET /metrics: Prometheus text with the documented metrics" case_metrics
pt_case "POST /v1/sync: 202" case_sync
pt_case "unknown paths: 404" case_unknown_paths

pt_stop
pt_done
