#!/usr/bin/env bash
# test_slow_clients.sh - slow or idle clients cannot starve the others (SPEC
# 5, "Input strictness and connection handling"):
#
# * with 500 half-open connections from loopback on each listener, each
#   trickling a byte every 2 s, a well-behaved client is answered within 1 s;
# * a connection whose request head is not complete 10 s after it opened is
#   closed, however it trickles (and one whose body is not complete 10 s
#   after its head);
# * a client address other than 127.0.0.1/::1 holds at most 16 connections;
# * a long-poll costs no thread, and a commit answers all of them.
#
# The misbehaving clients are tests/integration/slowclient.c ($PT_SLOWCLIENT).
source "$(dirname "$0")/lib.sh"

SLOW=${PT_SLOWCLIENT:-$(dirname "$PAYTERM")/../tests/integration/pt_slowclient}

# slow_start OUT ARGS... - runs slowclient in the background, output in OUT.
slow_start()
{
    local out=$1
    shift
    "$SLOW" "$@" >"$out" 2>"$out.err" &
    # The cleanup kills what is listed in pids, should a case fail early.
    echo $! >>"$PT_TMP/pids"
}

# slow_wait OUT PATTERN SECONDS WHAT - until OUT has a line matching PATTERN.
slow_wait()
{
    local deadline=$(($(date +%s) + $3))
    until grep -q "$2" "$1" 2>/dev/null; do
        [ -s "$1.err" ] && fail "slowclient: $(cat "$1.err")"
        [ "$(date +%s)" -lt "$deadline" ] || fail "slowclient $4 ($1)"
        sleep 0.05
    done
}

# slow_wait_ready OUT - until slowclient has opened all its connections.
slow_wait_ready() { slow_wait "$1" '^ready' 30 'never opened its connections'; }

# slow_result OUT - waits for slowclient's result line; prints it.
slow_result()
{
    slow_wait "$1" '=' 60 'gave no result'
    grep '=' "$1"
}

# field LINE NAME - the value of NAME=... in a result line.
field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

# timed URL [CURL ARGS...] - one request; prints "STATUS MILLISECONDS".
timed()
{
    local url=$1
    shift
    curl -s -o /dev/null --max-time 5 -w '%{http_code} %{time_total}\n' "$@" "$url" |
        awk '{ printf "%s %d\n", $1, $2 * 1000 }'
}

# expect_fast WHAT STATUS URL [CURL ARGS...] - answered with STATUS in < 1 s;
# FAST_MS is how long it took.
expect_fast()
{
    local what=$1 want=$2 url=$3 got
    shift 3
    got=$(timed "$url" "$@")
    [ "${got%% *}" = "$want" ] || fail "$what: expected HTTP $want within 5 s, got '${got%% *}'"
    FAST_MS=${got##* }
    [ "$FAST_MS" -lt 1000 ] || fail "$what: answered after $FAST_MS ms (more than 1 s)"
}

case_tricklers()
{
    local main notify bodies max=0 i r
    PT_NOTIFY_LISTEN=1 pt_start
    main=$PT_TMP/trickle.main
    notify=$PT_TMP/trickle.notify
    bodies=$PT_TMP/trickle.body
    slow_start "$main" trickle 127.0.0.1 "$PT_PORT" 500
    slow_start "$notify" trickle 127.0.0.1 "$PT_NPORT" 500
    slow_start "$bodies" trickle 127.0.0.1 "$PT_PORT" 50 --body
    slow_wait_ready "$main"
    slow_wait_ready "$notify"
    slow_wait_ready "$bodies"
    # Good clients, on both listeners, while the 1050 slow ones hang on.
    for i in 1 2 3; do
        expect_fast "GET /healthz ($i)" 200 "$PT_URL/healthz"
        [ "$FAST_MS" -le "$max" ] || max=$FAST_MS
        expect_fast "POST /v1/charges ($i)" 202 "$PT_URL/v1/charges" \
            -H 'Content-Type: application/json' -H "Idempotency-Key: good-$i" \
            --data-binary "$(charge_body "good-$i")"
        [ "$FAST_MS" -le "$max" ] || max=$FAST_MS
        expect_fast "POST /webhooks/stripe on notify_listen ($i)" 400 \
            "http://127.0.0.1:$PT_NPORT/webhooks/stripe" \
            -H 'Content-Type: application/json' --data-binary '{}'
        [ "$FAST_MS" -le "$max" ] || max=$FAST_MS
    done
    pt_log "  slowest good answer with 1050 slow connections open: $max ms"
    # Each slow one is closed 10 s after it opened (the body tricklers 10 s
    # after their head), neither much earlier nor much later.
    for r in "$main" "$notify" "$bodies"; do
        r=$(slow_result "$r")
        pt_log "  $r"
        expect_eq 0 "$(field "$r" open)" "connections still open ($r)"
        [ "$(field "$r" min_ms)" -ge 9500 ] || fail "closed before 10 s: $r"
        [ "$(field "$r" max_ms)" -le 14000 ] || fail "closed long after 10 s: $r"
    done
    pt_get /v1/charges/good-3
    expect_status 200
    pt_stop
}

case_per_address_cap()
{
    local r
    PT_NOTIFY_LISTEN=1 pt_start
    # 127.0.0.2 is a loopback address too, but not the kiosk's own: capped.
    slow_start "$PT_TMP/hold.main" hold 127.0.0.1 "$PT_PORT" 20 --from 127.0.0.2 --for-s 2
    slow_start "$PT_TMP/hold.notify" hold 127.0.0.1 "$PT_NPORT" 20 --from 127.0.0.3 --for-s 2
    sleep 0.5
    # Meanwhile the kiosk (127.0.0.1) is not capped, and still served.
    expect_fast "GET /healthz from 127.0.0.1" 200 "$PT_URL/healthz"
    r=$(slow_result "$PT_TMP/hold.main")
    expect_eq "opened=20 refused=4 open=16" "$r" "20 connections from 127.0.0.2 to listen"
    r=$(slow_result "$PT_TMP/hold.notify")
    expect_eq "opened=20 refused=4 open=16" "$r" "20 connections from 127.0.0.3 to notify_listen"
    # The cap counts both listeners together, and frees a slot when a
    # connection closes.
    slow_start "$PT_TMP/hold.both1" hold 127.0.0.1 "$PT_PORT" 10 --from 127.0.0.4 --for-s 1
    slow_start "$PT_TMP/hold.both2" hold 127.0.0.1 "$PT_NPORT" 10 --from 127.0.0.4 --for-s 1
    r="$(slow_result "$PT_TMP/hold.both1") $(slow_result "$PT_TMP/hold.both2")"
    expect_eq 16 $(($(field "${r%% opened=*}" open) + $(field "opened=${r##* opened=}" open))) \
        "connections from 127.0.0.4 open on both listeners together ($r)"
    expect_fast "GET /healthz from 127.0.0.2 once its connections closed" 200 "$PT_URL/healthz" \
        --interface 127.0.0.2
    pt_stop
}

case_long_polls()
{
    local next r threads
    pt_start
    pt_post /v1/charges lp-key "$(charge_body lp-1)"
    expect_status 202
    next=$(pt_feed_next)
    slow_start "$PT_TMP/lp" longpoll 127.0.0.1 "$PT_PORT" 200 \
        "/v1/events?after=$next&wait=30" --expect '"order_id":"lp-1"' --for-s 40
    slow_wait_ready "$PT_TMP/lp"
    pt_wait_requests_read
    sleep 0.5
    threads=$(awk '/^Threads:/ { print $2 }' "/proc/$PT_PID/status")
    pt_log "  threads with 200 long-polls waiting: $threads"
    [ "$threads" -lt 40 ] || fail "200 long-polls hold $threads threads"
    expect_fast "GET /healthz during 200 long-polls" 200 "$PT_URL/healthz"
    # One commit that adds an event answers every one of them.
    pt_post /v1/charges/lp-1/cancel lp-cancel
    expect_status 200
    r=$(slow_result "$PT_TMP/lp")
    pt_log "  $r"
    expect_eq "200 200 0" "$(field "$r" answered) $(field "$r" ok) $(field "$r" open)" \
        "long-polls answered with the event ($r)"
    pt_stop
}

pt_init
[ -x "$SLOW" ] || {
    pt_log "$PT_SCRIPT: set PT_SLOWCLIENT to the slowclient binary (got '$SLOW')"
    exit 2
}

pt_case "1050 slow connections on both listeners: good clients answered within 1 s, the slow ones closed after 10 s" case_tricklers
pt_case "an address other than 127.0.0.1 holds at most 16 connections, over both listeners" case_per_address_cap
pt_case "200 long-polls hold no threads and all get the event of one commit" case_long_polls

pt_done
