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
    [ "$n" -ge 12 ] || fail "payterm --help lists $n commands: $(commands | tr '\n' ' ')"
    for c in serve init status charges sync sweep backup sim demo sign verify version; do
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

pt_init

pt_case "payterm --help lists every command" case_command_list
pt_case "every command: --help and -h print its usage and exit 0, -c is parsed, bad options exit 2" \
    case_help_everywhere
pt_case "-c/--config is accepted (and ignored) by version, sign and verify" \
    case_config_accepted_and_ignored
pt_case "payterm version" case_version

pt_done
