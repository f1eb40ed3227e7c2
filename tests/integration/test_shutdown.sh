#!/usr/bin/env bash
# test_shutdown.sh - SIGTERM/SIGINT (SPEC 11): the daemon stops accepting,
# lets the requests in flight finish and commit, and exits 0.
#
# Each case starts its own daemon, in its own subshell, so that it can read
# the exit status.
source "$(dirname "$0")/lib.sh"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# wait_for_log TEXT - until the daemon's log shows TEXT (bounded).
wait_for_log()
{
    local deadline=$(($(date +%s) + PT_STOP_TIMEOUT_S))
    until grep -q -- "$1" "$PT_LOG"; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "the log never showed: $1"
        sleep 0.02
    done
}

case_sigterm_idle()
{
    pt_start
    pt_post /v1/charges idle-key "$(charge_body idle-1)"
    expect_status 202
    pt_stop
    expect_contains 'stopped' "$(cat "$PT_LOG")" "the log"
    pt_start
    pt_get /v1/charges/idle-1
    expect_status 200
    pt_stop
}

case_sigint()
{
    pt_start
    kill -INT "$PT_PID"
    pt_wait_exit
    expect_eq 0 "$PT_EXIT" "exit status after SIGINT"
}

case_long_poll_in_flight()
{
    local bg t0 t1 next
    pt_start
    pt_get /v1/events
    next=$(jq .next <"$PT_BODY_FILE")
    t0=$(now_ms)
    curl -s --max-time 30 -o "$PT_TMP/lp.body" -w '%{http_code}' \
        "$PT_URL/v1/events?after=$next&wait=20" >"$PT_TMP/lp.status" &
    bg=$!
    # The poll must be in the daemon's hands before the signal.
    pt_wait_requests_read
    pt_stop
    wait "$bg"
    t1=$(now_ms)
    expect_eq 200 "$(cat "$PT_TMP/lp.status")" "status of the long-poll cut short by SIGTERM"
    PT_BODY_FILE=$PT_TMP/lp.body
    expect_json '"\(.data) \(.next)"' "[] $next"
    [ $((t1 - t0)) -lt 15000 ] || fail "SIGTERM waited $((t1 - t0)) ms for the long-poll's full wait"
}

case_post_in_flight()
{
    local body len line status reply
    pt_start
    body=$(charge_body inflight-1)
    len=${#body}
    # Send the headers with Expect: 100-continue; the daemon's "100
    # Continue" proves the request is in its hands.  Then SIGTERM, then the
    # body: the request must still be served, and committed.
    exec 3<>"/dev/tcp/127.0.0.1/$PT_PORT" || fail "cannot connect"
    printf 'POST /v1/charges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: inflight-key\r\nContent-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n' \
        "$len" >&3
    IFS= read -r -t 10 line <&3 || fail "no 100 Continue"
    expect_eq $'HTTP/1.1 100 Continue\r' "$line" "interim response"
    IFS= read -r -t 10 line <&3
    kill -TERM "$PT_PID"
    wait_for_log 'SIGTERM'
    # New connections are refused while the daemon drains.
    local deadline=$(($(date +%s) + 10))
    while curl -s -o /dev/null --max-time 2 "$PT_URL/healthz"; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "still accepting connections 10 s after SIGTERM"
        sleep 0.02
    done
    printf '%s' "$body" >&3
    reply=$(timeout 20 cat <&3)
    exec 3<&-
    status=$(head -n 1 <<<"$reply" | tr -d '\r')
    expect_eq 'HTTP/1.1 202 Accepted' "$status" "status line of the request in flight"
    printf '%s' "${reply#*$'\r\n\r\n'}" >"$PT_TMP/inflight.body"
    PT_BODY_FILE=$PT_TMP/inflight.body
    expect_json '"\(.order_id) \(.state)"' 'inflight-1 INIT'
    pt_wait_exit
    expect_eq 0 "$PT_EXIT" "exit status after SIGTERM with a request in flight"
    # It was committed: after a restart the key replays the same answer.
    PT_BODY_FILE=$PT_TMP/last.body
    pt_start
    pt_post /v1/charges inflight-key "$body"
    expect_status 202
    expect_header Idempotency-Replayed true
    expect_same_bytes "$PT_TMP/inflight.body" "$PT_BODY_FILE" "replay of the request served during shutdown"
    pt_stop
}

case_new_request_while_draining()
{
    local body len line reply status
    pt_start
    body=$(charge_body drain-1)
    len=${#body}
    # Connection 4: a kept-alive connection that has already been served.
    exec 4<>"/dev/tcp/127.0.0.1/$PT_PORT" || fail "cannot connect"
    printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&4
    IFS= read -r -t 10 line <&4 || fail "no answer on the kept-alive connection"
    expect_eq $'HTTP/1.1 200 OK\r' "$line" "first answer on the kept-alive connection"
    while IFS= read -r -t 10 line <&4 && [ "$line" != $'\r' ]; do :; done
    IFS= read -r -t 10 -N 15 line <&4 # {"status":"ok"}
    # Connection 3: a request in flight (head in, body held back) keeps the
    # daemon draining.
    exec 3<>"/dev/tcp/127.0.0.1/$PT_PORT" || fail "cannot connect"
    printf 'POST /v1/charges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: drain-key\r\nContent-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n' \
        "$len" >&3
    IFS= read -r -t 10 line <&3 || fail "no 100 Continue"
    IFS= read -r -t 10 line <&3
    kill -TERM "$PT_PID"
    wait_for_log 'SIGTERM'
    # A new request on the kept-alive connection is told to come back.
    printf 'GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&4
    reply=$(timeout 10 cat <&4)
    exec 4<&-
    status=$(head -n 1 <<<"$reply" | tr -d '\r')
    expect_eq 'HTTP/1.1 503 Service Unavailable' "$status" "a new request while stopping"
    expect_contains '"code":"shutting_down"' "$reply" "its answer"
    expect_contains $'Retry-After: 5\r' "$reply" "its answer"
    # The request in flight is still served.
    printf '%s' "$body" >&3
    reply=$(timeout 20 cat <&3)
    exec 3<&-
    status=$(head -n 1 <<<"$reply" | tr -d '\r')
    expect_eq 'HTTP/1.1 202 Accepted' "$status" "status line of the request in flight"
    pt_wait_exit
    expect_eq 0 "$PT_EXIT" "exit status"
}

pt_init

pt_case "SIGTERM when idle: exit 0, the data kept" case_sigterm_idle
pt_case "SIGINT: exit 0" case_sigint
pt_case "SIGTERM during a long-poll: the poll gets its answer, exit 0" case_long_poll_in_flight
pt_case "SIGTERM during a POST: served and committed, new connections refused, exit 0" case_post_in_flight
pt_case "SIGTERM: a new request on a kept-alive connection gets 503 shutting_down, the one in flight is served" case_new_request_while_draining

pt_done
