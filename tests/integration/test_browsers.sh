#!/usr/bin/env bash
# test_browsers.sh - what a browser page meets at the local API (SPEC 15):
# CORS for the origins in cors_origins (preflight answered without the
# token, Idempotency-Replayed exposed), every mutating request from any
# other page refused before it is looked at (no CSRF), the page's own
# origin allowed, and RFC 9457 problem details on request.
source "$(dirname "$0")/lib.sh"

TOKEN=0123456789abcdef-TOKEN-browsers
KIOSK=http://kiosk.local:8000
OTHER=https://evil.example

# start_with_origins - a daemon with a bearer token and cors_origins, on a
# database of its own (each case counts its charges).
start_with_origins()
{
    rm -rf "$PT_TMP/data"
    printf '%s' "$TOKEN" >"$PT_TMP/token"
    chmod 600 "$PT_TMP/token"
    pt_config ". + {api_token_file: \"$PT_TMP/token\",
        cors_origins: [\"$KIOSK\", \"https://lane-3.shop.example:8443\"]}"
    pt_start
}

count_charges()
{
    PT_AUTH=$TOKEN pt_all_charges | jq length
}

case_preflight_listed_origin()
{
    start_with_origins
    # No token: a browser never sends one on a preflight.
    pt_request OPTIONS /v1/charges -H "Origin: $KIOSK" \
        -H 'Access-Control-Request-Method: POST' \
        -H 'Access-Control-Request-Headers: authorization, content-type, idempotency-key'
    expect_status 204
    expect_header Access-Control-Allow-Origin "$KIOSK"
    expect_header Access-Control-Allow-Methods "GET, POST"
    expect_header Access-Control-Allow-Headers "Authorization, Content-Type, Idempotency-Key"
    expect_header Access-Control-Max-Age 600
    expect_header Vary Origin
    pt_request OPTIONS /v1/charges/ORDER-1/refunds -H "Origin: https://lane-3.shop.example:8443" \
        -H 'Access-Control-Request-Method: POST'
    expect_status 204
    expect_header Access-Control-Allow-Origin "https://lane-3.shop.example:8443"
    expect_header Access-Control-Allow-Methods "GET, POST"
    pt_request OPTIONS /v1/charges/ORDER-1/cancel -H "Origin: $KIOSK" \
        -H 'Access-Control-Request-Method: POST'
    expect_status 204
    expect_header Access-Control-Allow-Methods POST
    # A path that does not exist is 404 to a preflight too.
    pt_request OPTIONS /v1/nothing -H "Origin: $KIOSK" -H 'Access-Control-Request-Method: GET'
    expect_error 404 not_found
    pt_stop
}

case_listed_origin_charges_and_reads_replay_header()
{
    start_with_origins
    local body
    body=$(charge_body cors-1)
    PT_AUTH=$TOKEN pt_request POST /v1/charges -H "Origin: $KIOSK" \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: cors-key-1' --data-binary "$body"
    expect_status 202
    expect_no_header Idempotency-Replayed
    expect_header Access-Control-Allow-Origin "$KIOSK"
    expect_header Access-Control-Expose-Headers "Idempotency-Replayed, Retry-After"
    expect_header Vary Origin
    pt_save first
    PT_AUTH=$TOKEN pt_request POST /v1/charges -H "Origin: $KIOSK" \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: cors-key-1' --data-binary "$body"
    expect_status 202
    expect_header Idempotency-Replayed true
    expect_header Access-Control-Allow-Origin "$KIOSK"
    expect_same_bytes "$(pt_saved first)" "$PT_BODY_FILE" "the replay"
    # The listed origin still needs the token.
    pt_request GET /v1/charges/cors-1 -H "Origin: $KIOSK"
    expect_error 401 unauthorized
    expect_header Access-Control-Allow-Origin "$KIOSK"
    expect_eq 1 "$(count_charges)" "charges"
    pt_stop
}

case_foreign_origin_refused()
{
    start_with_origins
    # The forged POST: no token, a foreign page's Origin.  Refused before
    # the token is looked at, with nothing stored.
    pt_request POST /v1/charges -H "Origin: $OTHER" -H 'Content-Type: application/json' \
        -H 'Idempotency-Key: forged-1' --data-binary "$(charge_body forged-1)"
    expect_error 403 origin_not_allowed
    expect_contains "$OTHER" "$(pt_message)" "message"
    expect_contains "cors_origins" "$(pt_message)" "message"
    expect_no_header Access-Control-Allow-Origin
    # With a stolen token it is refused all the same.
    PT_AUTH=$TOKEN pt_request POST /v1/charges -H "Origin: $OTHER" \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: forged-2' \
        --data-binary "$(charge_body forged-2)"
    expect_error 403 origin_not_allowed
    for path in /v1/charges/forged-1/cancel /v1/charges/forged-1/refunds \
        /v1/charges/forged-1/review /v1/sync /webhooks/stripe; do
        PT_AUTH=$TOKEN pt_request POST "$path" -H "Origin: $OTHER" -H 'Idempotency-Key: f-3' \
            -H 'Content-Type: application/json' --data-binary '{}'
        expect_error 403 origin_not_allowed
    done
    # Its preflight gets no CORS answer; "null" (a sandboxed page, a file)
    # is a foreign origin too.
    pt_request OPTIONS /v1/charges -H "Origin: $OTHER" -H 'Access-Control-Request-Method: POST'
    expect_error 403 origin_not_allowed
    expect_no_header Access-Control-Allow-Origin
    pt_request POST /v1/charges -H 'Origin: null' -H 'Idempotency-Key: forged-4' \
        -H 'Content-Type: application/json' --data-binary "$(charge_body forged-4)"
    expect_error 403 origin_not_allowed
    # A read is answered, but without CORS headers a foreign page cannot
    # see it.
    PT_AUTH=$TOKEN pt_request GET /v1/status -H "Origin: $OTHER"
    expect_status 200
    expect_no_header Access-Control-Allow-Origin
    expect_header Vary Origin
    expect_eq 0 "$(count_charges)" "charges"
    pt_stop
}

case_own_origin_and_no_origin_allowed()
{
    start_with_origins
    # The operator page served here: Origin is this listener's own.
    PT_AUTH=$TOKEN pt_request POST /v1/charges -H "Origin: http://127.0.0.1:$PT_PORT" \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: own-1' \
        --data-binary "$(charge_body own-1)"
    expect_status 202
    expect_no_header Access-Control-Allow-Origin
    # A program (no Origin at all) is not a browser page.
    PT_AUTH=$TOKEN pt_post /v1/charges own-2 "$(charge_body own-2)"
    expect_status 202
    expect_no_header Vary
    # OPTIONS that is not a preflight: 204 with Allow.
    pt_request OPTIONS /v1/charges/own-1
    expect_status 204
    expect_header Allow GET
    expect_eq 2 "$(count_charges)" "charges"
    pt_stop
}

case_problem_details_on_request()
{
    rm -rf "$PT_TMP/data"
    pt_config
    pt_start
    pt_post /v1/charges prob-1 "$(charge_body prob-1 '.amount = -5')"
    expect_error 400 invalid_request
    pt_save plain
    local detail
    detail=$(pt_message)
    pt_request POST /v1/charges -H 'Accept: application/problem+json' \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: prob-1' \
        --data-binary "$(charge_body prob-1 '.amount = -5')"
    expect_status 400
    expect_header Content-Type application/problem+json
    expect_header Idempotency-Replayed true
    expect_json '"\(.type)|\(.title)|\(.status)|\(.code)"' "about:blank|Bad Request|400|invalid_request"
    expect_json .detail "$detail"
    # The stored answer is unchanged: a plain replay is byte for byte the first.
    pt_post /v1/charges prob-1 "$(charge_body prob-1 '.amount = -5')"
    expect_error 400 invalid_request
    expect_same_bytes "$(pt_saved plain)" "$PT_BODY_FILE" "the plain replay"
    # q=0 declines it; a list with it first is enough; errors of every kind.
    pt_request GET /v1/charges/nope -H 'Accept: application/problem+json;q=0, application/json'
    expect_error 404 not_found
    pt_request GET /v1/charges/nope -H 'Accept: application/problem+json, application/json;q=0.5'
    expect_status 404
    expect_header Content-Type application/problem+json
    expect_json '"\(.title)|\(.code)"' "Not Found|not_found"
    pt_request DELETE /v1/charges -H 'Accept: application/problem+json'
    expect_status 405
    expect_header Allow "GET, POST"
    expect_json .code method_not_allowed
    # A success is not an error: the charge object, as ever.
    pt_request POST /v1/charges -H 'Accept: application/problem+json' \
        -H 'Content-Type: application/json' -H 'Idempotency-Key: prob-2' \
        --data-binary "$(charge_body prob-2)"
    expect_status 202
    expect_header Content-Type application/json
    expect_json .order_id prob-2
    pt_stop
}

case_bad_origins_refused()
{
    refuse_to_start '. + {cors_origins: ["http://kiosk.local/"]}' 'cors_origins[0]' 'no path'
    refuse_to_start '. + {cors_origins: ["http://ok.local", "HTTP://Kiosk.local"]}' \
        'cors_origins[1]' 'http://'
    refuse_to_start '. + {cors_origins: ["http://Kiosk.local"]}' 'cors_origins[0]' 'lower case'
    refuse_to_start '. + {cors_origins: ["https://kiosk.local:443"]}' 'cors_origins[0]' \
        'default port'
    refuse_to_start '. + {cors_origins: ["http://kiosk.local:0"]}' 'cors_origins[0]' 'port'
    refuse_to_start '. + {cors_origins: ["*"]}' 'cors_origins[0]' 'http://'
    refuse_to_start '. + {cors_origins: ["null"]}' 'cors_origins[0]'
    refuse_to_start '. + {cors_origins: ["http://a.local", "http://a.local"]}' \
        'cors_origins[1]' 'twice'
    refuse_to_start '. + {cors_origins: "http://a.local"}' 'cors_origins' 'list'
    refuse_to_start '. + {cors_origins: [7]}' 'cors_origins[0]' 'string'
    # The forms a browser sends are taken.
    pt_config '. + {cors_origins: ["http://[::1]:8000", "https://k-1.example", "http://10.0.0.7:81"]}'
    pt_start
    pt_request OPTIONS /v1/status -H 'Origin: http://[::1]:8000' \
        -H 'Access-Control-Request-Method: GET'
    expect_status 204
    expect_header Access-Control-Allow-Origin 'http://[::1]:8000'
    pt_stop
}

case_origins_follow_a_reload()
{
    rm -rf "$PT_TMP/data"
    pt_config '. + {cors_origins: ["http://old.local"]}'
    pt_start
    pt_request OPTIONS /v1/charges -H 'Origin: http://new.local' \
        -H 'Access-Control-Request-Method: POST'
    expect_error 403 origin_not_allowed
    jq '.cors_origins = ["http://new.local"]' "$PT_CFG" >"$PT_CFG.tmp" && mv "$PT_CFG.tmp" "$PT_CFG"
    kill -HUP "$PT_PID"
    local deadline=$(($(date +%s) + 10))
    until grep -q 'reload' "$PT_LOG" && ! grep -q 'reload.*failed' "$PT_LOG" &&
        pt_request OPTIONS /v1/charges -H 'Origin: http://new.local' \
            -H 'Access-Control-Request-Method: POST' && [ "$PT_STATUS" = 204 ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "cors_origins not reloaded: $PT_STATUS $PT_BODY"
        sleep 0.1
    done
    expect_header Access-Control-Allow-Origin http://new.local
    pt_post /v1/charges old-1 "$(charge_body old-1)" >/dev/null
    pt_request POST /v1/charges -H 'Origin: http://old.local' -H 'Idempotency-Key: old-2' \
        -H 'Content-Type: application/json' --data-binary "$(charge_body old-2)"
    expect_error 403 origin_not_allowed
    pt_stop
}

case_operator_page_asks_for_the_token()
{
    command -v chromium >/dev/null || fail "chromium is needed (scripts/deps.sh installs it)"
    start_with_origins
    cat >"$PT_TMP/token.steps" <<STEPS
open $PT_URL/
wait getComputedStyle(document.getElementById('login')).display !== 'none' 30
expect document.getElementById('version').textContent ""
eval (() => { document.getElementById('token').value = 'wrong-token-wrong-token'; document.getElementById('tokenform').requestSubmit(); return 1; })()
wait document.getElementById('msg').textContent.includes('token') 10
eval (() => { document.getElementById('token').value = '$TOKEN'; document.getElementById('tokenform').requestSubmit(); return 1; })()
wait document.getElementById('version').textContent !== '' 30
wait getComputedStyle(document.getElementById('login')).display === 'none' 10
expect sessionStorage.getItem('payterm.token') "$TOKEN"
STEPS
    "$PT_PYTHON" "$PT_DIR/browser.py" "$PT_TMP/token.steps" >"$PT_TMP/token.log" 2>&1 ||
        fail "the operator page and the token: $(tail -n 8 "$PT_TMP/token.log")"
    pt_stop
}

case_dns_rebinding_refused()
{
    start_with_origins
    # A page at evil.example:PORT whose name now points here: both Host and
    # Origin say evil.example - "same origin" - and reads have no Origin.
    PT_AUTH=$TOKEN pt_request GET /v1/status -H "Host: evil.example:$PT_PORT" \
        -H 'Sec-Fetch-Site: same-origin' -H 'Sec-Fetch-Mode: cors'
    expect_error 421 host_not_allowed
    expect_contains "evil.example" "$(pt_message)" "message"
    pt_request POST /v1/charges -H "Host: evil.example:$PT_PORT" \
        -H "Origin: http://evil.example:$PT_PORT" -H 'Content-Type: application/json' \
        -H 'Idempotency-Key: rebind-1' --data-binary "$(charge_body rebind-1)"
    expect_error 421 host_not_allowed
    pt_request GET / -H "Host: evil.example:$PT_PORT" -H 'Sec-Fetch-Mode: navigate'
    expect_error 421 host_not_allowed
    # The names a browser may use: an IP address, localhost, a listed origin's host.
    for host in "127.0.0.1:$PT_PORT" "localhost:$PT_PORT" "LocalHost" "[::1]:$PT_PORT" \
        "kiosk.local:8000"; do
        PT_AUTH=$TOKEN pt_request GET /v1/status -H "Host: $host" -H 'Sec-Fetch-Site: same-origin'
        expect_status 200
    done
    # The page's own origin under an IP Host still charges.
    PT_AUTH=$TOKEN pt_request POST /v1/charges -H "Host: localhost:$PT_PORT" \
        -H "Origin: http://localhost:$PT_PORT" -H 'Content-Type: application/json' \
        -H 'Idempotency-Key: rebind-ok' --data-binary "$(charge_body rebind-ok)"
    expect_status 202
    # A program (no browser headers) may use any name.
    PT_AUTH=$TOKEN pt_request GET /v1/status -H "Host: payterm-lane-3.shop.lan:$PT_PORT"
    expect_status 200
    expect_eq 1 "$(count_charges)" "charges"
    pt_stop
}

case_openapi_served()
{
    start_with_origins
    # No token needed: it holds no data.  The bytes are the file's.
    pt_get /v1/openapi.json
    expect_status 200
    expect_header Content-Type application/json
    expect_same_bytes "$PT_DIR/../../firmware/openapi.json" "$PT_BODY_FILE" "GET /v1/openapi.json"
    expect_json .openapi 3.1.0
    pt_post /v1/openapi.json - '{}'
    expect_error 405 method_not_allowed
    pt_stop
}

pt_init

pt_case "a listed origin's preflight is answered 204 without the token, with the path's methods and the kiosk's headers" case_preflight_listed_origin
pt_case "a listed origin charges with the token, gets Access-Control-Allow-Origin and sees Idempotency-Replayed" case_listed_origin_charges_and_reads_replay_header
pt_case "a forged cross-origin POST (no token or a stolen one) is 403 origin_not_allowed on every mutating route, nothing stored" case_foreign_origin_refused
pt_case "the page's own origin and programs without an Origin are served as before" case_own_origin_and_no_origin_allowed
pt_case "Accept: application/problem+json gets RFC 9457 problem details with the same code; stored answers unchanged" case_problem_details_on_request
pt_case "cors_origins entries that are not browser-serialized origins are refused, naming the entry" case_bad_origins_refused
pt_case "cors_origins takes effect on SIGHUP (a reload), without a restart" case_origins_follow_a_reload
pt_case "DNS rebinding: a browser that reached payterm by an unlisted name is 421 host_not_allowed, reads too" case_dns_rebinding_refused
pt_case "GET /v1/openapi.json: the embedded OpenAPI 3.1 description, without the token" case_openapi_served
pt_case "the operator page in Chromium asks for the token, refuses a wrong one and works with the right one" case_operator_page_asks_for_the_token

pt_done
