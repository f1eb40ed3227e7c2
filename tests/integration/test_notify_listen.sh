#!/usr/bin/env bash
# test_notify_listen.sh - notify_listen: a second listener that serves only
# the gateway notification routes (the part a gateway may reach), while the
# API stays on the first listener.
source "$(dirname "$0")/lib.sh"

case_api_not_on_notify_listener()
{
    local p code
    for p in /v1/status /v1/charges /v1/events /healthz /metrics; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PT_NPORT$p")
        expect_eq 404 "$code" "GET $p on the notify listener"
    done
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Idempotency-Key: nl-1' \
        -d '{}' "http://127.0.0.1:$PT_NPORT/v1/charges")
    expect_eq 404 "$code" "POST /v1/charges on the notify listener"
}

case_notifications_on_notify_listener()
{
    local code
    # A forged Alipay notification reaches the Alipay route and gets Alipay's
    # own fail reply, not a 404.
    code=$(curl -s -o "$PT_TMP/nl.body" -w '%{http_code}' -X POST \
        -d 'out_trade_no=X-1&notify_id=1&sign=AAAA&sign_type=RSA2' \
        "http://127.0.0.1:$PT_NPORT/notify/alipay")
    expect_eq 400 "$code" "POST /notify/alipay on the notify listener"
    expect_eq fail "$(cat "$PT_TMP/nl.body")" "Alipay's fail body"
}

case_api_still_on_main_listener()
{
    pt_get /v1/status
    expect_status 200
}

pt_init
# pt_start picks the notify_listen port with the API's, and again if taken.
PT_NOTIFY_LISTEN=1 PT_WARMUP=0 pt_start

pt_case "the API is not served on notify_listen" case_api_not_on_notify_listener
pt_case "the notification routes are served on notify_listen" case_notifications_on_notify_listener
pt_case "the API stays on listen" case_api_still_on_main_listener

pt_stop
pt_done
