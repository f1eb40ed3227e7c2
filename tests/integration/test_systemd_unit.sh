#!/usr/bin/env bash
# test_systemd_unit.sh - firmware/board/payterm.service (SPEC 14).
#
# * systemd-analyze verify on a copy of the unit whose /usr/bin/payterm is
#   $PAYTERM (verify checks that the programs exist): no word about the unit;
# * systemd-analyze security --offline=true: exposure <= 2.5 ("OK");
# * the lines the product needs (Type=notify, the watchdog, the user, SIGHUP
#   for reload, ExecCondition=, the sandbox SPEC 14 names);
# * ExecCondition='s exit codes with the packaged default configuration;
# * what the sandbox allows, against what payterm does: ExecCondition=,
#   ExecStartPre= and ExecStart= run under strace, as an unprivileged user
#   (as under User=payterm), through online and offline charges, a sync
#   drain, SIGHUP and SIGTERM; every system call must be in the unit's
#   SystemCallFilter= (expanded by systemd-analyze syscall-filter), every
#   socket in RestrictAddressFamilies=, no writable executable memory
#   (MemoryDenyWriteExecute=), nothing under /proc but its own entries and
#   this boot's id (SPEC 17), no device but the ones PrivateDevices= leaves, no
#   file written outside data_dir and /tmp (ProtectSystem=strict).
#
# This machine may not run systemd as PID 1: then the daemon is not started
# under the unit itself, and the output says so.  PT_UNIT overrides the unit
# under test.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/board.sh"

PT_UNIT=${PT_UNIT:-$(cd "$(dirname "$0")/../../firmware/board" && pwd)/payterm.service}
PT_AUDIT_USER=${PT_AUDIT_USER:-nobody}
[ "$(id -u)" = 0 ] || PT_AUDIT_USER=$(id -un)
PT_DEFAULT_CONFIG=$(cd "$(dirname "$0")/../../firmware/board" && pwd)/payterm.json

# The unit as verify must see it: the programs where this build has them.
unit_copy()
{
    mkdir -p "$PT_TMP/unit"
    sed "s#/usr/bin/payterm#$(readlink -f "$PAYTERM")#g" "$PT_UNIT" >"$PT_TMP/unit/payterm.service"
}

# unit_values KEY - the values KEY= is given in [Service], one a line, in
# order ("" for an empty assignment).
unit_values()
{
    awk -v key="$1" '
        /^\[/ { service = ($0 == "[Service]"); next }
        service && index($0, key "=") == 1 { print substr($0, length(key) + 2) }' "$PT_UNIT"
}

expect_unit()
{
    expect_eq "$2" "$(unit_values "$1" | tail -n 1)" "$1= in $PT_UNIT"
}

case_verify()
{
    local out rc
    unit_copy
    # --man=no: the man pages come with the package, not with this machine.
    out=$(cd "$PT_TMP/unit" && systemd-analyze verify --man=no ./payterm.service 2>&1)
    rc=$?
    [ -z "$out" ] && pt_log "  systemd-analyze verify: no output, exit $rc" ||
        pt_log "  systemd-analyze verify (exit $rc):"$'\n'"$out"
    expect_eq 0 "$rc" "exit status of systemd-analyze verify"
    # Other units of this machine may have their own complaints; none about ours.
    ! grep -i payterm <<<"$out" >/dev/null || fail "systemd-analyze verify: $out"
}

case_security()
{
    local out rc score
    unit_copy
    out=$(cd "$PT_TMP/unit" &&
        systemd-analyze security --offline=true --threshold=25 --no-pager ./payterm.service 2>&1)
    rc=$?
    score=$(sed -n 's/.*Overall exposure level for payterm.service: \([0-9.]*\).*/\1/p' <<<"$out")
    [ -n "$score" ] || fail "no exposure level in: $out"
    echo "# systemd-analyze security --offline=true: exposure $score (at most 2.5)"
    grep '✗' <<<"$out" | sed 's/^/  /' >&2
    awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' ||
        fail "exposure $score is over 2.5:"$'\n'"$out"
    expect_eq 0 "$rc" "exit status of systemd-analyze security --threshold=25"
}

case_contract()
{
    expect_unit Type notify
    expect_match '^[1-9][0-9]*(s|min)?$' "$(unit_values WatchdogSec | tail -n 1)" WatchdogSec=
    expect_unit User payterm
    expect_unit Group payterm
    expect_unit ExecCondition "/usr/bin/payterm init --check-gateways -c /etc/payterm/payterm.json"
    expect_unit ExecStartPre "/usr/bin/payterm init -c /etc/payterm/payterm.json"
    expect_unit ExecStart "/usr/bin/payterm serve -c /etc/payterm/payterm.json"
    expect_unit ExecReload '/bin/kill -HUP $MAINPID'
    expect_unit UMask 0077
    expect_unit StateDirectory payterm
    expect_unit StateDirectoryMode 0700
    expect_unit CapabilityBoundingSet ""
    expect_unit AmbientCapabilities ""
    expect_unit RestrictAddressFamilies "AF_UNIX AF_INET AF_INET6"
    expect_eq "@system-service" "$(unit_values SystemCallFilter | head -n 1)" "first SystemCallFilter="
    expect_unit SystemCallArchitectures native
    expect_unit MemoryDenyWriteExecute yes
    expect_unit PrivateDevices yes
    expect_unit ProtectProc invisible
    # SPEC 17 reads the boot's id and asks adjtimex: ProcSubset=pid and
    # ProtectClock= would refuse both (the unit says why).
    expect_eq "" "$(unit_values ProcSubset)" "ProcSubset= in $PT_UNIT"
    expect_eq "" "$(unit_values ProtectClock)" "ProtectClock= in $PT_UNIT"
    expect_unit NoNewPrivileges yes
    # The gateways are on the internet.
    expect_eq "" "$(unit_values IPAddressDeny)" "IPAddressDeny= in $PT_UNIT"
}

# ExecCondition=: 0 configured, 1 none (skipped quietly), 255 invalid (fails).
case_exec_condition()
{
    local rc
    "$PAYTERM" init --check-gateways -c "$PT_DEFAULT_CONFIG" >/dev/null 2>&1
    expect_eq 1 "$?" "init --check-gateways on the packaged $PT_DEFAULT_CONFIG (no gateway)"
    printf '{"gateways": ' >"$PT_TMP/broken.json"
    "$PAYTERM" init --check-gateways -c "$PT_TMP/broken.json" >/dev/null 2>&1
    expect_eq 255 "$?" "init --check-gateways on a broken file"
    "$PAYTERM" init --check-gateways -c "$CONFIG" >/dev/null 2>&1
    rc=$?
    expect_eq 0 "$rc" "init --check-gateways with Stripe configured"
}

# ---- the sandbox against what payterm does ----

# allowed_syscalls - the unit's SystemCallFilter= as a list of names, as
# systemd reads the lines: the first (an allow list) sets the start, then in
# order each ~deny list takes names out and each allow list puts them back;
# groups expanded recursively.
allowed_syscalls()
{
    local -A groups
    local cur="" line entry
    while IFS= read -r line; do
        if [[ $line =~ ^@([a-z-]+)$ ]]; then
            cur=${BASH_REMATCH[1]}
            groups[$cur]=""
        elif [[ $line =~ ^[[:space:]]+([@a-z0-9_-]+)$ ]] && [ -n "$cur" ]; then
            groups[$cur]+=" ${BASH_REMATCH[1]}"
        fi
    done < <(systemd-analyze syscall-filter --no-pager 2>/dev/null)
    expand()
    {
        local e
        for e in $1; do
            if [[ $e == @* ]]; then expand "${groups[${e#@}]}"; else echo "$e"; fi
        done
    }
    local -A set
    local value name
    while IFS= read -r value; do
        if [[ $value == "~"* ]]; then
            for name in $(expand "${value#\~}"); do unset "set[$name]"; done
        else
            for name in $(expand "$value"); do set[$name]=1; done
        fi
    done < <(unit_values SystemCallFilter)
    printf '%s\n' "${!set[@]}" | sort -u
}

# traced NAME CMD... - CMD as $PT_AUDIT_USER under strace -f, into $PT_TMP/NAME.trace.
traced()
{
    local name=$1
    shift
    if [ "$(id -u)" = 0 ]; then
        # Not as root: SQLite fchown()s its journal files to the database's
        # owner when root runs it, which never happens under User=payterm.
        strace -f -qq -u "$PT_AUDIT_USER" -o "$PT_TMP/$name.trace" "$@"
    else
        strace -f -qq -o "$PT_TMP/$name.trace" "$@"
    fi
}

case_sandbox()
{
    if ! command -v strace >/dev/null; then
        pt_skip "no strace here (scripts/deps.sh bench installs it)"
    fi
    # (grep without -q reads all of ldd's output: with pipefail, grep -q
    # leaving early could fail the pipeline with ldd's SIGPIPE, and the
    # sanitizer build would not be recognised.)
    if ldd "$PAYTERM" 2>/dev/null | grep -E 'lib(a|ub|t)san' >/dev/null; then
        pt_skip "a sanitizer build makes system calls of its own"
    fi
    local out t
    traced condition "$BIN" init --check-gateways -c "$CONFIG" >/dev/null 2>&1 ||
        fail "init --check-gateways failed under strace"
    traced startpre "$BIN" init -c "$CONFIG" >"$PT_TMP/startpre.out" 2>&1 ||
        fail "payterm init failed: $(cat "$PT_TMP/startpre.out")"
    # As under systemd: a notification socket (nothing listens on this one:
    # the datagrams are still sent) and a watchdog to feed.
    PT_LOG=$PT_TMP/daemon.audit.log
    NOTIFY_SOCKET=$PT_TMP/notify.sock WATCHDOG_USEC=2000000 \
        traced serve "$BIN" serve -c "$CONFIG" >"$PT_LOG" 2>&1 &
    local strace_pid=$!
    echo "$strace_pid" >>"$PT_TMP/pids"
    local deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    until curl -s -o /dev/null --max-time 2 "$PT_URL/healthz"; do
        kill -0 "$strace_pid" 2>/dev/null || fail "payterm serve exited under strace"
        [ "$(date +%s)" -lt "$deadline" ] || fail "payterm serve did not start under strace"
        sleep 0.05
    done
    # An online charge (TLS to the gateway), then the gateway down: a charge
    # queued offline, then the gateway back: the sync engine drains it.
    pt_post /v1/charges audit-key-1 "$(charge_body audit-1)"
    [[ $PT_STATUS == 2* ]] || fail "online charge: $PT_STATUS $PT_BODY"
    board_sim /_sim/faults '{"gateway":"*","mode":"refuse_connect","count":-1}' >/dev/null
    pt_post /v1/charges audit-key-2 "$(charge_body audit-2)"
    [[ $PT_STATUS == 2* ]] || fail "offline charge: $PT_STATUS $PT_BODY"
    board_sim /_sim/faults '{"mode":"none"}' >/dev/null
    deadline=$(($(date +%s) + 30))
    until pt_get /v1/charges/audit-2 && [ "$(jq -r .state <"$PT_BODY_FILE")" = SUCCESS ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "the queued charge was not drained: $PT_BODY"
        sleep 0.2
    done
    pt_get /v1/charges
    pt_get /metrics
    # Two watchdog intervals, then a reload and a stop.
    sleep 2
    # The daemon's PID: in its lock file (SPEC 3); strace's own output may
    # still sit in its buffer.
    local pid
    pid=$(head -n 1 "$DATA/payterm.lock")
    [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" != "$strace_pid" ] || fail "no PID in $DATA/payterm.lock: '$pid'"
    kill -HUP "$pid" || fail "cannot signal payterm serve ($pid)"
    sleep 0.5
    kill -TERM "$pid"
    deadline=$(($(date +%s) + PT_STOP_TIMEOUT_S))
    while kill -0 "$strace_pid" 2>/dev/null; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            kill -KILL "$pid"
            fail "payterm serve (under strace) did not stop within ${PT_STOP_TIMEOUT_S}s of SIGTERM"
        fi
        sleep 0.05
    done
    wait "$strace_pid"
    expect_eq 0 "$?" "exit status of payterm serve (under strace) after SIGTERM"

    # From here on fail() has no response to show.
    PT_STATUS=""
    local allowed names bad
    [ -n "$(unit_values SystemCallFilter)" ] || fail "the unit has no SystemCallFilter="
    allowed=$(allowed_syscalls)
    [ "$(wc -l <<<"$allowed")" -gt 100 ] || fail "cannot expand SystemCallFilter=: $allowed"
    for t in condition startpre serve; do
        names=$(sed -nE 's/^[0-9]+ +(<\.\.\. )?([a-z0-9_]+)[( ].*/\2/p' "$PT_TMP/$t.trace" |
            sort -u)
        bad=$(comm -23 <(echo "$names") <(echo "$allowed") | tr '\n' ' ')
        pt_log "  $t: $(wc -l <<<"$names") distinct system calls"
        [ -z "$bad" ] || fail "$t makes system calls SystemCallFilter= denies: $bad" \
            $'\n'"  $(grep -m 5 -E "^[0-9]+ +($(echo $bad | tr ' ' '|'))\(" "$PT_TMP/$t.trace")"
    done
    local all=$PT_TMP/condition.trace\ $PT_TMP/startpre.trace\ $PT_TMP/serve.trace
    # shellcheck disable=SC2086
    bad=$(grep -hoE 'socket\(AF_[A-Z0-9]+' $all | grep -vE 'AF_(UNIX|INET|INET6)$' | sort -u)
    [ -z "$bad" ] || fail "sockets outside RestrictAddressFamilies=: $bad"
    # shellcheck disable=SC2086
    bad=$(grep -hE 'mmap\(.*PROT_WRITE\|PROT_EXEC|mmap\(.*PROT_EXEC\|PROT_WRITE|mprotect\(.*PROT_EXEC|personality\(' \
        $all | grep -v '^[0-9]* execve' | head -n 5)
    [ -z "$bad" ] || fail "denied by MemoryDenyWriteExecute= or LockPersonality=: $bad"
    # The paths opened, created or removed (strace quotes them).
    # shellcheck disable=SC2086
    grep -hE '^[0-9]+ +(open|openat|creat|mkdir|mkdirat|unlink|unlinkat|rename|renameat2?|truncate|statx|newfstatat|access|faccessat2?)\(' \
        $all | grep -v '= -1 ENOENT' >"$PT_TMP/paths.trace"
    bad=$(grep -oE '"/proc/[^"]*"' "$PT_TMP/paths.trace" |
        grep -vE '^"/proc/(self|thread-self|[0-9]+)(/|")' |
        grep -vx '"/proc/sys/kernel/random/boot_id"' | sort -u | head -n 5)
    [ -z "$bad" ] || fail "payterm opened what ProtectProc=invisible is to keep from it: $bad"
    bad=$(grep -oE '"/dev/[^"]*"' "$PT_TMP/paths.trace" |
        grep -vE '^"/dev/(null|zero|full|random|urandom|tty|pts/ptmx|ptmx|shm/[^"]*)"$' |
        sort -u | head -n 5)
    [ -z "$bad" ] || fail "PrivateDevices= leaves no such device: $bad"
    # data_dir, PrivateTmp='s /tmp and /var/tmp (but nothing else of this
    # test's own temp dir), /dev/null.
    bad=$(grep -E 'O_WRONLY|O_RDWR|O_CREAT|^[0-9]+ +(mkdir|unlink|rename|truncate)' \
        "$PT_TMP/paths.trace" | grep -oE '"/[^"]*"' | tr -d '"' | sort -u |
        awk -v data="$DATA" -v own="$PT_TMP" '
            function under(p, d) { return p == d || index(p, d "/") == 1 }
            under($0, data) || $0 == "/dev/null" { next }
            (under($0, "/tmp") || under($0, "/var/tmp")) && !under($0, own) { next }
            { print }' | head -n 5)
    [ -z "$bad" ] || fail "writes outside data_dir and /tmp (ProtectSystem=strict): $bad"
}

pt_init
[ -f "$PT_UNIT" ] || {
    pt_log "$PT_SCRIPT: no unit at $PT_UNIT"
    exit 2
}
command -v systemd-analyze >/dev/null || {
    pt_log "$PT_SCRIPT: systemd-analyze is needed (apt-get install systemd)"
    exit 2
}
PT_PORT=$(pt_pick_port)
PT_URL=http://127.0.0.1:$PT_PORT
board_sim_start "$PT_URL"
board_config "$PT_AUDIT_USER" "127.0.0.1:$PT_PORT"
board_binary "$PT_AUDIT_USER"

pt_case "systemd-analyze verify: nothing to say about the unit" case_verify
pt_case "systemd-analyze security --offline: exposure at most 2.5" case_security
pt_case "the unit: notify, watchdog, user payterm, reload by SIGHUP, the sandbox of SPEC 14" \
    case_contract
pt_case "ExecCondition=: 1 with the packaged config (no gateway), 255 broken, 0 configured" \
    case_exec_condition
pt_case "the sandbox allows every system call, socket, path payterm uses (strace)" case_sandbox
if [ -d /run/systemd/system ]; then
    echo "# not started under the unit: this test starts no unit on a shared machine; checked with verify, security and the system call audit"
else
    echo "# not started under the unit: systemd is not PID 1 here ($(cat /proc/1/comm 2>/dev/null)); checked with verify, security and the system call audit"
fi

board_sim_stop
: >"$PT_TMP/pids"
pt_done
