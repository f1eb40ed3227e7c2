#!/usr/bin/env bash
# test_events.sh - the fulfilment feed GET /v1/events (SPEC 6): each event
# once, seq strictly increasing, paging with after/limit, long-poll that
# wakes on a commit from another client and ends empty after the wait.
#
# With the gateways unreachable the events that can be produced are
# charge.canceled and charge.review; charge.succeeded / charge.failed need a
# gateway that answers.  The cases read the feed from FEED0, its position
# when they start (after any warm-up event, see lib.sh).
source "$(dirname "$0")/lib.sh"

create() { pt_post /v1/charges "create-$1" "$(charge_body "$1")"; expect_status 202; }
cancel() { pt_post "/v1/charges/$1/cancel" "cancel-$1" -; expect_status 200; }
review() { pt_post "/v1/charges/$1/review" "review-$1-$2-$RANDOM$RANDOM" "{\"action\":\"$2\",\"operator\":\"op\"}"; expect_status 200; }

# This script's part of the feed as "type order_id" lines.
feed_lines() { pt_get "/v1/events?limit=100&after=$FEED0"; expect_status 200; jq -r '.data[] | "\(.type) \(.order_id)"' <"$PT_BODY_FILE"; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

case_feed_start()
{
    # Nothing in the feed yet (a warm-up cancel aside); its end is empty.
    pt_get '/v1/events?limit=100'
    expect_status 200
    expect_json '[.data[] | select(.type != "charge.canceled" or (.order_id | startswith("warmup-") | not))]' '[]'
    expect_json .next "$FEED0"
    pt_get "/v1/events?after=$FEED0&wait=0"
    expect_json '"\(.data) \(.next)"' "[] $FEED0"
}

case_each_event_once()
{
    local i
    for i in 1 2 3 4 5; do create "ev-$i"; done
    cancel ev-2
    review ev-3 hold
    cancel ev-4
    # Repeats that change nothing add no event: a cancel replayed, a cancel
    # under another key, a hold of a held charge, a clear.
    cancel ev-2
    pt_post /v1/charges/ev-2/cancel cancel-ev-2-b -
    expect_status 200
    review ev-3 hold
    review ev-3 clear
    # A second raise after a clear is a new raise.
    review ev-3 hold
    cancel ev-3
    expect_eq "charge.canceled ev-2
charge.review ev-3
charge.canceled ev-4
charge.review ev-3
charge.canceled ev-3" "$(feed_lines)" "the feed"
    pt_get "/v1/events?limit=100&after=$FEED0"
    expect_json "[.data[].seq] | (length == 5 and . == (sort | unique) and all(. > $FEED0))" true
    expect_json '.next == .data[-1].seq' true
    # Each event carries the charge as it was when the event was written.
    expect_json '[.data[] | .charge.order_id == .order_id] | all' true
    expect_json '[.data[] | .charge.state] | join(",")' CANCELED,INIT,CANCELED,INIT,CANCELED
    expect_json '[.data[] | .charge.review] | map(tostring) | join(",")' false,true,false,true,true
    expect_json '[.data[].created_at | test("^[0-9-]{10}T[0-9:.]+Z$")] | all' true
}

case_paging()
{
    local after=0 seen="" seq pages=0 all
    pt_get '/v1/events?limit=100'
    all=$(jq -r '[.data[].seq] | map(tostring) | join(" ")' <"$PT_BODY_FILE")
    # One event per page, following next; every seq once, in order.
    while :; do
        pt_get "/v1/events?after=$after&limit=1"
        expect_status 200
        [ "$(jq '.data | length' <"$PT_BODY_FILE")" = 0 ] && break
        expect_json '.data | length' 1
        seq=$(jq '.data[0].seq' <"$PT_BODY_FILE")
        expect_json .next "$seq"
        [ "$seq" -gt "$after" ] || fail "seq $seq after $after is not increasing"
        seen="${seen:+$seen }$seq"
        after=$seq
        pages=$((pages + 1))
        [ "$pages" -le 100 ] || fail "paging does not end"
    done
    expect_eq "$all" "$seen" "seqs seen while paging"
    # The empty page keeps the position.
    expect_json '"\(.data) \(.next)"' "[] $after"
    pt_get "/v1/events?after=$((after + 1000))"
    expect_json '"\(.data) \(.next)"' "[] $((after + 1000))"
}

case_bad_params()
{
    local q
    for q in 'after=-1' 'after=x' 'limit=0' 'limit=101' 'wait=61' 'wait=-1' 'wait=1.5'; do
        pt_get "/v1/events?$q"
        expect_error 400 invalid_request
        expect_contains "'${q%%=*}'" "$(pt_message)" "message for $q"
    done
    # wait is 0-60 s, said exactly: 60 is accepted (with an event waiting it
    # answers at once), 61 is a 400 naming wait and the range.
    create bp-1
    cancel bp-1
    pt_get "/v1/events?after=0&wait=60"
    expect_status 200
    expect_json '.data | length > 0' true
    pt_get "/v1/events?after=0&wait=61"
    expect_error 400 invalid_request
    expect_contains "'wait' must be an integer from 0 to 60" "$(pt_message)" "message for wait=61"
    # Empty values mean the defaults.
    pt_get "/v1/events?after=&limit=&wait="
    expect_status 200
    pt_request POST /v1/events
    expect_error 405 method_not_allowed
    expect_header Allow GET
}

case_long_poll_wakes()
{
    local next t0 t1 bg
    create lp-1
    pt_get /v1/events
    next=$(jq .next <"$PT_BODY_FILE")
    t0=$(now_ms)
    curl -s --max-time 20 -o "$PT_TMP/lp.body" "$PT_URL/v1/events?after=$next&wait=5" &
    bg=$!
    pt_wait_requests_read
    pt_post /v1/charges/lp-1/cancel cancel-lp-1 -
    expect_status 200
    wait "$bg" || fail "long-poll curl failed"
    t1=$(now_ms)
    [ $((t1 - t0)) -lt 4000 ] || fail "long-poll took $((t1 - t0)) ms: it did not wake on the commit"
    PT_BODY_FILE=$PT_TMP/lp.body
    expect_json '[.data[] | "\(.type) \(.order_id)"] | join(",")' 'charge.canceled lp-1'
    expect_json '.data[0].seq > '"$next" true
    expect_json '.next == .data[0].seq' true
}

case_long_poll_times_out()
{
    local next t0 t1
    pt_get /v1/events
    next=$(jq .next <"$PT_BODY_FILE")
    t0=$(now_ms)
    pt_get "/v1/events?after=$next&wait=1"
    t1=$(now_ms)
    expect_status 200
    expect_json '"\(.data) \(.next)"' "[] $next"
    [ $((t1 - t0)) -ge 900 ] || fail "wait=1 returned after $((t1 - t0)) ms"
    [ $((t1 - t0)) -lt 5000 ] || fail "wait=1 returned after $((t1 - t0)) ms"
    # With events already there, a long-poll answers at once.
    t0=$(now_ms)
    pt_get "/v1/events?after=0&wait=10"
    t1=$(now_ms)
    expect_json '.data | length > 0' true
    [ $((t1 - t0)) -lt 5000 ] || fail "a long-poll with events waiting took $((t1 - t0)) ms"
}

case_events_across_restart()
{
    local before
    pt_get '/v1/events?limit=100'
    cp "$PT_BODY_FILE" "$PT_TMP/events.before"
    pt_stop
    pt_start
    # The restart may add warm-up events at the end: everything before is
    # the same, byte for byte.
    pt_get '/v1/events?limit=100'
    jq -c --slurpfile b "$PT_TMP/events.before" '.data[:($b[0].data | length)]' <"$PT_BODY_FILE" \
        >"$PT_TMP/events.after"
    jq -c '.data' <"$PT_TMP/events.before" >"$PT_TMP/events.before.data"
    expect_same_bytes "$PT_TMP/events.before.data" "$PT_TMP/events.after" "the feed after a restart"
    expect_json "[.data[$(jq '.data | length' <"$PT_TMP/events.before"):][] | .order_id | startswith(\"warmup-\")] | all" true
    # seq keeps growing after a restart.
    before=$(jq .next <"$PT_BODY_FILE")
    create rs-1
    cancel rs-1
    pt_get "/v1/events?after=$before"
    expect_json '"\(.data | length) \(.data[0].seq > '"$before"') \(.data[0].order_id)"' '1 true rs-1'
    pt_stop
}

pt_init
pt_start
FEED0=$(pt_feed_next)

pt_case "the feed starts empty" case_feed_start
pt_case "each event once, seq strictly increasing, no event for no change" case_each_event_once
pt_case "paging with after and limit=1 sees every seq once" case_paging
pt_case "bad query parameters: 400 naming the parameter" case_bad_params
pt_case "long-poll wakes when another client commits an event" case_long_poll_wakes
pt_case "long-poll returns an empty list after the wait" case_long_poll_times_out
pt_case "the feed survives a restart; seq keeps growing (last case)" case_events_across_restart

pt_done
