#!/usr/bin/env bash
# test_service.sh - the daemon as a service (SPEC 11): log lines, journald
# priorities, the debug request log, SIGHUP's reload (live keys, restart
# keys, a broken file refused whole), and the watchdog that is fed only
# while the HTTP listener answers and the sync thread moves.
#
# The watchdog cases play systemd with pt_notifysock ($PT_NOTIFYSOCK), which
# writes every sd_notify datagram it gets as "MONO_MS MESSAGE".
source "$(dirname "$0")/lib.sh"

# wait_for_log TEXT [FILE] - until the log shows TEXT (bounded).
wait_for_log()
{
    local file=${2:-$PT_LOG} deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    until grep -q -- "$1" "$file"; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "never seen in $file: $1"
        sleep 0.02
    done
}

OUTCOME='reload: configuration reloaded\|reload: the new configuration is refused'

# hup_and_wait - SIGHUP, then waits until one more reload outcome is logged.
hup_and_wait()
{
    local before deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    before=$(grep -c "$OUTCOME" "$PT_LOG")
    kill -HUP "$PT_PID"
    until [ "$(grep -c "$OUTCOME" "$PT_LOG")" -gt "$before" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "no reload outcome logged after SIGHUP"
        sleep 0.02
    done
}

# reload_with JQ_FILTER - rewrites the running daemon's config, then SIGHUP.
reload_with()
{
    jq "$1" "$PT_CFG" >"$PT_CFG.new" && mv "$PT_CFG.new" "$PT_CFG" || fail "reload_with: bad filter"
    hup_and_wait
}

TS='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z (error|warn|info|debug): '

case_log_lines()
{
    pt_start
    pt_stop
    local bad
    bad=$(grep -Ev "$TS" "$PT_LOG" | head -3)
    [ -z "$bad" ] || fail "log lines without an RFC 3339 UTC time and a level: $bad"
    expect_match "${TS}payterm .* serving on" "$(grep 'serving on' "$PT_LOG")" "the start line"
    # The time is now, in UTC.
    local stamp
    stamp=$(grep -m1 'serving on' "$PT_LOG" | cut -c1-16)
    # (This minute or the one before: the daemon may have started just
    # before the minute turned.  expect_eq fails at once, so no "||" here.)
    local now before
    now=$(date -u +%Y-%m-%dT%H:%M)
    before=$(date -u -d '1 minute ago' +%Y-%m-%dT%H:%M)
    [ "$stamp" = "$now" ] || [ "$stamp" = "$before" ] ||
        fail "the start line's minute (UTC)"$'\n'"  expected: $before or $now"$'\n'"  actual:   $stamp"
}

# serve_with_stream STDERR STREAM - serve with stderr appended to STDERR and
# JOURNAL_STREAM naming STREAM's device and inode (what systemd sets for the
# stream it connected), until ready; then SIGTERM, exit 0.
serve_with_stream()
{
    local pid
    JOURNAL_STREAM="$(stat -c %d "$2"):$(stat -c %i "$2")" \
        "$PAYTERM" serve -c "$PT_CFG" 2>>"$1" &
    pid=$!
    echo "$pid" >>"$PT_TMP/pids"
    wait_for_log 'serving on' "$1"
    kill -TERM "$pid"
    wait "$pid"
    expect_eq 0 "$?" "exit status"
}

case_journald_priorities()
{
    pt_start # writes $PT_CFG with a free port
    pt_stop
    local log=$PT_TMP/journal.log other=$PT_TMP/other.log bad
    : >"$log"
    : >"$other"
    serve_with_stream "$log" "$log"
    expect_match '^<6>payterm .* serving on' "$(grep 'serving on' "$log")" "an info line"
    expect_match '^<4>' "$(grep -m1 'gateway' "$log" || true)$(grep -m1 '^<4>' "$log")" "a warning line"
    bad=$(grep -Ev '^<[0-7]>' "$log" | head -3)
    [ -z "$bad" ] || fail "journal lines without a <N> priority: $bad"
    # A JOURNAL_STREAM that is not stderr (inherited, stderr redirected) is
    # ignored: timestamps again.
    serve_with_stream "$other" "$log"
    expect_match "${TS}payterm" "$(grep 'serving on' "$other")" "stderr that is not the journal"
}

# journal_run FILE CMD... - payterm CMD with stderr appended to FILE, which
# JOURNAL_STREAM names (as systemd does for ExecStartPre= and ExecStart=);
# sets RC.
journal_run()
{
    local file=$1
    shift
    : >"$file"
    JOURNAL_STREAM="$(stat -c %d "$file"):$(stat -c %i "$file")" \
        timeout 20 "$PAYTERM" "$@" 2>>"$file" >/dev/null
    RC=$?
}

# expect_priorities FILE PRIO TEXT - every line of FILE carries a <N>
# priority, and the line with TEXT has PRIO.
expect_priorities()
{
    local bad line
    bad=$(grep -Ev '^<[0-7]>' "$1" | head -3)
    [ -z "$bad" ] || fail "lines without a <N> priority under journald: $bad"
    line=$(grep -m1 -F -- "$3" "$1")
    [ -n "$line" ] || fail "nothing says '$3' in: $(cat "$1")"
    expect_match "^<$2>" "$line" "the priority of: $3"
}

# Why a unit failed must survive journalctl -p warning (issue 32, item
# 10c): serve's and init's fatal start-up errors carry priority 3 (err)
# under journald, every line of them; an unconfigured service (init
# --check-gateways exits 1, the unit is skipped) is a notice, not an error.
case_fatal_errors_have_priority()
{
    local log=$PT_TMP/fatal.journal
    pt_config '.data_dir = "'"$PT_TMP"'/fatal"'
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    # A gateway's key file others can read, and a second one: two lines.
    chmod 0644 "$PT_TMP/stripe.sk" "$PT_TMP/c2p.sk"
    journal_run "$log" serve -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of serve: $(cat "$log")"
    expect_priorities "$log" 3 "gateways.stripe.secret_key_file $PT_TMP/stripe.sk: mode 0644"
    expect_priorities "$log" 3 "gateways.2c2p.secret_key_file $PT_TMP/c2p.sk: mode 0644"
    journal_run "$log" init -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of init: $(cat "$log")"
    expect_priorities "$log" 3 "gateways.stripe.secret_key_file $PT_TMP/stripe.sk: mode 0644"
    chmod 0600 "$PT_TMP/stripe.sk" "$PT_TMP/c2p.sk"
    # A file that is not valid JSON.
    printf '{"listen": ' >"$PT_TMP/broken.json"
    journal_run "$log" serve -c "$PT_TMP/broken.json"
    expect_eq 1 "$RC" "exit status of serve with a broken file: $(cat "$log")"
    expect_priorities "$log" 3 "not valid JSON"
    journal_run "$log" init -c "$PT_TMP/broken.json"
    expect_priorities "$log" 3 "not valid JSON"
    # No gateway configured: the unit is skipped, which is not an error.
    jq 'del(.gateways)' "$PT_CFG" >"$PT_TMP/nogw.json"
    journal_run "$log" init --check-gateways -c "$PT_TMP/nogw.json"
    expect_eq 1 "$RC" "exit status of init --check-gateways without a gateway"
    expect_priorities "$log" 5 "no gateway is configured"
    # Without JOURNAL_STREAM (a terminal, a file): no priority prefix.
    OUT=$(timeout 20 "$PAYTERM" init -c "$PT_TMP/broken.json" 2>&1)
    expect_match '^payterm: config ' "$OUT" "init's error on a terminal"
    [ ! -e "$PT_TMP/fatal/payterm.db" ] || fail "a refused start created a database"
}

case_debug_request_log()
{
    pt_config '.log_level = "debug"'
    pt_start
    pt_post /v1/charges dbg-key-7f3a9c "$(charge_body dbg-1)"
    expect_status 202
    pt_get /v1/charges/dbg-1
    expect_status 200
    pt_get /v1/charges/nope
    expect_status 404
    pt_stop
    expect_match "${TS}http POST /v1/charges 202 [0-9]+\.[0-9]{3} ms$" \
        "$(grep 'http POST /v1/charges 202' "$PT_LOG")" "the POST's line"
    expect_match "${TS}http GET /v1/charges/dbg-1 200 " "$(grep 'http GET /v1/charges/dbg-1' "$PT_LOG")" "the GET's line"
    expect_match "${TS}http GET /v1/charges/nope 404 " "$(grep 'http GET /v1/charges/nope' "$PT_LOG")" "the 404's line"
    # Never a body, a key or a payment credential.
    for secret in dbg-key-7f3a9c pm_card_visa Coffee; do
        if grep -q -- "$secret" "$PT_LOG"; then
            fail "the log holds '$secret': $(grep -m1 -- "$secret" "$PT_LOG")"
        fi
    done
    # At info: no request lines.
    pt_config
    pt_start
    pt_get /v1/charges/dbg-1
    pt_stop
    if grep -q ' http GET ' "$PT_LOG"; then fail "a request line at info"; fi
}

case_sighup_live_keys()
{
    pt_start
    pt_post /v1/charges hup-1 "$(charge_body hup-1)"
    expect_status 202
    if grep -q ' http ' "$PT_LOG"; then fail "a request line at info"; fi
    # log_level and limits.max_amount change live.
    reload_with '.log_level = "debug" | .limits.max_amount = 99'
    expect_contains 'reload: configuration reloaded' "$(cat "$PT_LOG")" "the log"
    pt_post /v1/charges hup-2 "$(charge_body hup-2)"
    expect_error 400 invalid_request
    expect_contains 'limits.max_amount' "$(pt_message)" "the refusal"
    wait_for_log 'http POST /v1/charges 400'
    # The offline limits too (the gateways are down: these charges queue).
    reload_with '.limits.max_amount = 10000000 | .offline.limits.USD.max_amount = 50'
    pt_post /v1/charges hup-3 "$(charge_body hup-3)"
    expect_error 503 offline_limit_exceeded
    expect_contains 'max_amount' "$(pt_message)" "the refusal"
    # sync timing: interval_s is read at each pass (no error, no restart).
    reload_with '.sync.interval_s = 2'
    expect_eq 1 "$(kill -0 "$PT_PID" 2>/dev/null && echo 1)" "the daemon runs"
    pt_stop
    expect_eq 0 "$(grep -c 'needs a restart' "$PT_LOG")" "warnings about restart keys"
}

case_sighup_broken_file_refused()
{
    pt_start
    # A file that does not parse: refused whole, naming why.
    cp "$PT_CFG" "$PT_CFG.good"
    printf '{"log_level": "debug", "limits": {"max_amount": 99}' >"$PT_CFG"
    hup_and_wait
    expect_contains 'reload: the new configuration is refused, the running one stays' \
        "$(cat "$PT_LOG")" "the log"
    pt_post /v1/charges bad-1 "$(charge_body bad-1)"
    expect_status 202 # limits.max_amount is still 10000000
    if grep -q ' http POST' "$PT_LOG"; then fail "log_level changed by a refused file"; fi
    # A valid file with one bad key: refused whole too, the key named.
    jq '.log_level = "debug" | .limits.max_amount = 99 | .sync.interval_s = "fast"' \
        "$PT_CFG.good" >"$PT_CFG"
    hup_and_wait
    expect_contains 'sync.interval_s' "$(grep 'refused' "$PT_LOG" | tail -1)" "the refusal names the key"
    pt_post /v1/charges bad-2 "$(charge_body bad-2)"
    expect_status 202
    # Key files another user may read: refused (as serve would at start),
    # every one named, each on a line of its own with the time and level.
    cp "$PT_CFG.good" "$PT_CFG"
    chmod 0644 "$PT_TMP/stripe.sk" "$PT_TMP/c2p.sk"
    jq '.limits.max_amount = 99' "$PT_CFG.good" >"$PT_CFG"
    hup_and_wait
    chmod 0600 "$PT_TMP/stripe.sk" "$PT_TMP/c2p.sk"
    expect_contains "2 problems, all to be fixed" "$(grep 'refused' "$PT_LOG" | tail -1)" "the refusal"
    expect_match "${TS} +gateways.stripe.secret_key_file $PT_TMP/stripe.sk: mode 0644" \
        "$(grep 'stripe.sk: mode' "$PT_LOG")" "the stripe line"
    expect_match "${TS} +gateways.2c2p.secret_key_file $PT_TMP/c2p.sk: mode 0644" \
        "$(grep 'c2p.sk: mode' "$PT_LOG")" "the 2c2p line"
    pt_post /v1/charges bad-3 "$(charge_body bad-3)"
    expect_status 202
    # And the good file is taken afterwards.
    hup_and_wait
    # (The last word on a reload, not the log's last lines: the sync
    # engine's probes of the unreachable gateways may log after it.)
    expect_contains 'reload: configuration reloaded' \
        "$(grep -E 'reload: (configuration reloaded|the new configuration is refused)' "$PT_LOG" | tail -1)" \
        "the last reload's outcome in the log"
    pt_post /v1/charges bad-4 "$(charge_body bad-4)"
    expect_error 400 invalid_request
    pt_stop
    local bad
    bad=$(grep -Ev "$TS" "$PT_LOG" | head -3)
    [ -z "$bad" ] || fail "log lines without a time and level: $bad"
}

# A reload waits a bounded time for the units of work in progress: a sync
# pass that hangs makes it give up (the API answering meanwhile), and the
# next SIGHUP, once the pass moved on, goes through.
case_sighup_gives_up_when_busy()
{
    export PAYTERM_TEST_SYNC_STALL_FILE=$PT_TMP/stall
    pt_start
    touch "$PT_TMP/stall"
    pt_post /v1/sync - -
    sleep 1
    jq '.limits.max_amount = 99' "$PT_CFG" >"$PT_CFG.new" && mv "$PT_CFG.new" "$PT_CFG"
    local t0 t1
    t0=$(date +%s%N)
    kill -HUP "$PT_PID"
    sleep 0.5
    pt_get /v1/charges/nope # served while the reload waits
    expect_status 404
    wait_for_log 'reload: the new configuration is refused'
    t1=$(date +%s%N)
    expect_contains 'still in progress after 4 s' "$(grep refused "$PT_LOG")" "the refusal"
    [ $(((t1 - t0) / 1000000)) -lt 8000 ] || fail "the reload waited $(((t1 - t0) / 1000000)) ms"
    pt_post /v1/charges busy-1 "$(charge_body busy-1)"
    expect_status 202 # the old limits
    rm -f "$PT_TMP/stall"
    sleep 0.5
    hup_and_wait
    expect_contains 'reload: configuration reloaded' "$(tail -2 "$PT_LOG")" "the second reload"
    pt_post /v1/charges busy-2 "$(charge_body busy-2)"
    expect_error 400 invalid_request
    pt_stop
}

case_check_gateways()
{
    pt_start
    pt_stop
    local rc
    "$PAYTERM" init --check-gateways -c "$PT_CFG" >/dev/null 2>&1
    expect_eq 0 "$?" "exit with gateways configured"
    jq '.gateways = {}' "$PT_CFG" >"$PT_TMP/none.json"
    "$PAYTERM" init --check-gateways -c "$PT_TMP/none.json" >/dev/null 2>"$PT_TMP/none.err"
    rc=$?
    expect_eq 1 "$rc" "exit with no gateway (ExecCondition: skipped)"
    expect_contains 'no gateway is configured' "$(cat "$PT_TMP/none.err")" "the message"
    printf '{"gateways": ' >"$PT_TMP/broken.json"
    "$PAYTERM" init --check-gateways -c "$PT_TMP/broken.json" >/dev/null 2>&1
    expect_eq 255 "$?" "exit with an unreadable configuration (ExecCondition: failed)"
    "$PAYTERM" init --check-gateways --bogus -c "$PT_CFG" >/dev/null 2>&1
    expect_eq 255 "$?" "exit with a usage error (ExecCondition: failed, not skipped)"
}

case_sighup_restart_keys()
{
    pt_start
    local other
    other=$(pt_pick_port)
    reload_with ".listen = \"127.0.0.1:$other\" | .data_dir = \"$PT_TMP/elsewhere\" |
        del(.gateways[\"2c2p\"]) | .limits.max_amount = 99 | .qr_timeout_s = 600"
    local log
    log=$(cat "$PT_LOG")
    expect_contains 'reload: listen changed; it needs a restart and keeps its running value' "$log" "the log"
    expect_contains 'reload: data_dir changed' "$log" "the log"
    expect_contains 'reload: qr_timeout_s changed' "$log" "the log"
    expect_contains 'reload: gateways.2c2p (removed) changed' "$log" "the log"
    # Still on the old port and the old database; the live key did change.
    pt_get /v1/charges/warmup-none
    expect_status 404
    pt_post /v1/charges rk-1 "$(charge_body rk-1)"
    expect_error 400 invalid_request
    [ ! -e "$PT_TMP/elsewhere" ] || fail "a data_dir from a reload was created"
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$other/healthz"; then
        fail "something listens on the reloaded listen address"
    fi
    pt_stop
}

# idempotency.lock_timeout_s needs a restart and keeps its running value;
# a new sync.request_timeout_ms it would no longer outlive by 5 s is refused
# (the file on its own would pass), naming both.
case_sighup_lock_timeout_kept()
{
    pt_config '.idempotency.lock_timeout_s = 21'
    pt_start
    reload_with '.idempotency.lock_timeout_s = 60 | .sync.request_timeout_ms = 30000'
    local line
    line=$(grep 'reload: the new configuration is refused' "$PT_LOG" | tail -1)
    expect_contains 'idempotency.lock_timeout_s (its running value, kept until a restart): 21 s must be above sync.request_timeout_ms (30000 ms) + 5 s' \
        "$line" "the refusal"
    # A request timeout the running lock still outlives is taken.
    reload_with '.idempotency.lock_timeout_s = 60 | .sync.request_timeout_ms = 15000'
    # The newest outcome: the gateways' probes after a reload may log first.
    expect_contains 'reload: configuration reloaded' "$(grep "$OUTCOME" "$PT_LOG" | tail -n 1)" \
        "the last reload's outcome"
    pt_stop
}

# ---- the watchdog --------------------------------------------------------------

# notify_lines PATTERN [AFTER_MS] - the messages matching PATTERN received after AFTER_MS.
notify_lines()
{
    awk -v a="${2:-0}" -v p="$1" '$1 > a && index($0, p) { print }' "$PT_TMP/notify.log"
}

wait_notify()
{
    local deadline=$(($(date +%s) + ${3:-PT_START_TIMEOUT_S}))
    until [ -n "$(notify_lines "$1" "${2:-0}")" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "sd_notify never got '$1' (after ${2:-0}): $(tail -5 "$PT_TMP/notify.log")"
        sleep 0.05
    done
}

mono_ms() { awk '{ print int($1 * 1000) }' /proc/uptime; }

case_watchdog_follows_health()
{
    local sock=$PT_TMP/notify.sock
    "$PT_NOTIFYSOCK" "$sock" >"$PT_TMP/notify.log" &
    echo $! >>"$PT_TMP/pids"
    while [ ! -S "$sock" ]; do sleep 0.01; done
    export NOTIFY_SOCKET=$sock WATCHDOG_USEC=4000000 PAYTERM_TEST_SYNC_STALL_FILE=$PT_TMP/stall
    pt_start
    wait_notify READY=1
    wait_notify 'STATUS=serving; '
    wait_notify WATCHDOG=1
    local t0
    t0=$(awk 'index($0, "WATCHDOG=1") { t = $1 } END { print t }' "$PT_TMP/notify.log")
    wait_notify WATCHDOG=1 "$t0" 6 # fed again, every 2 s
    # The sync thread hangs in its next pass (sync.interval_s = 1: soon).
    touch "$PT_TMP/stall"
    pt_post /v1/sync - -
    wait_notify 'STATUS=not well: the sync thread has made no progress' 0 10
    local t_bad
    t_bad=$(notify_lines 'STATUS=not well' | head -1 | cut -d' ' -f1)
    wait_for_log 'watchdog: not fed: the sync thread has made no progress'
    # Nothing fed while it hangs (5 s: more than two intervals).
    sleep 5
    local fed
    fed=$(notify_lines WATCHDOG=1 "$t_bad")
    [ -z "$fed" ] || fail "the watchdog was fed while the sync thread hung: $fed"
    # The HTTP API still answers meanwhile (only the sync thread is stuck).
    pt_get /v1/charges/nope
    expect_status 404
    # It recovers: fed again, the status says so.
    local t_fix
    t_fix=$(mono_ms)
    rm -f "$PT_TMP/stall"
    wait_notify WATCHDOG=1 "$t_bad" 10
    wait_notify 'STATUS=serving; ' "$t_bad" 10
    wait_for_log 'watchdog: well again'
    pt_stop
    wait_notify STOPPING=1
    : "$t_fix"
}

# A commit that waits (another process holds the database's write lock, a
# slow card) is not a hung daemon: the probe asks nothing of the database.
case_watchdog_slow_storage()
{
    local sock=$PT_TMP/notify3.sock
    "$PT_NOTIFYSOCK" "$sock" >"$PT_TMP/notify.log" &
    echo $! >>"$PT_TMP/pids"
    while [ ! -S "$sock" ]; do sleep 0.01; done
    export NOTIFY_SOCKET=$sock WATCHDOG_USEC=4000000
    pt_start
    wait_notify WATCHDOG=1
    local t0
    t0=$(mono_ms)
    # 5 s of a foreign write lock: /healthz (which checks storage) waits.
    (printf 'BEGIN IMMEDIATE;\n.shell sleep 5\nCOMMIT;\n' |
        sqlite3 "$PT_TMP/data/payterm.db" >/dev/null 2>&1) &
    local holder=$!
    sleep 6
    wait "$holder"
    # Fed all along: no gap near WatchdogSec (4 s).
    local gap
    gap=$(awk -v a="$t0" 'index($0, "WATCHDOG=1") && $1 > a - 4000 { if (p) { g = $1 - p; if (g > m) m = g } p = $1 } END { print m + 0 }' "$PT_TMP/notify.log")
    [ "$gap" -lt 3000 ] || fail "a ${gap} ms gap between two WATCHDOG=1 while storage was slow"
    if grep -q 'watchdog: not fed' "$PT_LOG"; then fail "$(grep 'watchdog: not fed' "$PT_LOG")"; fi
    pt_stop
}

case_watchdog_not_ours()
{
    # WATCHDOG_PID names another process: not our watchdog, never fed.
    local sock=$PT_TMP/notify2.sock
    "$PT_NOTIFYSOCK" "$sock" >"$PT_TMP/notify.log" &
    echo $! >>"$PT_TMP/pids"
    while [ ! -S "$sock" ]; do sleep 0.01; done
    export NOTIFY_SOCKET=$sock WATCHDOG_USEC=2000000 WATCHDOG_PID=1
    pt_start
    wait_notify READY=1
    sleep 3
    expect_eq "" "$(notify_lines WATCHDOG=1)" "WATCHDOG=1 messages"
    pt_stop
}

pt_init

pt_case "log lines: an RFC 3339 UTC time and the level first" case_log_lines
pt_case "under journald (JOURNAL_STREAM is stderr): <N> priorities, no time" case_journald_priorities
pt_case "fatal start-up errors of serve and init carry journald priority 3, every line" \
    case_fatal_errors_have_priority
pt_case "log_level debug: one line per request, never a body or a key" case_debug_request_log
pt_case "SIGHUP: log_level, limits, offline limits, sync timing change without a restart" case_sighup_live_keys
pt_case "SIGHUP: a broken file, a bad key, a readable key file are refused whole" case_sighup_broken_file_refused
pt_case "SIGHUP: listen, data_dir, qr_timeout_s, the set of gateways need a restart: named and kept" case_sighup_restart_keys
pt_case "SIGHUP: a request timeout the kept lock_timeout_s does not outlive by 5 s is refused" \
    case_sighup_lock_timeout_kept
pt_case "SIGHUP while a sync step hangs: gives up after 4 s, the API answers, the next one works" case_sighup_gives_up_when_busy
pt_case "init --check-gateways: 0 configured, 1 none, 255 broken or misused" case_check_gateways
pt_case "watchdog: fed while well, not while the sync thread hangs, again once it moves" case_watchdog_follows_health
pt_case "watchdog: a slow commit (a foreign write lock) is not a hang: still fed" case_watchdog_slow_storage
pt_case "watchdog: WATCHDOG_PID of another process: not fed" case_watchdog_not_ours

pt_done
