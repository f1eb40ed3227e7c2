#!/usr/bin/env bash
# test_cli.sh - the program's command line (SPEC 11): every subcommand
# answers --help with its usage and exit 0, accepts -c/--config FILE (one
# that needs no configuration ignores it), and the exit codes are 0 ok,
# 1 failure, 2 usage.  The list of subcommands is read from `payterm --help`,
# so a new one is covered without touching this file.
source "$(dirname "$0")/lib.sh"

# run_cmd ARGS... - payterm with a ceiling; sets RC, OUT (stdout), ERR.
run_cmd()
{
    OUT=$(timeout 20 "$PAYTERM" "$@" 2>"$PT_TMP/stderr" </dev/null)
    RC=$?
    ERR=$(cat "$PT_TMP/stderr")
    [ "$RC" -ne 124 ] || fail "payterm $* did not end within 20 s"
}

commands()
{
    "$PAYTERM" --help | awk '/^commands:/ { on = 1; next } on && !NF { exit } on { print $1 }'
}

case_command_list()
{
    local n
    n=$(commands | wc -l)
    [ "$n" -ge 14 ] || fail "payterm --help lists $n commands: $(commands | tr '\n' ' ')"
    for c in serve init status charges sync refund refunds sweep backup sim demo sign verify \
        version; do
        commands | grep -qx "$c" || fail "payterm --help does not list $c"
    done
}

case_help_everywhere()
{
    local c
    for c in $(commands); do
        run_cmd "$c" --help
        expect_eq 0 "$RC" "exit status of payterm $c --help (stderr: $ERR)"
        expect_match "^usage: payterm $c" "$OUT" "what payterm $c --help printed"
        run_cmd "$c" -h
        expect_eq 0 "$RC" "exit status of payterm $c -h (stderr: $ERR)"
        expect_match "^usage: payterm $c" "$OUT" "what payterm $c -h printed"
        # -c before --help is parsed, not refused.
        run_cmd "$c" -c "$PT_CFG_BASE" --help
        expect_eq 0 "$RC" "exit status of payterm $c -c FILE --help (stderr: $ERR)"
        expect_match "^usage: payterm $c" "$OUT" "what payterm $c -c FILE --help printed"
        run_cmd "$c" --config="$PT_CFG_BASE" --help
        expect_eq 0 "$RC" "exit status of payterm $c --config=FILE --help (stderr: $ERR)"
        run_cmd "$c" --no-such-option
        expect_eq 2 "$RC" "exit status of payterm $c --no-such-option: $OUT $ERR"
        expect_contains "--no-such-option" "$ERR" "what payterm $c --no-such-option printed"
    done
    run_cmd --help
    expect_eq 0 "$RC" "exit status of payterm --help"
    run_cmd no-such-command
    expect_eq 2 "$RC" "exit status of payterm no-such-command"
    run_cmd
    expect_eq 2 "$RC" "exit status of payterm without a command"
}

# The commands that need no configuration run with -c (the file is ignored,
# even one that does not exist as a configuration would not load).
case_config_accepted_and_ignored()
{
    local body=$PT_TMP/payload
    printf '{"id":"evt_1","object":"event"}' >"$body"
    for cfg in "$PT_CFG_BASE" "$PT_TMP/no-such-config.json"; do
        run_cmd version -c "$cfg"
        expect_eq 0 "$RC" "exit status of payterm version -c $cfg: $ERR"
        expect_match '^payterm [0-9]' "$OUT" "what payterm version -c printed"
        OUT=$(timeout 20 "$PAYTERM" sign -c "$cfg" --gateway stripe --secret whsec_test \
            --timestamp 1700000000 <"$body" 2>"$PT_TMP/stderr")
        RC=$?
        expect_eq 0 "$RC" "exit status of payterm sign -c $cfg: $(cat "$PT_TMP/stderr")"
        local header
        header=$(jq -r .header <<<"$OUT")
        OUT=$(timeout 20 "$PAYTERM" verify --config "$cfg" --gateway stripe --secret whsec_test \
            --header "Stripe-Signature: $header" --now 1700000000 <"$body" 2>"$PT_TMP/stderr")
        RC=$?
        expect_eq 0 "$RC" "exit status of payterm verify --config $cfg: $(cat "$PT_TMP/stderr")"
        expect_eq true "$(jq -r .valid <<<"$OUT")" "verify's verdict"
    done
}

case_version()
{
    run_cmd version
    expect_eq 0 "$RC" "exit status of payterm version"
    expect_match '^payterm [0-9]+\.[0-9]+\.[0-9]+ \(database schema [0-9]+\)$' "$OUT" "payterm version"
    run_cmd --version
    expect_eq 0 "$RC" "exit status of payterm --version"
    expect_match '^payterm [0-9]' "$OUT" "payterm --version"
    run_cmd version extra
    expect_eq 2 "$RC" "exit status of payterm version extra"
}

# expect_usage WANT_STDERR ARGS...: payterm ARGS exits 2, prints nothing on
# stdout and exactly WANT_STDERR on stderr.
expect_usage()
{
    local want=$1
    shift
    run_cmd "$@"
    expect_eq 2 "$RC" "exit status of payterm $* (stderr: $ERR)"
    expect_eq "" "$OUT" "stdout of payterm $*"
    expect_eq "$want" "$ERR" "stderr of payterm $*"
}

# SPEC 5a: strict arguments, each error names the option; nothing is sent.
case_refund_usage()
{
    local id='1-64 of A-Z a-z 0-9 _ . -' amt
    expect_usage "payterm refund: ORDER_ID: required (see payterm refund --help)" \
        refund --refund-id R-1
    expect_usage "payterm refund: --refund-id: required ($id, unique)" refund O-1
    expect_usage "payterm refund: --refund-id: required ($id, unique)" refund O-1 --amount 5
    expect_usage "payterm refund: --refund-id needs a value" refund O-1 --refund-id
    expect_usage "payterm refund: --refund-id: 'R 1' is not a refund id ($id)" \
        refund O-1 --refund-id 'R 1'
    expect_usage "payterm refund: --refund-id: '$(printf 'r%.0s' $(seq 65))' is not a refund id ($id)" \
        refund O-1 --refund-id "$(printf 'r%.0s' $(seq 65))"
    expect_usage "payterm refund: ORDER_ID: 'O/1' is not an order id ($id)" refund O/1 --refund-id R-1
    expect_usage "payterm refund: unexpected argument 'O-2' (see payterm refund --help)" \
        refund O-1 O-2 --refund-id R-1
    for amt in 0 -5 12.5 1e3 007 +5 abc '' 1234567890123456; do
        expect_usage "payterm refund: --amount: '$amt' is not an amount: a whole number of minor units of at least 1 (500 = 5.00), digits only" \
            refund O-1 --refund-id R-1 --amount "$amt"
    done
    expect_usage "payterm refund: --reason: must be 1-256 bytes of text without control characters" \
        refund O-1 --refund-id R-1 --reason ''
    expect_usage "payterm refund: --reason: must be 1-256 bytes of text without control characters" \
        refund O-1 --refund-id R-1 --reason "$(printf 'a\tb')"
    expect_usage "payterm refunds: --state: 'CANCELED' is not a refund state (INIT, PROCESSING, PENDING, UNKNOWN, SUCCESS, FAILED)" \
        refunds --state CANCELED
    expect_usage "payterm refunds: --limit: must be 1-1000 (got '0')" refunds --limit 0
    expect_usage "payterm refunds: --after: must be a refund's id, the first column (got 'x')" \
        refunds --after x
    expect_usage "payterm refunds: --order: 'a b' is not an order id ($id)" refunds --order 'a b'
}

# No daemon at the configured address: exit 1, and the operator is told
# that nothing was sent.
case_refund_no_daemon()
{
    local port
    port=$(pt_pick_port)
    jq --arg l "127.0.0.1:$port" '.listen = $l' "$PT_CFG_BASE" >"$PT_TMP/nodaemon.json"
    run_cmd refund O-1 --refund-id R-1 -c "$PT_TMP/nodaemon.json"
    expect_eq 1 "$RC" "exit status of payterm refund without a daemon"
    expect_eq "" "$OUT" "stdout of payterm refund without a daemon"
    expect_match "^payterm refund: the daemon does not answer at 127.0.0.1:$port \(.*\): is payterm serve running\?
payterm refund: nothing was sent; refund R-1 was not made$" "$ERR" "stderr of payterm refund without a daemon"
}

# Against a daemon whose gateways are all down (and which wants its bearer
# token): the refusals of SPEC 5a come back as exit 1, the error JSON on
# stdout and the code and message on stderr.
case_refund_refused()
{
    printf 'cli-test-token-0123456789abcdef\n' >"$PT_TMP/token"
    chmod 600 "$PT_TMP/token"
    pt_config ". + {api_token_file: \"$PT_TMP/token\"}"
    pt_start
    run_cmd refund NOPE-1 --refund-id R-NOPE-1 -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of payterm refund of an unknown order (stderr: $ERR)"
    expect_eq not_found "$(jq -r .error.code <<<"$OUT")" "stdout of payterm refund of an unknown order"
    expect_eq "payterm refund: 404 not_found: $(jq -r .error.message <<<"$OUT")" "$ERR" \
        "stderr of payterm refund of an unknown order"
    expect_contains "NOPE-1" "$ERR" "the 404 message names the order"
    # A charge queued offline (INIT) is not paid yet: nothing to refund.
    PT_AUTH=$(head -n 1 "$PT_TMP/token") pt_post /v1/charges k-cli-q1 \
        '{"order_id":"CLI-Q1","amount":500,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa"}'
    expect_status 202
    run_cmd refund CLI-Q1 --refund-id R-CLI-Q1 --amount 100 -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of payterm refund of a queued charge (stderr: $ERR)"
    expect_eq charge_not_refundable "$(jq -r .error.code <<<"$OUT")" "the refusal's code"
    expect_match "^payterm refund: 409 charge_not_refundable: " "$ERR" "stderr of the refusal"
    # Without the right token the daemon says 401, and so does the command.
    printf 'the-wrong-token-0123456789abcdef\n' >"$PT_TMP/token.wrong"
    chmod 600 "$PT_TMP/token.wrong"
    jq --arg t "$PT_TMP/token.wrong" '.api_token_file = $t' "$PT_CFG" >"$PT_TMP/wrongtoken.json"
    run_cmd refund CLI-Q1 --refund-id R-CLI-Q1 -c "$PT_TMP/wrongtoken.json"
    expect_eq 1 "$RC" "exit status of payterm refund with a wrong token (stderr: $ERR)"
    expect_match "^payterm refund: 401 " "$ERR" "stderr of payterm refund with a wrong token"
    # payterm sync goes the same way (the bearer token, the listen address).
    run_cmd sync -c "$PT_CFG"
    expect_eq "0 sync pass started" "$RC $OUT" "payterm sync (stderr: $ERR)"
    run_cmd sync -c "$PT_TMP/wrongtoken.json"
    expect_eq "1 payterm sync: the daemon answered HTTP 401" "$RC $ERR" "payterm sync with a wrong token"
    # Nothing was stored; the listing reads the database, daemon or not.
    run_cmd refunds -c "$PT_CFG"
    expect_eq 0 "$RC" "exit status of payterm refunds (stderr: $ERR)"
    expect_match '^id +refund_id +order_id +gateway +amount +cur +state +note$' "$OUT" \
        "payterm refunds with no refunds: the header alone"
    run_cmd refunds --json -c "$PT_CFG"
    expect_eq "0 " "$RC $OUT" "payterm refunds --json with no refunds"
    run_cmd refunds --order NOPE-1 -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of payterm refunds --order of an unknown order"
    expect_eq "payterm refunds: --order: no charge with order_id 'NOPE-1'" "$ERR" \
        "stderr of payterm refunds --order of an unknown order"
    pt_stop
}

pt_init

pt_case "payterm --help lists every command" case_command_list
pt_case "every command: --help and -h print its usage and exit 0, -c is parsed, bad options exit 2" \
    case_help_everywhere
pt_case "-c/--config is accepted (and ignored) by version, sign and verify" \
    case_config_accepted_and_ignored
pt_case "payterm version" case_version
pt_case "payterm refund / refunds: usage errors exit 2 and name the option" case_refund_usage
pt_case "payterm refund without a daemon: exit 1, nothing sent" case_refund_no_daemon
pt_case "payterm refund: 404, 409 and 401 from the daemon exit 1 with the code and message" \
    case_refund_refused

pt_done
