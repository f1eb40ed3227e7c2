#!/usr/bin/env bash
# test_log_file.sh - `payterm serve --log-file` under log.max_bytes (SPEC 10,
# 14: a board's /var/log is often RAM, and nothing else may rotate it).
#
#   * with log.max_bytes = 16384 and a line per request (log_level debug),
#     800 requests: the file and FILE.1 together never hold more than
#     16384 bytes (looked at after every 100 requests), FILE.1 is there,
#     every line is whole (time, level, text), the newest request is in
#     the file;
#   * SIGHUP: a file moved away (logrotate) is followed by a new one, and a
#     new log.max_bytes takes effect without a restart;
#   * a file that cannot be renamed (a bind mount of it onto itself, so
#     rename fails and writes do not): emptied at the bound instead, with
#     a line saying so;
#   * log.max_bytes below 16384 is refused, naming the key;
#   * the board's configuration (firmware/board/payterm.json): online
#     charges against the simulator, and the bytes each one writes at the
#     board's log_level; with PT_CHARGES_PER_DAY (default 2000) a day's
#     log stays under 1 MiB.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/board.sh"

BOARD_CONFIG=$(cd "$(dirname "$0")/../../firmware/board" && pwd)/payterm.json
CHARGES_PER_DAY=${PT_CHARGES_PER_DAY:-2000}

# file_serve FILE [PORT] - `payterm serve --log-file FILE` with $PT_CFG_BASE
# on PORT or a free port, until FILE has the start-up line and /healthz answers
# (lib.sh's pt_start looks for that line on stderr).  Sets PT_PID, PT_PORT,
# PT_URL, PT_LOG (stderr), PT_CFG.
file_serve()
{
    local deadline
    PT_PORT=${2:-$(pt_pick_port)}
    PT_URL=http://127.0.0.1:$PT_PORT
    jq --arg l "127.0.0.1:$PT_PORT" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    PT_STARTS=$((PT_STARTS + 1))
    PT_LOG=$PT_TMP/daemon.file.$PT_STARTS.log
    "$PAYTERM" serve -c "$PT_CFG" --log-file "$1" >"$PT_LOG" 2>&1 &
    PT_PID=$!
    echo "$PT_PID" >>"$PT_TMP/pids"
    deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    # Below info (the board's warn) the start-up line is not written.
    until { [ "${QUIET_START:-0}" = 1 ] || grep -q 'serving on' "$1" 2>/dev/null; } &&
        curl -s -o /dev/null --max-time 2 "$PT_URL/healthz"; do
        kill -0 "$PT_PID" 2>/dev/null || fail "payterm serve exited: $(cat "$PT_LOG" "$1")"
        [ "$(date +%s)" -lt "$deadline" ] || fail "not ready within ${PT_START_TIMEOUT_S}s: $(tail -n 5 "$1")"
        sleep 0.02
    done
}

# stop_serve - SIGTERM, and wait.
stop_serve()
{
    kill -TERM "$PT_PID" 2>/dev/null
    while kill -0 "$PT_PID" 2>/dev/null; do sleep 0.02; done
}

# total - bytes in the log file and FILE.1 together.
total()
{
    local a b
    a=$(stat -c %s "$LOGF" 2>/dev/null || echo 0)
    b=$(stat -c %s "$LOGF.1" 2>/dev/null || echo 0)
    echo $((a + b))
}

# whole_lines FILE - fails naming a line that is not "TIME LEVEL: text".
whole_lines()
{
    local bad
    bad=$(grep -vnE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z (error|warn|info|debug): .' "$1" |
        head -n 3)
    [ -z "$bad" ] || fail "lines of $1 that are not whole: $bad"
}

case_bound()
{
    local i max=0 t
    mkdir -p "$PT_TMP/logs"
    LOGF=$PT_TMP/logs/payterm.log
    pt_config '.log_level = "debug" | .log = {max_bytes: 16384}'
    file_serve "$LOGF"
    # 100 requests a curl (one connection), then a look.
    for i in $(seq 100 100 800); do
        curl -s "$PT_URL/healthz?n=[$((i - 99))-$i]" >/dev/null
        t=$(total)
        [ "$t" -gt "$max" ] && max=$t
        [ "$t" -le 16384 ] || fail "after $i requests the log holds $t bytes (log.max_bytes 16384)"
    done
    pt_log "  800 requests: at most $max bytes in $LOGF and .1"
    [ -s "$LOGF.1" ] || fail "no $LOGF.1 after 800 request lines"
    whole_lines "$LOGF"
    whole_lines "$LOGF.1"
    grep -q 'GET /healthz' "$LOGF" ||
        fail "the newest requests are not in $LOGF: $(tail -n 2 "$LOGF")"
    [ "$(stat -c %s "$LOGF")" -le 8192 ] && [ "$(stat -c %s "$LOGF.1")" -le 8192 ] ||
        fail "a file holds more than half of log.max_bytes: $(stat -c '%n %s' "$LOGF" "$LOGF.1")"
    echo "$PT_PID" >"$PT_TMP/bound.pid"
    echo "$PT_URL" >"$PT_TMP/bound.url"
    echo "$PT_CFG" >"$PT_TMP/bound.cfg"
}

case_sighup()
{
    local pid url before
    pid=$(cat "$PT_TMP/bound.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null || fail "no daemon"
    url=$(cat "$PT_TMP/bound.url")
    LOGF=$PT_TMP/logs/payterm.log
    # logrotate moves the file away, then SIGHUP: a new file.
    mv "$LOGF" "$LOGF-moved"
    jq '.log.max_bytes = 65536' "$PT_CFG" >"$PT_CFG.new" && mv "$PT_CFG.new" "$PT_CFG"
    kill -HUP "$pid"
    local deadline=$(($(date +%s) + 10))
    until [ -f "$LOGF" ] && grep -q 'configuration reloaded' "$LOGF"; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "no new $LOGF after SIGHUP"
        sleep 0.02
    done
    rm -f "$LOGF.1"
    # The new bound (64 KiB): more than the old half (8 KiB) and less
    # than the new one (32 KiB) stays in one file.
    before=$(stat -c %s "$LOGF")
    curl -s "$url/healthz?m=[1-200]" >/dev/null
    [ ! -e "$LOGF.1" ] || fail "rotated after log.max_bytes became 65536 ($(stat -c %s "$LOGF.1") bytes in .1)"
    [ "$(stat -c %s "$LOGF")" -gt 8192 ] ||
        fail "only $(stat -c %s "$LOGF") bytes (from $before) after 200 lines"
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
}

# The file a bind mount of itself: rename fails (EBUSY), writes do not.
case_cannot_rename()
{
    [ "$(id -u)" = 0 ] && command -v unshare >/dev/null || pt_skip "needs root and unshare"
    # A chroot (its / no mount point) refuses a private mount namespace, as
    # pt_mount_tmpfs's cases are skipped where nothing can be mounted.
    unshare --mount true 2>/dev/null || pt_skip "no mount namespace here: $(unshare --mount true 2>&1)"
    local f=$PT_TMP/pinned/payterm.log wrap=$PT_TMP/payterm-pinned t i
    mkdir -p "$PT_TMP/pinned"
    : >"$f"
    cat >"$wrap" <<EOF
#!/bin/sh
exec unshare --mount sh -c 'mount --bind "\$0" "\$0" && exec "\$@"' "$f" "$PAYTERM" "\$@"
EOF
    chmod 0755 "$wrap"
    PAYTERM=$wrap
    LOGF=$f
    pt_config '.log_level = "debug" | .log = {max_bytes: 16384}'
    file_serve "$f"
    curl -s "$PT_URL/healthz?p=[1-400]" >/dev/null
    t=$(stat -c %s "$f")
    [ "$t" -le 8192 ] || fail "$f holds $t bytes (log.max_bytes 16384, not renamable)"
    [ ! -e "$f.1" ] || fail "$f.1 exists though $f cannot be renamed"
    grep -q 'log.max_bytes: cannot rotate .*emptied it instead' "$f" ||
        fail "no line saying the file was emptied: $(head -n 2 "$f")"
    whole_lines "$f"
    stop_serve
}

case_refused()
{
    local out
    jq '.log = {max_bytes: 1000}' "$PT_CFG_BASE" >"$PT_TMP/small.json"
    out=$("$PAYTERM" init -c "$PT_TMP/small.json" 2>&1)
    expect_contains "log.max_bytes" "$out" "payterm init with log.max_bytes 1000"
    expect_contains "at least 16384" "$out" "payterm init with log.max_bytes 1000"
    jq '.log = {size: 5}' "$PT_CFG_BASE" >"$PT_TMP/unknown.json"
    out=$("$PAYTERM" init -c "$PT_TMP/unknown.json" 2>&1)
    expect_contains "log.size" "$out" "payterm init with log.size"
}

# Online charges on the board's own configuration (its log_level and
# log.max_bytes), Stripe on the simulator: bytes written per charge.
case_board_level()
{
    local level max n=50 i before after per day
    level=$(jq -r '.log_level' "$BOARD_CONFIG")
    max=$(jq -r '.log.max_bytes // empty' "$BOARD_CONFIG")
    [ -n "$max" ] || fail "$BOARD_CONFIG sets no log.max_bytes"
    PT_PORT=$(pt_pick_port)
    URL=http://127.0.0.1:$PT_PORT
    board_sim_start "$URL"
    chmod 0755 "$PT_TMP"
    board_config root "127.0.0.1:$PT_PORT"
    # The daemon runs as root here: its secrets root's own, 0600.
    chmod 0600 "$PT_TMP/etc/keys/stripe_secret_key" "$PT_TMP/etc/keys/stripe_webhook_secret"
    # The board's logging keys over the test's layout.
    jq --slurpfile b "$BOARD_CONFIG" '.log_level = $b[0].log_level | .log = $b[0].log' \
        "$CONFIG" >"$CONFIG.new" && mv "$CONFIG.new" "$CONFIG"
    PT_CFG_BASE=$CONFIG
    LOGF=$PT_TMP/board/payterm.log
    mkdir -p "$PT_TMP/board"
    QUIET_START=1 file_serve "$LOGF" "$PT_PORT"
    # One charge first: the first connection's lines are not the day's.
    pt_post /v1/charges warm-key "$(charge_body warm-1)"
    [[ $PT_STATUS == 2* ]] || fail "the first charge got $PT_STATUS: $PT_BODY"
    before=$(total)
    for i in $(seq 1 "$n"); do
        pt_post /v1/charges "day-key-$i" "$(charge_body "day-$i")"
        [[ $PT_STATUS == 2* ]] || fail "charge $i got $PT_STATUS: $PT_BODY"
    done
    after=$(total)
    [ ! -e "$LOGF.1" ] || fail "rotated during the measurement (log.max_bytes $max)"
    per=$(((after - before + n - 1) / n))
    day=$((per * CHARGES_PER_DAY))
    pt_log "  log_level $level: $((after - before)) bytes for $n online charges, $per per charge;" \
        "$CHARGES_PER_DAY charges a day: $day bytes"
    echo "# log_level $level: $per bytes per online charge; $CHARGES_PER_DAY a day: $day bytes (1 MiB = 1048576)" \
        >"$PT_TMP/board_level"
    [ "$day" -lt 1048576 ] ||
        fail "a day of $CHARGES_PER_DAY charges writes $day bytes at log_level $level (over 1 MiB)"
    # Rotation keeps at least half of log.max_bytes: a day must fit in it.
    [ $((max / 2)) -ge "$day" ] ||
        fail "half of log.max_bytes ($max) holds less than a day ($day bytes)"
    stop_serve
    board_sim_stop
}

pt_init
pt_case "log.max_bytes 16384, 800 lines: file and .1 never over it, lines whole" case_bound
pt_case "SIGHUP: a moved file is followed by a new one; a new log.max_bytes at once" case_sighup
pt_case "a file that cannot be renamed is emptied at the bound, and says so" case_cannot_rename
pt_case "log.max_bytes below 16384, or an unknown log key, is refused by name" case_refused
pt_case "the board's log level: bytes per online charge; a day under 1 MiB" case_board_level
[ -f "$PT_TMP/board_level" ] && cat "$PT_TMP/board_level"
pt_done
