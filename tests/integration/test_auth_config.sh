#!/usr/bin/env bash
# test_auth_config.sh - the bearer token (api_token_file) and the checks
# `payterm serve` makes before it serves anything: secret file modes,
# unknown configuration keys and bad values, each named in the message.
source "$(dirname "$0")/lib.sh"

TOKEN=0123456789abcdef-TOKEN-for-tests

case_token_required()
{
    pt_get /v1/status
    expect_error 401 unauthorized
    expect_match '^Bearer' "$(pt_header WWW-Authenticate)" "WWW-Authenticate"
    PT_AUTH=${TOKEN%?}X pt_get /v1/status
    expect_error 401 unauthorized
    PT_AUTH=${TOKEN%?} pt_get /v1/status
    expect_error 401 unauthorized
    PT_AUTH=${TOKEN}x pt_get /v1/status
    expect_error 401 unauthorized
    pt_request GET /v1/status -H "Authorization: Basic $(printf 'u:%s' "$TOKEN" | base64 -w0)"
    expect_error 401 unauthorized
    pt_request GET /v1/status -H "Authorization: $TOKEN"
    expect_error 401 unauthorized
    PT_AUTH=$TOKEN pt_get /v1/status
    expect_status 200
    expect_json .online false
    # Every route but /healthz.
    for p in /metrics /v1/events /v1/charges /v1/charges/x /v1/charges/x/events; do
        pt_get "$p"
        expect_error 401 unauthorized
    done
    pt_request POST /v1/sync
    expect_error 401 unauthorized
}

case_healthz_open()
{
    pt_get /healthz
    expect_status 200
    expect_json .status ok
}

case_unauthorized_not_stored()
{
    pt_post /v1/charges auth-key "$(charge_body auth-1)"
    expect_error 401 unauthorized
    PT_AUTH=$TOKEN pt_get /v1/charges/auth-1
    expect_error 404 not_found
    PT_AUTH=wrong-token-wrong-token pt_post /v1/charges/auth-1/cancel auth-cancel -
    expect_error 401 unauthorized
    # The key was never taken.
    PT_AUTH=$TOKEN pt_post /v1/charges auth-key "$(charge_body auth-1)"
    expect_status 202
    expect_no_header Idempotency-Replayed
}

case_token_file_mode()
{
    chmod 644 "$PT_TMP/token"
    refuse_to_start ". + {api_token_file: \"$PT_TMP/token\"}" \
        "$PT_TMP/token" 'chmod 600' api_token_file
    chmod 600 "$PT_TMP/token"
}

case_secret_file_mode()
{
    chmod 640 "$PT_TMP/stripe.sk"
    refuse_to_start . "$PT_TMP/stripe.sk" 'chmod 600' gateways.stripe.secret_key_file
    chmod 600 "$PT_TMP/stripe.sk"
    chmod 604 "$PT_TMP/alipay.key"
    refuse_to_start . "$PT_TMP/alipay.key" 'chmod 600' gateways.alipay.private_key_file
    chmod 600 "$PT_TMP/alipay.key"
}

# SPEC 14's packaged layout: root:payterm 0640, read through the group the
# daemon runs as.  Played with nogroup (65534) as the service's group: init
# runs as root with that effective group (setpriv), so that only the group
# decides.
case_secret_group_readable()
{
    local ng
    ng=$(getent group nogroup | cut -d: -f3)
    [ -n "$ng" ] || fail "no group nogroup on this machine"
    pt_config
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    chgrp nogroup "$PT_TMP/stripe.sk"
    chmod 640 "$PT_TMP/stripe.sk"
    local out
    out=$(setpriv --regid "$ng" --clear-groups "$PAYTERM" init -c "$PT_CFG" 2>&1) ||
        fail "root:nogroup 0640 refused for a daemon of group nogroup: $out"
    # Another group than the daemon's: refused, the group named.
    out=$("$PAYTERM" init -c "$PT_CFG" 2>&1) && fail "root:nogroup 0640 accepted for group root"
    expect_contains "gateways.stripe.secret_key_file $PT_TMP/stripe.sk: mode 0640 is readable by group $ng, which is not the group payterm runs as" "$out" "init's refusal"
    # Group-writable or readable by others: refused whatever the group.
    chmod 660 "$PT_TMP/stripe.sk"
    out=$(setpriv --regid "$ng" --clear-groups "$PAYTERM" init -c "$PT_CFG" 2>&1) &&
        fail "a group-writable secret was accepted"
    expect_contains 'lets group or others read or write a secret' "$out" "init's refusal"
    chmod 644 "$PT_TMP/stripe.sk"
    out=$(setpriv --regid "$ng" --clear-groups "$PAYTERM" init -c "$PT_CFG" 2>&1) &&
        fail "a world-readable secret was accepted"
    chgrp root "$PT_TMP/stripe.sk"
    chmod 600 "$PT_TMP/stripe.sk"
}

case_short_token()
{
    printf 'short\n' >"$PT_TMP/short"
    chmod 600 "$PT_TMP/short"
    refuse_to_start ". + {api_token_file: \"$PT_TMP/short\"}" api_token_file "$PT_TMP/short"
    refuse_to_start ". + {api_token_file: \"$PT_TMP/none\"}" api_token_file "$PT_TMP/none"
}

case_unknown_keys()
{
    refuse_to_start '. + {listne: "127.0.0.1:1"}' "'listne'" 'unknown key'
    refuse_to_start '.offline.limits.USD.max_amont = 5' "'offline.limits.USD.max_amont'" 'unknown key'
    refuse_to_start '.gateways.stripe.secret_key = "x"' "'gateways.stripe.secret_key'" 'unknown key'
    refuse_to_start '.gateways.paypal = {}' "'gateways.paypal'"
    refuse_to_start '.idempotency = {ttl: 5}' "'idempotency.ttl'"
}

case_bad_values()
{
    refuse_to_start '.offline.limits.USD.max_amount = -1' "'offline.limits.USD.max_amount'"
    refuse_to_start '.offline.limits.usd = .offline.limits.USD' "'offline.limits.usd'"
    refuse_to_start '.offline.max_count = "many"' "'offline.max_count'"
    refuse_to_start '.log_level = "loud"' "'log_level'"
    refuse_to_start '.gateways.stripe.endpoint = "http://api.stripe.com"' "'gateways.stripe.endpoint'" https
    refuse_to_start 'del(.gateways."2c2p".merchant_id)' "'gateways.2c2p.merchant_id'" required
    refuse_to_start '.storage = {synchronous: "OFF"}' "'storage.synchronous'"
    # listen is written by the helper: a bad one goes through its own file.
    pt_config .
    jq '.listen = "localhost"' "$PT_CFG_BASE" >"$PT_TMP/bad-listen.json"
    local out rc
    out=$(timeout 20 "$PAYTERM" serve -c "$PT_TMP/bad-listen.json" 2>&1)
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "serve accepted listen \"localhost\" (exit $rc)"
    expect_contains "'listen'" "$out"
}

case_good_config_after_all()
{
    # The refusals left nothing behind that stops a good start.
    pt_config ". + {api_token_file: \"$PT_TMP/token\"}"
    pt_start
    PT_AUTH=$TOKEN pt_get /v1/charges/auth-1
    expect_status 200
    pt_stop
}

pt_init
printf '%s\n' "$TOKEN" >"$PT_TMP/token"
chmod 600 "$PT_TMP/token"
pt_config ". + {api_token_file: \"$PT_TMP/token\"}"
pt_start

pt_case "401 without or with a wrong bearer token; 200 with it" case_token_required
pt_case "/healthz needs no token" case_healthz_open
pt_case "a 401 stores nothing: the key is still free" case_unauthorized_not_stored
pt_stop

pt_case "api_token_file with mode 0644: refused, names the file and chmod 600" case_token_file_mode
pt_case "gateway secret files readable by others: refused, named" case_secret_file_mode
pt_case "root:GROUP 0640 secrets: read through the daemon's own group only" case_secret_group_readable
pt_case "api_token_file too short or missing: refused, named" case_short_token
pt_case "unknown configuration keys: refused, the key named" case_unknown_keys
pt_case "bad configuration values: refused, the key named" case_bad_values
pt_case "a good configuration still starts" case_good_config_after_all

pt_done
