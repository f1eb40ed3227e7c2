#!/usr/bin/env bash
# test_busybox_init.sh - firmware/board/S80payterm under BusyBox (SPEC 14).
#
# The script runs under `busybox sh` with a PATH of nothing but BusyBox
# applets, so its start-stop-daemon is BusyBox's (which ignores -R/--retry),
# against $PAYTERM and a gateway simulator started here.  The daemon runs as
# an unprivileged user (PT_INIT_USER, default nobody) with a data_dir of its
# own; the paths come from a defaults file (PAYTERM_DEFAULTS), the script is
# not edited.  The heart of it: `restart` while an online charge waits 3 s
# at the gateway, with a sampler counting the live `payterm serve` processes
# of this configuration every ~10 ms: never two, the new daemon never finds
# the old one's lock on data_dir (SPEC 3), and the charge is answered once.
#
# Then supervision (SPEC 14): BusyBox init itself, as PID 1 of a PID and
# mount namespace of its own, with an /etc/inittab (an overlay on /etc) of
# rcS's start, the script's respawn line and rcK's stop.  kill -9 of the
# daemon -> one new daemon within 5 s, never two (sampled every ~10 ms);
# stop keeps it down, start brings it back, restart never has two, and
# init's shutdown stops it gracefully.
#
# PT_INIT_SCRIPT overrides the script under test (to show that an old one
# fails).  Needs root: start-stop-daemon -c changes the user.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/board.sh"

PT_INIT_SCRIPT=${PT_INIT_SCRIPT:-$(cd "$(dirname "$0")/../../firmware/board" && pwd)/S80payterm}
PT_INIT_USER=${PT_INIT_USER:-nobody}
PT_DEFAULT_CONFIG=$(cd "$(dirname "$0")/../../firmware/board" && pwd)/payterm.json

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# A command prefix that runs init() inside BusyBox init's namespaces.
NS_ENTER=()

# init ACTION [DEFAULTS] - runs the init script as BusyBox init would: busybox
# sh, BusyBox applets only, a bare environment.  Sets INIT_RC and INIT_OUT.
init()
{
    local defaults=${2:-$DEFAULTS}
    INIT_OUT=$("${NS_ENTER[@]}" env -i PATH="$BB" PAYTERM_DEFAULTS="$defaults" \
        PAYTERM_THREAD_STACK_KIB="$PAYTERM_THREAD_STACK_KIB" \
        ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
        ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
        "$BB/sh" "$PT_INIT_SCRIPT" "$1" 2>&1)
    INIT_RC=$?
    pt_log "  S80payterm $1 -> $INIT_RC: $INIT_OUT"
}

# serve_pids - the live `payterm serve` processes of this test's
# configuration, one PID a line.  Builtins only (no fork per process), so
# that a sample takes a few ms; a zombie has an empty cmdline and counts as
# gone (it holds no file and no lock).  A match whose parent is a match is
# not a second daemon: under ASan, LeakSanitizer's check at exit runs in a
# tracer task cloned from the daemon (same memory, same cmdline).
serve_pids()
{
    local f args pid stat found=() parents=()
    for f in /proc/[0-9]*/cmdline; do
        mapfile -d '' args 2>/dev/null <"$f" || continue
        [ "${#args[@]}" -ge 4 ] && [ "${args[0]}" = "$BIN" ] && [ "${args[1]}" = serve ] &&
            [ "${args[3]}" = "$CONFIG" ] || continue
        pid=${f#/proc/}
        pid=${pid%/cmdline}
        read -r stat 2>/dev/null <"/proc/$pid/stat" || continue
        stat=${stat##*) } # "S PPID ...", after the command's name
        stat=${stat#* }
        found+=("$pid")
        parents+=("${stat%% *}")
    done
    local i j child
    for i in "${!found[@]}"; do
        child=0
        for j in "${!found[@]}"; do
            [ "${parents[$i]}" != "${found[$j]}" ] || child=1
        done
        [ "$child" = 1 ] || echo "${found[$i]}"
    done
}

# pidfile_pid - the PID in the pid file ("" if none).
pidfile_pid() { head -n 1 "$PIDFILE" 2>/dev/null; }

# remember PID - the EXIT trap of lib.sh kills it should the test fail.
remember() { echo "$1" >>"$PT_TMP/pids"; }

# start_charge ORDER KEY NAME - POSTs a Stripe card charge in the
# background; its status and body go to $PT_TMP/NAME.status and .body.
start_charge()
{
    printf '%s' "$(charge_body "$1")" >"$PT_TMP/$3.req"
    curl -s -o "$PT_TMP/$3.body" -w '%{http_code}' --max-time 60 \
        -H 'Content-Type: application/json' -H "Idempotency-Key: $2" \
        --data-binary "@$PT_TMP/$3.req" "$URL/v1/charges" >"$PT_TMP/$3.status" &
    CHARGE_PID=$!
}

# wait_at_gateway - until the armed delay fault has been taken by a request,
# which then waits at the simulator.
wait_at_gateway()
{
    local deadline=$(($(date +%s) + 20))
    until [ "$(board_sim /_sim/faults | jq '.faults | length')" = 0 ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "the charge never reached the simulator"
        sleep 0.02
    done
}

# captures ORDER - how many times money moved at the simulator for ORDER.
captures()
{
    board_sim "/_sim/ledger?gateway=stripe&order_id=$1" | jq -r '[.data[].captures] | add // 0'
}

setup()
{
    [ -f "$PT_INIT_SCRIPT" ] || {
        pt_log "$PT_SCRIPT: no init script at $PT_INIT_SCRIPT"
        exit 2
    }
    # A script that does not read PAYTERM_DEFAULTS would run the system's
    # /usr/bin/payterm on /etc/payterm and /var/lib/payterm, as root.
    grep -q PAYTERM_DEFAULTS "$PT_INIT_SCRIPT" || {
        pt_log "$PT_SCRIPT: $PT_INIT_SCRIPT does not read \$PAYTERM_DEFAULTS: not running it"
        exit 1
    }
    local applet
    # BusyBox applets only, BusyBox's start-stop-daemon among them.
    BB=$PT_TMP/bb
    mkdir -p "$BB"
    for applet in sh start-stop-daemon readlink tr head sleep rm mkdir touch chown chmod \
        id dirname cat grep logger init; do
        ln -s "$(command -v busybox)" "$BB/$applet"
    done
    # Only Stripe is configured, on the simulator.
    PT_PORT=$(pt_pick_port)
    URL=http://127.0.0.1:$PT_PORT
    PT_URL=$URL
    board_sim_start "$URL"
    board_config "$PT_INIT_USER" "127.0.0.1:$PT_PORT"
    board_binary "$PT_INIT_USER"
    # The log's and the pid file's directories are root's.
    mkdir -p "$PT_TMP/run" "$PT_TMP/log"
    PIDFILE=$PT_TMP/run/payterm.pid
    LOG=$PT_TMP/log/payterm.log
    DEFAULTS=$PT_TMP/payterm.defaults
    cat >"$DEFAULTS" <<EOF
PAYTERM_BIN=$BIN
CONFIG=$CONFIG
PIDFILE=$PIDFILE
LOG=$LOG
PAYTERM_USER=$PT_INIT_USER
STOP_TIMEOUT=30
EOF
    # fail() shows the tail of this log.
    PT_LOG=$LOG
}

case_busybox()
{
    local ssd
    ssd=$(PATH=$BB command -v start-stop-daemon)
    expect_eq "$BB/start-stop-daemon" "$ssd" "the start-stop-daemon the script finds"
    expect_eq "$(readlink -f "$(command -v busybox)")" "$(readlink -f "$ssd")" \
        "what $ssd is"
    expect_contains BusyBox "$("$ssd" --help 2>&1)" "start-stop-daemon --help"
    "$BB/sh" -n "$PT_INIT_SCRIPT" || fail "busybox sh cannot parse $PT_INIT_SCRIPT"
}

# The packaged configuration has no gateway: start leaves payterm stopped,
# quietly (exit 0), as the systemd unit's ExecCondition= does.
case_start_unconfigured()
{
    local cfg=$PT_TMP/etc/unconfigured.json
    jq --arg d "$PT_TMP/data-unconfigured" '.data_dir = $d' "$PT_DEFAULT_CONFIG" >"$cfg" &&
        chmod 0644 "$cfg" || fail "cannot write $cfg"
    sed "s#^CONFIG=.*#CONFIG=$cfg#" "$DEFAULTS" >"$DEFAULTS.unconfigured"
    init start "$DEFAULTS.unconfigured"
    expect_eq 0 "$INIT_RC" "exit status of start without a gateway"
    expect_contains "no gateway configured" "$INIT_OUT" "output of start without a gateway"
    [ ! -e "$PIDFILE" ] || fail "a pid file after start without a gateway"
    [ ! -e "$PT_TMP/data-unconfigured" ] || fail "start without a gateway ran payterm init"
    init status "$DEFAULTS.unconfigured"
    expect_eq 3 "$INIT_RC" "exit status of status after start without a gateway"
}

case_start()
{
    local pid uid want
    init start
    expect_eq 0 "$INIT_RC" "exit status of start"
    pid=$(pidfile_pid)
    [ -n "$pid" ] || fail "no pid file $PIDFILE after start"
    remember "$pid"
    expect_eq "$pid" "$(serve_pids)" "the daemon running (pid file vs. processes)"
    pt_get /healthz
    expect_status 200
    # Runs as the service user: real, effective, saved and fs uid.
    uid=$(awk '/^Uid:/ { print $2, $3, $4, $5 }' "/proc/$pid/status")
    want=$(id -u "$PT_INIT_USER")
    expect_eq "$want $want $want $want" "$uid" "Uid of the daemon in /proc/$pid/status"
    expect_eq "$PT_INIT_USER 640" "$(stat -c '%U %a' "$LOG")" "owner and mode of $LOG"
    # A second start does not start a second daemon.
    init start
    expect_eq 0 "$INIT_RC" "exit status of start while running"
    expect_eq "$pid" "$(serve_pids)" "the daemons running after a second start"
}

case_restart_in_flight()
{
    local old new t0 t1 max samples status
    old=$(pidfile_pid)
    [ -n "$old" ] || fail "no daemon running"
    # The gateway answers this charge after 3 s: restart comes while the
    # old daemon waits for it.
    board_sim /_sim/faults '{"gateway":"stripe","mode":"delay","delay_ms":3000,"count":1}' >/dev/null
    start_charge restart-1 restart-key-1 inflight
    wait_at_gateway

    rm -f "$PT_TMP/samples" "$PT_TMP/sampler.stop"
    (
        while [ ! -e "$PT_TMP/sampler.stop" ]; do
            n=$(serve_pids | wc -l)
            echo "$n" >>"$PT_TMP/samples"
            sleep 0.01
        done
    ) &
    local sampler=$!
    t0=$(now_ms)
    init restart
    t1=$(now_ms)
    wait "$CHARGE_PID"
    touch "$PT_TMP/sampler.stop"
    wait "$sampler"
    samples=$(wc -l <"$PT_TMP/samples")
    max=$(sort -n "$PT_TMP/samples" | tail -n 1)
    pt_log "  restart took $((t1 - t0)) ms; $samples samples of the live daemons, at most $max"
    echo "$max" >"$PT_TMP/max_daemons"
    expect_eq 0 "$INIT_RC" "exit status of restart"
    [ "$samples" -ge 20 ] || fail "only $samples samples taken during the restart"
    [ "$max" -le 1 ] || fail "$max payterm serve processes of one data_dir were alive at once"

    new=$(pidfile_pid)
    remember "$new"
    [ -n "$new" ] && [ "$new" != "$old" ] || fail "no new daemon after restart (pid file: '$new')"
    [ ! -e "/proc/$old/cmdline" ] || [ -z "$(tr -d '\0' <"/proc/$old/cmdline")" ] ||
        fail "the old daemon $old is still alive"
    expect_eq "$new" "$(serve_pids)" "the daemon running after restart"
    # SPEC 3: the new daemon did not find the old one's lock.
    ! grep -q 'another payterm serve is running' "$LOG" ||
        fail "a daemon was refused by the data_dir lock: $(grep 'another payterm serve' "$LOG")"
    expect_eq 2 "$(grep -c 'serving on' "$LOG")" "daemons that started (serving on, in $LOG)"
    pt_get /healthz
    expect_status 200

    # The charge in flight: a complete answer, or else exactly one charge
    # when the client retries with the same key.
    status=$(cat "$PT_TMP/inflight.status")
    pt_log "  the charge in flight got HTTP $status: $(head -c 300 "$PT_TMP/inflight.body")"
    if [[ $status != 2* ]]; then
        pt_post /v1/charges restart-key-1 "$(cat "$PT_TMP/inflight.req")"
        [[ $PT_STATUS == 2* ]] || fail "the retry of the charge after restart got $PT_STATUS"
        cp "$PT_BODY_FILE" "$PT_TMP/inflight.body"
    fi
    PT_BODY_FILE=$PT_TMP/inflight.body
    expect_json '"\(.order_id) \(.amount) \(.currency)"' 'restart-1 100 USD'
    local deadline=$(($(date +%s) + 20))
    until pt_get /v1/charges/restart-1 && [ "$(jq -r .state <"$PT_BODY_FILE")" = SUCCESS ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "charge restart-1 did not succeed: $PT_BODY"
        sleep 0.1
    done
    expect_eq 1 "$(captures restart-1)" "captures of restart-1 at the gateway"
}

case_status()
{
    local pid
    pid=$(pidfile_pid)
    init status
    expect_eq 0 "$INIT_RC" "exit status of status while running"
    expect_contains "pid $pid" "$INIT_OUT" "output of status"
    expect_eq "$pid" "$(serve_pids)" "the daemon status names"
}

# A daemon the pid file does not name holds data_dir (its pid file lost):
# the daemon start starts exits at once on the lock, and start says so
# (once its daemon is gone, not after the wait for a listener), leaving the
# running daemon alone.
case_start_refused()
{
    local pid t0 t1
    pid=$(pidfile_pid)
    [ -n "$pid" ] || fail "no daemon running"
    mv "$PIDFILE" "$PT_TMP/pidfile.saved"
    t0=$(now_ms)
    init start
    t1=$(now_ms)
    mv "$PT_TMP/pidfile.saved" "$PIDFILE"
    pt_log "  start answered after $((t1 - t0)) ms"
    expect_eq 1 "$INIT_RC" "exit status of start while another daemon holds data_dir"
    expect_contains "exited at once" "$INIT_OUT" "output of start"
    grep -q 'another payterm serve is running' "$LOG" ||
        fail "the log does not say why the second daemon stopped"
    expect_eq "$pid" "$(serve_pids)" "the daemon running (untouched)"
    pt_get /healthz
    expect_status 200
}

case_reload()
{
    local pid before deadline
    pid=$(pidfile_pid)
    before=$(grep -c SIGHUP "$LOG")
    init reload
    expect_eq 0 "$INIT_RC" "exit status of reload"
    deadline=$(($(date +%s) + 10))
    until [ "$(grep -c SIGHUP "$LOG")" -gt "$before" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "the daemon logged no SIGHUP line after reload"
        sleep 0.02
    done
    sleep 0.2
    expect_eq "$pid" "$(serve_pids)" "the daemon after reload (same process)"
    pt_get /healthz
    expect_status 200
}

case_stop()
{
    local pid
    pid=$(pidfile_pid)
    [ -n "$pid" ] || fail "no daemon running"
    init stop
    expect_eq 0 "$INIT_RC" "exit status of stop"
    # At once, no waiting: stop returned only after the process was gone,
    # and the lock on data_dir with it.
    expect_eq "" "$(serve_pids)" "payterm serve processes right after stop returned"
    flock -n "$DATA/payterm.lock" true ||
        fail "data_dir's lock is still held right after stop returned"
    [ ! -e "$PIDFILE" ] || fail "the pid file is left after stop"
    init status
    expect_eq 3 "$INIT_RC" "exit status of status after stop"
    expect_contains "not running" "$INIT_OUT" "output of status after stop"
}

# A pid file left by a power cut names a PID the kernel has given to another
# process: status says not running, stop signals nothing, start starts.
case_stale_pidfile()
{
    local other pid
    sleep 60 &
    other=$!
    remember "$other"
    echo "$other" >"$PIDFILE"
    init status
    expect_eq 3 "$INIT_RC" "exit status of status with a stale pid file"
    init stop
    expect_eq 0 "$INIT_RC" "exit status of stop with a stale pid file"
    kill -0 "$other" 2>/dev/null || fail "stop signalled process $other, which is not payterm"
    echo "$other" >"$PIDFILE"
    init start
    expect_eq 0 "$INIT_RC" "exit status of start with a stale pid file"
    pid=$(pidfile_pid)
    remember "$pid"
    [ "$pid" != "$other" ] || fail "start took the stale pid file for a running daemon"
    expect_eq "$pid" "$(serve_pids)" "the daemon started"
    kill -0 "$other" 2>/dev/null || fail "start signalled process $other"
    kill "$other"
}

# A daemon that does not finish within STOP_TIMEOUT (a charge waiting 20 s
# at the gateway, STOP_TIMEOUT=1) is killed, and stop says so.
case_stop_timeout()
{
    local t0 t1
    sed 's/^STOP_TIMEOUT=.*/STOP_TIMEOUT=1/' "$DEFAULTS" >"$DEFAULTS.short"
    [ -n "$(serve_pids)" ] || fail "no daemon running"
    board_sim /_sim/faults '{"gateway":"stripe","mode":"delay","delay_ms":20000,"count":1}' >/dev/null
    start_charge timeout-1 timeout-key-1 slow
    wait_at_gateway
    t0=$(now_ms)
    init stop "$DEFAULTS.short"
    t1=$(now_ms)
    expect_eq 0 "$INIT_RC" "exit status of stop that had to kill"
    expect_contains SIGKILL "$INIT_OUT" "output of stop"
    expect_eq "" "$(serve_pids)" "payterm serve processes after stop"
    [ $((t1 - t0)) -lt 10000 ] || fail "stop took $((t1 - t0)) ms with STOP_TIMEOUT=1"
    wait "$CHARGE_PID"
    board_sim /_sim/faults '{"mode":"none"}' >/dev/null
}


# ---- supervised by BusyBox init ------------------------------------------------

# start_sampler / stop_sampler - count the live daemons every ~10 ms in the
# background; stop_sampler sets SAMPLES and MAX.
start_sampler()
{
    rm -f "$PT_TMP/samples" "$PT_TMP/sampler.stop"
    (
        while [ ! -e "$PT_TMP/sampler.stop" ]; do
            serve_pids | wc -l >>"$PT_TMP/samples"
            sleep 0.01
        done
    ) &
    SAMPLER=$!
}
stop_sampler()
{
    touch "$PT_TMP/sampler.stop"
    wait "$SAMPLER"
    SAMPLES=$(wc -l <"$PT_TMP/samples")
    MAX=$(sort -n "$PT_TMP/samples" | tail -n 1)
}

# wait_new_daemon OLD MS - until one daemon other than OLD answers /healthz;
# fails after MS milliseconds.  Sets NEW.
wait_new_daemon()
{
    local old=$1 deadline=$(($(now_ms) + $2)) pids
    while :; do
        pids=$(serve_pids)
        if [ -n "$pids" ] && [ "$pids" != "$old" ] && [ "$(echo "$pids" | wc -l)" = 1 ] &&
            curl -s -o /dev/null --max-time 1 "$URL/healthz"; then
            NEW=$pids
            return 0
        fi
        [ "$(now_ms)" -lt "$deadline" ] || fail "no new daemon within $2 ms (live: '$pids')"
        sleep 0.01
    done
}

# BusyBox init as PID 1 of new PID and mount namespaces; its /etc/inittab
# (an overlay on /etc, this namespace's only) has the lines a Buildroot
# board's has around the package's respawn line.
case_supervised_boot()
{
    local upper=$PT_TMP/ovl/upper work=$PT_TMP/ovl/work deadline
    command -v unshare >/dev/null && command -v nsenter >/dev/null ||
        pt_skip "needs unshare and nsenter (util-linux)"
    INITTAB=$PT_TMP/inittab
    {
        echo "::sysinit:$BB/sh $PT_INIT_SCRIPT start"
        echo "::respawn:$BB/sh $PT_INIT_SCRIPT run"
        echo "::shutdown:$BB/sh $PT_INIT_SCRIPT stop"
    } >"$INITTAB"
    # BusyBox init gives its children PATH=/sbin:/usr/sbin:/bin:/usr/bin:
    # the defaults file puts BusyBox's applets back in front of all else.
    { cat "$DEFAULTS"; echo "INITTAB=$INITTAB"; echo "PATH=$BB"; } >"$DEFAULTS.sup"
    mkdir -p "$upper" "$work"
    cp "$INITTAB" "$upper/inittab"
    unshare --pid --fork --mount --mount-proc "$BB/sh" -c '
        mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc || exit 99
        shift 2
        exec env -i "$@"' sh "$upper" "$work" PATH="$BB" PAYTERM_DEFAULTS="$DEFAULTS.sup" \
        PAYTERM_THREAD_STACK_KIB="$PAYTERM_THREAD_STACK_KIB" \
        ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
        ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
        "$BB/init" </dev/null >"$PT_TMP/init.out" 2>&1 &
    local unshare_pid=$!
    remember "$unshare_pid"
    echo "$unshare_pid" >"$PT_TMP/unshare.pid"
    deadline=$(($(date +%s) + 10))
    until NSINIT=$(pgrep -P "$unshare_pid" | head -n 1) && [ -n "$NSINIT" ]; do
        kill -0 "$unshare_pid" 2>/dev/null ||
            pt_skip "no PID and mount namespace with BusyBox init here: $(cat "$PT_TMP/init.out")"
        [ "$(date +%s)" -lt "$deadline" ] || fail "BusyBox init did not start"
        sleep 0.05
    done
    remember "$NSINIT"
    echo "$NSINIT" >"$PT_TMP/nsinit.pid"
    wait_new_daemon none 20000
    pt_log "  BusyBox init (pid $NSINIT here) started the daemon $NEW: $(tr '\r' ' ' <"$PT_TMP/init.out")"
    expect_contains "BusyBox init starts it" "$(cat "$PT_TMP/init.out")" \
        "rcS's start under a respawn line"
    NS_ENTER=(nsenter -t "$NSINIT" -p -m --)
    init status "$DEFAULTS.sup"
    expect_eq 0 "$INIT_RC" "exit status of status under BusyBox init"
    expect_contains "supervised by BusyBox init" "$INIT_OUT" "output of status"
    uid=$(awk '/^Uid:/ { print $2 }' "/proc/$NEW/status")
    expect_eq "$(id -u "$PT_INIT_USER")" "$uid" "Uid of the supervised daemon"
}

ns_ready()
{
    [ -s "$PT_TMP/nsinit.pid" ] || pt_skip "BusyBox init is not running (see the first case)"
    NSINIT=$(cat "$PT_TMP/nsinit.pid")
    NS_ENTER=(nsenter -t "$NSINIT" -p -m --)
}

# kill -9, twice: init starts one new daemon within 5 s, never two.
case_supervised_kill9()
{
    local round old t0 t1
    ns_ready
    for round in 1 2; do
        old=$(serve_pids)
        [ -n "$old" ] && [ "$(echo "$old" | wc -l)" = 1 ] || fail "not one daemon before kill -9: '$old'"
        start_sampler
        t0=$(now_ms)
        kill -KILL "$old"
        wait_new_daemon "$old" 5000
        t1=$(now_ms)
        sleep 0.3 # a second daemon would show up now, if ever
        stop_sampler
        remember "$NEW"
        pt_log "  round $round: kill -9 $old -> daemon $NEW serving after $((t1 - t0)) ms;" \
            "$SAMPLES samples, at most $MAX alive"
        [ "$SAMPLES" -ge 5 ] || fail "only $SAMPLES samples taken"
        [ "$MAX" -le 1 ] || fail "$MAX daemons alive at once after kill -9"
        expect_eq "$NEW" "$(serve_pids)" "the daemons after the respawn"
        echo "$((t1 - t0))" >>"$PT_TMP/respawn_ms"
    done
    pt_get /healthz
    expect_status 200
}

# stop keeps it down (init respawns only the waiting "run"); start brings it
# back; restart never has two.
case_supervised_stop_start()
{
    local old deadline
    ns_ready
    init stop "$DEFAULTS.sup"
    expect_eq 0 "$INIT_RC" "exit status of stop under BusyBox init"
    expect_eq "" "$(serve_pids)" "daemons right after stop returned"
    # Held down: no daemon for 3 s (init respawned the runner, which waits).
    deadline=$(($(now_ms) + 3000))
    while [ "$(now_ms)" -lt "$deadline" ]; do
        expect_eq "" "$(serve_pids)" "daemons after stop (init must not bring one back)"
        sleep 0.05
    done
    init status "$DEFAULTS.sup"
    expect_eq 3 "$INIT_RC" "exit status of status after stop"
    expect_contains "stopped" "$INIT_OUT" "output of status after stop"
    init start "$DEFAULTS.sup"
    expect_eq 0 "$INIT_RC" "exit status of start under BusyBox init"
    expect_contains "supervised by BusyBox init" "$INIT_OUT" "output of start"
    old=$(serve_pids)
    [ -n "$old" ] || fail "no daemon after start returned"
    remember "$old"
    pt_get /healthz
    expect_status 200

    start_sampler
    init restart "$DEFAULTS.sup"
    stop_sampler
    expect_eq 0 "$INIT_RC" "exit status of restart under BusyBox init"
    pt_log "  restart: $SAMPLES samples, at most $MAX alive"
    [ "$MAX" -le 1 ] || fail "$MAX daemons alive at once during restart"
    wait_new_daemon "$old" 5000
    remember "$NEW"
}

# BusyBox init's shutdown (SIGTERM to init, as `reboot` sends): the
# ::shutdown: line stops the daemon gracefully, then init ends.
case_supervised_shutdown()
{
    local unshare_pid deadline
    ns_ready
    unshare_pid=$(cat "$PT_TMP/unshare.pid")
    [ -n "$(serve_pids)" ] || fail "no daemon before the shutdown"
    kill -TERM "$NSINIT"
    deadline=$(($(date +%s) + 60))
    while kill -0 "$unshare_pid" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "BusyBox init did not end within 60 s of SIGTERM"
        sleep 0.05
    done
    rm -f "$PT_TMP/nsinit.pid"
    expect_eq "" "$(serve_pids)" "daemons after init's shutdown"
    expect_eq stopped "$(grep -o 'stopped$' "$LOG" | tail -n 1)" \
        "the last daemon's last line (graceful stop by rcK's S80payterm stop)"
}

pt_init
if [ "$(id -u)" != 0 ]; then
    # CI runs as root; start-stop-daemon -c needs it.
    echo "ok 1 - BusyBox init script # SKIP needs root (start-stop-daemon -c changes the user)"
    exit 0
fi
setup

pt_case "busybox sh with BusyBox's own start-stop-daemon" case_busybox
pt_case "start with the packaged config (no gateway): stays stopped, exit 0" \
    case_start_unconfigured
pt_case "start: init, then serve as $PT_INIT_USER, log file 0640 $PT_INIT_USER" case_start
pt_case "restart during an in-flight charge: never two daemons, no lock refusal, one charge" \
    case_restart_in_flight
pt_case "status: running, with the new PID" case_status
pt_case "start while another daemon holds data_dir: FAIL, exited at once; that one untouched" \
    case_start_refused
pt_case "reload: SIGHUP logged, the daemon stays up" case_reload
pt_case "stop: returns after the process is gone and the lock released; status exits 3" case_stop
pt_case "a stale pid file naming another process is never signalled" case_stale_pidfile
pt_case "stop: SIGKILL after STOP_TIMEOUT, and says so" case_stop_timeout
pt_case "BusyBox init (PID 1, respawn line): rcS's start, then init starts the daemon" \
    case_supervised_boot
pt_case "kill -9 under BusyBox init: one new daemon within 5 s, never two (twice)" \
    case_supervised_kill9
pt_case "under BusyBox init: stop keeps it down, start brings it back, restart never two" \
    case_supervised_stop_start
pt_case "BusyBox init's shutdown stops the daemon gracefully (rcK)" case_supervised_shutdown
[ -f "$PT_TMP/respawn_ms" ] &&
    echo "# kill -9 -> new daemon serving after $(tr '\n' ' ' <"$PT_TMP/respawn_ms")ms"
[ -f "$PT_TMP/max_daemons" ] &&
    echo "# at most $(cat "$PT_TMP/max_daemons") payterm serve process(es) alive during restart"

# Nothing left running, so the EXIT trap has no PID to kill that a daemon
# gone long ago left behind (and that the kernel may have reused).
[ ! -s "$PT_TMP/nsinit.pid" ] || kill -KILL "$(cat "$PT_TMP/nsinit.pid")" 2>/dev/null
NS_ENTER=()
sleep 0.2
[ -z "$(serve_pids)" ] || init stop
for pid in $(serve_pids); do kill -KILL "$pid"; done
board_sim_stop
: >"$PT_TMP/pids"
# pt_done looks for sanitizer reports in daemon.*.log.
cp "$LOG" "$PT_TMP/daemon.init.log" 2>/dev/null
pt_done
