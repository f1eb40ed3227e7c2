#!/usr/bin/env bash
# test_cancel_review.sh - POST /v1/charges/{order_id}/cancel and /review:
# the guarded operations beside create, their replays, the audit trail
# (GET /v1/charges/{order_id}/events) with the operator as actor.
#
# Not covered here: 409 charge_not_cancelable needs a SUCCESS or FAILED
# charge, and with every gateway unreachable none can be produced; cancel of
# PROCESSING/UNKNOWN/PENDING (gateway cancel, 202) likewise.  Those need a
# gateway that answers: the simulator.
source "$(dirname "$0")/lib.sh"

new_charge()
{
    pt_post /v1/charges "create-$1" "$(charge_body "$1")"
    expect_status 202
}

# A customer-present charge for a gateway believed down tries it once
# (SPEC 18): the first rows of its trail.
TRIED=$'null>INIT created api false\nINIT>PROCESSING send sync false\nPROCESSING>INIT not_sent sync false'

# audit ORDER - "from>to cause actor refused" per audit row, one line each.
audit()
{
    pt_get "/v1/charges/$1/events"
    expect_status 200
    jq -r '.data[] | "\(.from)>\(.to) \(.cause) \(.actor) \(.refused)"' <"$PT_BODY_FILE"
}

case_cancel_init()
{
    new_charge c-1
    pt_post /v1/charges/c-1/cancel cancel-c-1 -
    expect_status 200
    expect_no_header Idempotency-Replayed
    expect_json '"\(.order_id) \(.state) \(.review)"' 'c-1 CANCELED false'
    pt_save c1
    # Replays: the same key, with no body or with {} (the same request).
    pt_post /v1/charges/c-1/cancel cancel-c-1 -
    expect_status 200
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved c1)" "$PT_BODY_FILE" "cancel replay"
    pt_post /v1/charges/c-1/cancel cancel-c-1 '{ }'
    expect_status 200
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved c1)" "$PT_BODY_FILE" "cancel replay with {}"
    # Another key: the charge is already canceled, 200 again, no new row.
    pt_post /v1/charges/c-1/cancel cancel-c-1-again -
    expect_status 200
    expect_no_header Idempotency-Replayed
    expect_json .state CANCELED
    pt_get /v1/charges/c-1
    expect_json .state CANCELED
    expect_eq "$TRIED"$'\nINIT>CANCELED canceled_by_client api false' \
        "$(audit c-1)" "audit trail of c-1"
    # The order is spent: creating it again gives the canceled charge.
    pt_post /v1/charges create-c-1-again "$(charge_body c-1)"
    expect_status 200
    expect_json .state CANCELED
}

case_cancel_unknown_not_stored()
{
    pt_post /v1/charges/c-2/cancel cancel-c-2 -
    expect_error 404 not_found
    expect_contains c-2 "$(pt_message)"
    pt_post /v1/charges/c-2/cancel cancel-c-2 -
    expect_error 404 not_found
    expect_no_header Idempotency-Replayed
    # The order appears; the same key now cancels it.
    new_charge c-2
    pt_post /v1/charges/c-2/cancel cancel-c-2 -
    expect_status 200
    expect_no_header Idempotency-Replayed
    expect_json .state CANCELED
    # A path that cannot be an order id.
    pt_post '/v1/charges/bad%20id/cancel' cancel-bad -
    expect_error 404 not_found
}

case_cancel_bad_requests()
{
    new_charge c-3
    pt_post /v1/charges/c-3/cancel - -
    expect_error 400 idempotency_key_missing
    pt_post /v1/charges/c-3/cancel 'bad key' -
    expect_error 400 idempotency_key_invalid
    pt_post /v1/charges/c-3/cancel cancel-c-3 '{"reason":"changed mind"}'
    expect_error 400 invalid_request
    expect_no_header Idempotency-Replayed
    pt_save c3
    pt_post /v1/charges/c-3/cancel cancel-c-3 '{"reason":"changed mind"}'
    expect_status 400
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved c3)" "$PT_BODY_FILE" "400 replay"
    pt_post /v1/charges/c-3/cancel cancel-c-3 -
    expect_error 422 idempotency_key_reused
    pt_get /v1/charges/c-3
    expect_json .state INIT
    # A key is scoped to its operation: the create key of c-3 is another
    # request here, not a reuse.
    pt_post /v1/charges/c-3/cancel create-c-3 -
    expect_status 200
    expect_json .state CANCELED
    pt_get /v1/charges/c-3/cancel
    expect_error 405 method_not_allowed
    expect_header Allow POST
}

case_review_hold_clear()
{
    new_charge rv-1
    pt_post /v1/charges/rv-1/review hold-1 '{"action":"hold","operator":"alice","note":"amount looks wrong"}'
    expect_status 200
    expect_no_header Idempotency-Replayed
    expect_json '"\(.state) \(.review) \(.review_reason)"' 'INIT true amount looks wrong'
    pt_save hold1
    pt_post /v1/charges/rv-1/review hold-1 '{"operator":"alice","note":"amount looks wrong","action":"hold"}'
    expect_status 200
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved hold1)" "$PT_BODY_FILE" "review replay"
    pt_get /v1/status
    expect_json .review 1
    pt_post /v1/charges/rv-1/review clear-1 '{"action":"clear","operator":"bob"}'
    expect_status 200
    expect_json '"\(.review) \(.review_reason)"' 'false null'
    pt_save clear1
    pt_post /v1/charges/rv-1/review clear-1 '{"action":"clear","operator":"bob"}'
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved clear1)" "$PT_BODY_FILE" "clear replay"
    pt_post /v1/charges/rv-1/review hold-2 '{"action":"hold","operator":"carol.k@shop-3"}'
    expect_json '"\(.review) \(.review_reason)"' 'true held by operator'
    expect_eq "$TRIED
INIT>INIT review_raised operator:alice false
INIT>INIT review_cleared operator:bob false
INIT>INIT review_raised operator:carol.k@shop-3 false" "$(audit rv-1)" "audit trail of rv-1"
    pt_get /v1/charges/rv-1/events
    expect_json '.data[3].detail' 'amount looks wrong' # after the creation and its try
    expect_json '[.data[].created_at | test("Z$")] | all' true
    expect_json '[.data[].seq] | (. == (sort | unique))' true
    pt_get /v1/status
    expect_json .review 1
}

case_review_bad_requests()
{
    local msg
    new_charge rv-2
    pt_post /v1/charges/rv-2/review rv-bad '{"action":"approve","operator":"a b","colour":"red"}'
    expect_error 400 invalid_request
    msg=$(pt_message)
    for field in action operator colour; do
        expect_match "(^|; )$field: " "$msg" "message names $field"
    done
    pt_save rvbad
    pt_post /v1/charges/rv-2/review rv-bad '{"action":"approve","operator":"a b","colour":"red"}'
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved rvbad)" "$PT_BODY_FILE" "400 replay"
    pt_post /v1/charges/rv-2/review rv-bad-2 '{"action":"hold"}'
    expect_error 400 invalid_request
    expect_match '(^|; )operator: required' "$(pt_message)"
    pt_post /v1/charges/rv-2/review - '{"action":"hold","operator":"alice"}'
    expect_error 400 idempotency_key_missing
    pt_post /v1/charges/rv-none/review rv-none '{"action":"hold","operator":"alice"}'
    expect_error 404 not_found
    pt_post /v1/charges/rv-none/review rv-none '{"action":"hold","operator":"alice"}'
    expect_error 404 not_found
    expect_no_header Idempotency-Replayed
    pt_get /v1/charges/rv-2
    expect_json .review false
    pt_get /v1/charges/rv-none/events
    expect_error 404 not_found
}

case_cancel_by_operator()
{
    new_charge c-op
    # The operator page names who canceled: the trail says operator:<name>.
    pt_post /v1/charges/c-op/cancel cancel-c-op-bad '{"operator":"ann smith"}'
    expect_error 400 invalid_request
    expect_contains operator "$(pt_message)" "message"
    pt_post /v1/charges/c-op/cancel cancel-c-op-two '{"operator":"ann","reason":"x"}'
    expect_error 400 invalid_request
    pt_get /v1/charges/c-op
    expect_json .state INIT
    pt_post /v1/charges/c-op/cancel cancel-c-op '{"operator":"ann"}'
    expect_status 200
    expect_json .state CANCELED
    pt_get /v1/charges/c-op/events
    expect_json '[.data[] | select(.to == "CANCELED")] | map("\(.cause) \(.actor)") | join(",")' \
        "canceled_by_client operator:ann"
}

pt_init
pt_start

pt_case "cancel INIT: 200 CANCELED, replayed, audited; the order stays spent" case_cancel_init
pt_case "cancel of an unknown order: 404, not stored" case_cancel_unknown_not_stored
pt_case "cancel: missing/invalid key, a body, 400 replayed, 422, 405" case_cancel_bad_requests
pt_case "cancel by an operator (the operator page): audit actor operator:<name>; a bad name or another field is 400" case_cancel_by_operator
pt_case "review hold/clear by operators: audit actor operator:<name>, replays" case_review_hold_clear
pt_case "review: bad bodies named and replayed, 404 not stored" case_review_bad_requests

pt_stop
pt_done
