#!/usr/bin/env bash
# test_strict_headers.sh - request heads are strictly parsed (SPEC 5, "Input
# strictness and connection handling"): headers containing NUL, or a
# repeated Idempotency-Key header, are 400, and nothing is stored.
#
# curl cannot send these, so the requests go over a raw socket
# (bash's /dev/tcp); printf writes the NUL bytes.
source "$(dirname "$0")/lib.sh"

# raw FORMAT [ARGS...] - sends printf FORMAT ARGS as the whole request (it
# should say Connection: close) and reads the answer: PT_STATUS, the body
# in $PT_BODY_FILE, the headers in $PT_HDR_FILE.
raw()
{
    local reply
    PT_LAST_REQ="raw request"
    # One write: bash's printf writes a NUL as a piece of its own, and a
    # server that refuses the line before the rest arrived would make the
    # rest fail with SIGPIPE.
    # shellcheck disable=SC2059
    printf "$@" >"$PT_TMP/raw.req"
    exec 3<>"/dev/tcp/127.0.0.1/$PT_PORT" || fail "cannot connect"
    (cat "$PT_TMP/raw.req" >&3) 2>/dev/null
    reply=$(timeout 10 cat <&3 | tr -d '\0')
    exec 3<&-
    PT_STATUS=$(head -n 1 <<<"$reply" | awk '{ print $2 }')
    [ -n "$PT_STATUS" ] || PT_STATUS=000
    printf '%s' "${reply%%$'\r\n\r\n'*}" | tail -n +2 | tr -d '\r' >"$PT_HDR_FILE"
    if [[ $reply == *$'\r\n\r\n'* ]]; then
        printf '%s' "${reply#*$'\r\n\r\n'}" >"$PT_BODY_FILE"
    else
        : >"$PT_BODY_FILE"
    fi
    PT_BODY=$(cat "$PT_BODY_FILE")
}

# post_raw KEY_HEADERS ORDER - POST /v1/charges with the given raw header
# lines (printf escapes allowed, each ending in \r\n) and a valid body.
post_raw()
{
    local headers=$1 body
    body=$(charge_body "$2")
    raw "POST /v1/charges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${headers}Content-Length: %d\r\nConnection: close\r\n\r\n%s" \
        "${#body}" "$body"
}

# expect_not_stored ORDER - no charge exists for ORDER.
expect_not_stored()
{
    local PT_BODY_FILE=$PT_TMP/check.body PT_HDR_FILE=$PT_TMP/check.hdr
    pt_get "/v1/charges/$1"
    expect_status 404
}

case_repeated_key()
{
    pt_start
    post_raw 'Idempotency-Key: rep-a\r\nIdempotency-Key: rep-b\r\n' rep-1
    expect_error 400 idempotency_key_invalid
    expect_contains "Idempotency-Key" "$(pt_message)" "message"
    expect_contains "2 times" "$(pt_message)" "message"
    expect_not_stored rep-1
    # The same value twice is still two headers.
    post_raw 'Idempotency-Key: rep-c\r\nX-Other: 1\r\nidempotency-key: rep-c\r\nIdempotency-Key: rep-c\r\n' rep-2
    expect_error 400 idempotency_key_invalid
    expect_contains "3 times" "$(pt_message)" "message"
    expect_not_stored rep-2
    # Once is fine.
    post_raw 'Idempotency-Key: rep-d\r\n' rep-3
    expect_status 202
    pt_stop
}

case_nul_in_headers()
{
    pt_start
    # In the Idempotency-Key: the key is not silently cut at the NUL.
    post_raw 'Idempotency-Key: nul-a\0tail\r\n' nul-1
    expect_error 400 invalid_request
    expect_contains "Idempotency-Key" "$(pt_message)" "message"
    expect_contains "NUL" "$(pt_message)" "message"
    expect_not_stored nul-1
    # In another header, in the middle of the head and in its last line.
    raw 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\0b\r\nConnection: close\r\n\r\n'
    expect_error 400 invalid_request
    expect_contains "X-Note" "$(pt_message)" "message"
    raw 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Last: end\0\r\n\r\n'
    expect_error 400 invalid_request
    expect_contains "X-Last" "$(pt_message)" "message"
    # In a header name (libmicrohttpd itself refuses that line).
    raw 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Na\0me: v\r\nConnection: close\r\n\r\n'
    expect_status 400
    # In the request target: not cut short to another path.
    raw 'GET /v1/charges/nul-2\0x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'
    expect_error 400 invalid_request
    expect_contains "request target" "$(pt_message)" "message"
    raw 'GET /v1/charges/nul-2%%00x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'
    expect_error 400 invalid_request
    expect_contains "request target" "$(pt_message)" "message"
    # A header folded over two lines (RFC 9112 lets a server refuse it;
    # libmicrohttpd 0.9 would glue the pieces wrongly).
    raw 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Fold: a\r\n b\r\nConnection: close\r\n\r\n'
    expect_error 400 invalid_request
    expect_contains "next line" "$(pt_message)" "message"
    # On the notification listener too.
    pt_stop
    PT_PORT=""
    PT_NOTIFY_LISTEN=1
    pt_start
    local main=$PT_PORT
    PT_PORT=$PT_NPORT
    raw 'POST /webhooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\nStripe-Signature: t=1,v1=ab\0cd\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'
    expect_error 400 invalid_request
    expect_contains "Stripe-Signature" "$(pt_message)" "message"
    PT_PORT=$main
    pt_stop
}

case_well_formed_heads_pass()
{
    pt_start
    raw 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Empty:\r\nX-Spaces:   v  \r\nConnection: close\r\n\r\n'
    expect_status 200
    # Bare LF line ends are still read (RFC 9112 allows a server to).
    raw 'GET /healthz HTTP/1.1\nHost: 127.0.0.1\nX-A: b\nConnection: close\n\n'
    expect_status 200
    raw 'GET /v1/charges?limit=1&after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'
    expect_status 200
    post_raw 'Idempotency-Key: "quoted-key"\r\n' ok-1
    expect_status 202
    pt_stop
}

pt_init

pt_case "a repeated Idempotency-Key header is 400 idempotency_key_invalid, nothing stored" case_repeated_key
pt_case "a NUL in a header or the request target (or a folded header) is 400 invalid_request naming it, nothing stored" case_nul_in_headers
pt_case "well-formed heads (empty values, bare LF, query strings) still pass" case_well_formed_heads_pass

pt_done
