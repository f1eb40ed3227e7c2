#!/usr/bin/env bash
# test_syslog.sh - `payterm serve --syslog` against BusyBox syslogd (SPEC 14:
# logs without systemd).
#
# BusyBox syslogd runs in a mount namespace of its own whose /dev is a
# tmpfs (the machine's null, zero, random, urandom and tty bound into it),
# so the /dev/log it makes is the daemon's alone; the daemon enters that
# namespace (nsenter -m) and nothing else changes.  syslogd writes each
# message as "TIME HOST FACILITY.PRIORITY TAG[PID]: TEXT", so the file shows
# what priority each line arrived with:
#
#   * info (start-up), debug (each request at log_level debug), warning (a
#     reload that changes a key needing a restart), err (a reload of a
#     broken file), all daemon.* and tagged payterm[PID];
#   * none of those lines on the daemon's stderr;
#   * syslogd restarted (a new /dev/log): after SIGHUP the daemon's lines
#     arrive again;
#   * the BusyBox init script with LOG=syslog: its own lines through
#     logger, the daemon's with --syslog.
#
# Needs root (mounts in a namespace of its own); skips otherwise.
source "$(dirname "$0")/lib.sh"

# syslogd_start - BusyBox syslogd in the namespace (that of the process
# $PT_TMP/ns.pid names, or a new one when there is none), writing
# $MESSAGES.  Sets SYSLOGD_PID; the new syslogd holds the namespace from
# then on.
syslogd_start()
{
    local out=$PT_TMP/syslogd.out NS_PID
    NS_PID=$(cat "$PT_TMP/ns.pid" 2>/dev/null)
    if [ -z "$NS_PID" ]; then
        unshare --mount "$BB/sh" -c '
            d=$1
            mount -t tmpfs -o mode=0755 payterm-dev "$d" || exit 99
            for n in null zero full random urandom tty; do
                touch "$d/$n" && mount --bind "/dev/$n" "$d/$n" || exit 99
            done
            mount --bind "$d" /dev || exit 99
            exec "$2" syslogd -n -O "$3"' sh "$PT_TMP/dev" "$BB/busybox" "$MESSAGES" \
            >"$out" 2>&1 &
        SYSLOGD_PID=$!
    else
        nsenter -t "$NS_PID" -m -- "$BB/busybox" syslogd -n -O "$MESSAGES" >"$out" 2>&1 &
        SYSLOGD_PID=$!
    fi
    echo "$SYSLOGD_PID" >>"$PT_TMP/pids"
    echo "$SYSLOGD_PID" >"$PT_TMP/syslogd.pid"
    local deadline=$(($(date +%s) + 10))
    until nsenter -t "$SYSLOGD_PID" -m -- test -S /dev/log 2>/dev/null; do
        kill -0 "$SYSLOGD_PID" 2>/dev/null || return 1
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.02
    done
    echo "$SYSLOGD_PID" >"$PT_TMP/ns.pid"
}

# wait_message REGEX [WHAT] - until a line of $MESSAGES matches (10 s).
wait_message()
{
    local deadline=$(($(date +%s) + 10))
    until grep -qE "$1" "$MESSAGES" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] ||
            fail "no line matching '$1' from syslogd (${2:-}): $(tail -n 5 "$MESSAGES" 2>/dev/null)"
        sleep 0.02
    done
}

setup()
{
    BB=$PT_TMP/bb
    mkdir -p "$BB" "$PT_TMP/dev"
    ln -s "$(command -v busybox)" "$BB/busybox"
    ln -s "$(command -v busybox)" "$BB/sh"
    MESSAGES=$PT_TMP/messages
    syslogd_start || {
        echo "ok 1 - payterm serve --syslog # SKIP no mount namespace with its own /dev here: $(cat "$PT_TMP/syslogd.out")"
        exit 0
    }
    # PAYTERM, as lib.sh starts it, is the real binary in syslogd's mount
    # namespace (nsenter execs it: the same PID).
    REAL_PAYTERM=$PAYTERM
    cat >"$PT_TMP/payterm-ns" <<EOF
#!/bin/sh
exec nsenter -t "\$(cat $PT_TMP/ns.pid)" -m -- "$REAL_PAYTERM" "\$@"
EOF
    chmod 0755 "$PT_TMP/payterm-ns"
    PAYTERM=$PT_TMP/payterm-ns
    pt_config '.log_level = "debug"'
}

# syslog_serve - `payterm serve --syslog` on a free port, until syslogd has
# its start-up line and /healthz answers (lib.sh's pt_start waits for that
# line on stderr, where --syslog writes none).  Sets PT_PID, PT_PORT,
# PT_URL, PT_LOG.
syslog_serve()
{
    local deadline
    PT_PORT=$(pt_pick_port)
    PT_URL=http://127.0.0.1:$PT_PORT
    jq --arg l "127.0.0.1:$PT_PORT" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    PT_LOG=$PT_TMP/daemon.syslog.log
    "$PAYTERM" serve -c "$PT_CFG" --syslog >"$PT_LOG" 2>&1 &
    PT_PID=$!
    echo "$PT_PID" >>"$PT_TMP/pids"
    echo "$PT_PID" >"$PT_TMP/serve.pid"
    echo "$PT_URL" >"$PT_TMP/serve.url"
    deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    until grep -q "payterm\[$PT_PID\]: payterm .* serving on" "$MESSAGES" 2>/dev/null &&
        curl -s -o /dev/null --max-time 2 "$PT_URL/healthz"; do
        kill -0 "$PT_PID" 2>/dev/null || fail "payterm serve --syslog exited: $(cat "$PT_LOG")"
        [ "$(date +%s)" -lt "$deadline" ] ||
            fail "payterm serve --syslog not ready within ${PT_START_TIMEOUT_S}s: $(tail -n 5 "$MESSAGES")"
        sleep 0.02
    done
}

case_priorities()
{
    syslog_serve
    local p=$PT_PID
    wait_message "daemon\.info payterm\[$p\]: payterm [0-9.]+ serving on 127\.0\.0\.1:$PT_PORT\$" \
        "the start-up line at info"
    pt_get /healthz
    wait_message "daemon\.debug payterm\[$p\]: http GET /healthz 200 " "a request at debug"
    # A key that needs a restart, changed: a warning naming it.
    jq '.data_dir = "/nonexistent/elsewhere"' "$PT_CFG" >"$PT_CFG.new" && mv "$PT_CFG.new" "$PT_CFG"
    kill -HUP "$p"
    wait_message "daemon\.warn(ing)? payterm\[$p\]: reload: data_dir changed; it needs a restart" \
        "the reload's warning"
    # A broken file: refused, an error.
    printf '{"log_level": ' >"$PT_CFG"
    kill -HUP "$p"
    wait_message "daemon\.err payterm\[$p\]: reload: the new configuration is refused" \
        "the refused reload's error"
    # None of it on stderr.
    ! grep -qE 'serving on|http GET|reload:' "$PT_LOG" ||
        fail "log lines on the daemon's stderr with --syslog: $(head -n 5 "$PT_LOG")"
    grep -E "payterm\[$p\]" "$MESSAGES" | sed 's/^/    /' >&2
}

# syslogd goes away and comes back (a new /dev/log socket): SIGHUP
# reconnects, and the lines arrive again.
case_syslogd_restart()
{
    local p old
    old=$(cat "$PT_TMP/syslogd.pid")
    p=$(cat "$PT_TMP/serve.pid" 2>/dev/null)
    PT_URL=$(cat "$PT_TMP/serve.url" 2>/dev/null)
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || fail "no daemon"
    # The daemon holds the namespace while syslogd is away.
    echo "$p" >"$PT_TMP/ns.pid"
    kill -TERM "$old"
    while kill -0 "$old" 2>/dev/null; do sleep 0.02; done
    syslogd_start || fail "syslogd did not start again: $(cat "$PT_TMP/syslogd.out")"
    kill -HUP "$p"
    pt_get /v1/status
    wait_message "daemon\.debug payterm\[$p\]: http GET /v1/status " \
        "a request after syslogd came back and SIGHUP"
    kill -TERM "$p"
    wait_message "daemon\.info payterm\[$p\]: stopped\$" "the last line"
    while kill -0 "$p" 2>/dev/null; do sleep 0.02; done
}

# S80payterm with LOG=syslog: `payterm init`'s words through logger, the
# daemon with --syslog; no log file anywhere.
case_init_script_syslog()
{
    [ "$(id -u)" = 0 ] || pt_skip "needs root (start-stop-daemon -c)"
    local script applet defaults=$PT_TMP/defaults pid
    script=$(cd "$(dirname "$0")/../../firmware/board" && pwd)/S80payterm
    for applet in start-stop-daemon readlink tr head sleep rm mkdir touch chown chmod id \
        dirname cat grep logger; do
        ln -sf "$(command -v busybox)" "$BB/$applet"
    done
    PT_PORT=$(pt_pick_port)
    PT_URL=http://127.0.0.1:$PT_PORT
    jq --arg l "127.0.0.1:$PT_PORT" '.listen = $l | .log_level = "info"' "$PT_CFG_BASE" \
        >"$PT_TMP/s80.json"
    cat >"$defaults" <<EOF
PAYTERM_BIN=$REAL_PAYTERM
CONFIG=$PT_TMP/s80.json
PIDFILE=$PT_TMP/s80.pid
LOG=syslog
PAYTERM_USER=root
EOF
    nsenter -t "$(cat "$PT_TMP/ns.pid")" -m -- env -i PATH="$BB" PAYTERM_DEFAULTS="$defaults" \
        PAYTERM_THREAD_STACK_KIB="$PAYTERM_THREAD_STACK_KIB" "$BB/sh" "$script" start \
        >"$PT_TMP/s80.out" 2>&1 || fail "S80payterm start: $(cat "$PT_TMP/s80.out")"
    pid=$(head -n 1 "$PT_TMP/s80.pid")
    echo "$pid" >>"$PT_TMP/pids"
    wait_message "daemon\.info payterm\[$pid\]: payterm [0-9.]+ serving on 127\.0\.0\.1:$PT_PORT\$" \
        "the daemon S80payterm started with LOG=syslog"
    wait_message "daemon\.notice payterm: .*database .* ready" "payterm init's words, through logger"
    nsenter -t "$(cat "$PT_TMP/ns.pid")" -m -- env -i PATH="$BB" PAYTERM_DEFAULTS="$defaults" \
        "$BB/sh" "$script" stop >"$PT_TMP/s80.out" 2>&1 || fail "S80payterm stop: $(cat "$PT_TMP/s80.out")"
    wait_message "daemon\.info payterm\[$pid\]: stopped\$" "the daemon's last line"
    [ ! -e syslog ] && [ ! -e "$PT_TMP/syslog" ] || fail "a file named syslog was made"
}

pt_init
if [ "$(id -u)" != 0 ]; then
    echo "ok 1 - payterm serve --syslog # SKIP needs root (a mount namespace with its own /dev/log)"
    exit 0
fi
setup
pt_case "--syslog: info, debug, warning and err lines as daemon.<priority> payterm[pid]" \
    case_priorities
pt_case "syslogd restarted: after SIGHUP the daemon's lines arrive again" case_syslogd_restart
pt_case "S80payterm with LOG=syslog: payterm init through logger, the daemon with --syslog" \
    case_init_script_syslog
pt_done
