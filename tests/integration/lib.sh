# lib.sh - shared helpers for payterm's HTTP integration tests.
#
# Each test script sources this file, defines its cases as shell functions and
# runs them with pt_case.  The scripts talk to a real `payterm serve` over
# HTTP with curl and check the answers with jq; ctest runs them (see
# CMakeLists.txt beside this file) with PAYTERM set to the binary.
#
#   pt_init                      temp dir, config base, cleanup trap
#   pt_config [JQ_FILTER]        (re)write the base config, filter applied
#   pt_start / pt_stop / pt_kill9 / pt_wait_exit / pt_wait_requests_read
#   pt_post PATH KEY BODY        POST with Idempotency-Key (KEY "-": none)
#   pt_get PATH                  GET
#   pt_skip REASON / pt_mount_tmpfs DIR SIZE
#   expect_* / fail              assertions that print expected vs actual
#
# After each request: $PT_STATUS, $PT_BODY, and the files $PT_BODY_FILE and
# $PT_HDR_FILE (the exact bytes and the response headers).
#
# The gateways are configured (with the throw-away keys of tests/vectors)
# but point at a port where nothing listens.  A gateway the daemon has not
# tried yet counts as reachable, so the first charge for it would take the
# online path; pt_start therefore makes the daemon find every gateway
# unreachable first (pt_gateways_down), which is the state the offline rows
# of the outcome table are about.  The warm-up charges (warmup-*) are
# require_online and leave nothing behind; should one ever be stored, the
# tests look past it (NOWARM, pt_feed_next).
#
# Every daemon started is recorded in $PT_TMP/pids and killed by the EXIT
# trap, so a failing test never leaves one behind.  Cases run in subshells:
# a failing assertion ends its case, the script goes on with the next one
# and exits 1 at the end.

set -u -o pipefail

PAYTERM=${PAYTERM:-${1:-}}
PT_SCRIPT=$(basename "$0" .sh)
PT_KEYS=${PT_KEYS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../vectors/keys" && pwd)}
PT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3, with Debian's python3-jsonschema and python3-websocket (deps.sh).
PT_PYTHON=${PT_PYTHON:-/usr/bin/python3}

# How long a daemon may take to come up or go down: generous, because ctest
# runs two tests at once on a loaded 2-core board and the ASan build is slow.
PT_START_TIMEOUT_S=${PT_START_TIMEOUT_S:-30}
PT_STOP_TIMEOUT_S=${PT_STOP_TIMEOUT_S:-30}
# Per-request ceiling for curl, so a hung daemon fails the case, not ctest.
PT_CURL_MAX_S=${PT_CURL_MAX_S:-30}
# Every daemon thread gets musl's default stack (SPEC 11), also on glibc,
# whose 8 MiB would hide an overflow; ctest passes a larger one under ASan.
export PAYTERM_THREAD_STACK_KIB=${PAYTERM_THREAD_STACK_KIB:-128}

# ---- reporting ------------------------------------------------------------

pt_log() { printf '%s\n' "$*" >&2; }

# Ends the current case with a message; shows the last response and the
# daemon's log tail to make the failure readable without a rerun.
fail()
{
    pt_log "FAIL: $*"
    if [ -n "${PT_STATUS:-}" ]; then
        pt_log "  last response: HTTP $PT_STATUS ${PT_LAST_REQ:-}"
        [ -f "${PT_BODY_FILE:-}" ] && pt_log "  body: $(head -c 2000 "$PT_BODY_FILE")"
    fi
    if [ -n "${PT_LOG:-}" ] && [ -s "$PT_LOG.exit" ]; then
        pt_log "  the daemon is not running: it exited with status $(cat "$PT_LOG.exit")"
    fi
    if [ -n "${PT_LOG:-}" ] && [ -f "$PT_LOG" ]; then
        pt_log "  daemon log (last 15 lines of $PT_LOG):"
        tail -n 15 "$PT_LOG" | sed 's/^/    /' >&2
    fi
    exit 1
}

expect_eq()
{
    local expected=$1 actual=$2 what=${3:-value}
    [ "$expected" == "$actual" ] ||
        fail "$what"$'\n'"  expected: $expected"$'\n'"  actual:   $actual"
}

# expect_match REGEX ACTUAL [WHAT] - extended regex, whole string not implied.
expect_match()
{
    local re=$1 actual=$2 what=${3:-value}
    [[ $actual =~ $re ]] ||
        fail "$what"$'\n'"  expected to match: $re"$'\n'"  actual: $actual"
}

expect_contains()
{
    local needle=$1 haystack=$2 what=${3:-text}
    [[ $haystack == *"$needle"* ]] ||
        fail "$what"$'\n'"  expected to contain: $needle"$'\n'"  actual: $haystack"
}

expect_status()
{
    expect_eq "$1" "$PT_STATUS" "HTTP status of ${PT_LAST_REQ:-the last request}"
}

# expect_json FILTER EXPECTED - jq -r FILTER on the last body.
expect_json()
{
    local filter=$1 expected=$2 actual
    actual=$(jq -r "$filter" <"$PT_BODY_FILE" 2>&1) || fail "body is not JSON ($filter): $actual"
    expect_eq "$expected" "$actual" "$filter in the body of ${PT_LAST_REQ:-the last request}"
}

# expect_error STATUS CODE - an error body {"error":{"code","message"}}.
expect_error()
{
    expect_status "$1"
    # One jq for the whole shape: {"error":{"code":CODE,"message":"..."}}.
    expect_json '"\(keys) \(.error | keys) \(.error.code) \(.error.message | type)"' \
        "[\"error\"] [\"code\",\"message\"] $2 string"
    expect_header Content-Type application/json
}

# pt_message - the error message of the last response.
pt_message() { jq -r .error.message <"$PT_BODY_FILE"; }

# pt_header NAME - the value of a header of the last response ("" if none).
pt_header()
{
    # curl -D writes every response block (100 Continue too): use the last.
    awk -v want="$(printf '%s' "$1" | tr 'A-Z' 'a-z')" '
        /^HTTP\// { delete h; next }
        { line = $0; sub(/\r$/, "", line)
          i = index(line, ":"); if (i == 0) next
          name = tolower(substr(line, 1, i - 1)); v = substr(line, i + 1)
          sub(/^[ \t]+/, "", v); h[name] = v }
        END { if (want in h) print h[want] }' "$PT_HDR_FILE"
}

expect_header()
{
    expect_eq "$2" "$(pt_header "$1")" "header $1 of ${PT_LAST_REQ:-the last request}"
}

expect_no_header()
{
    local v
    v=$(pt_header "$1")
    [ -z "$v" ] || fail "header $1 of ${PT_LAST_REQ:-the last request}: expected none, got '$v'"
}

# expect_same_bytes FILE_A FILE_B [WHAT] - byte-identical files.
expect_same_bytes()
{
    cmp -s "$1" "$2" ||
        fail "${3:-bodies differ}"$'\n'"  expected: $(head -c 1000 "$1")"$'\n'"  actual:   $(head -c 1000 "$2")"
}

# ---- cases -------------------------------------------------------------------

PT_CASES=0
PT_FAILED=0
PT_FAILED_NAMES=()

# pt_case NAME FUNCTION - runs one case in a subshell and records the result.
pt_case()
{
    local name=$1 fn=$2 t0 t1 rc
    PT_CASES=$((PT_CASES + 1))
    t0=$(date +%s%N)
    rm -f "$PT_TMP/skip"
    (
        PT_STATUS=""
        "$fn"
    )
    rc=$?
    t1=$(date +%s%N)
    local ms=$(((t1 - t0) / 1000000))
    if [ $rc -eq 0 ] && [ -f "$PT_TMP/skip" ]; then
        printf 'ok %d - %s # SKIP %s\n' "$PT_CASES" "$name" "$(cat "$PT_TMP/skip")"
    elif [ $rc -eq 0 ]; then
        printf 'ok %d - %s (%d ms)\n' "$PT_CASES" "$name" "$ms"
    else
        printf 'not ok %d - %s (%d ms)\n' "$PT_CASES" "$name" "$ms"
        PT_FAILED=$((PT_FAILED + 1))
        PT_FAILED_NAMES+=("$name")
    fi
}

# pt_skip REASON - ends the current case as skipped (what it needs is not
# here: root, a kernel feature); it counts as passed.
pt_skip()
{
    printf '%s' "$*" >"$PT_TMP/skip"
    exit 0
}

# pt_mount_tmpfs DIR SIZE - a tmpfs of SIZE (e.g. 4m) on DIR, unmounted by
# the cleanup; a case that cannot have one (not root, no permission to
# mount) is skipped.
pt_mount_tmpfs()
{
    local dir=$1 size=$2
    [ "$(id -u)" = 0 ] || pt_skip "needs root to mount a $size tmpfs"
    command -v mount >/dev/null || pt_skip "no mount command"
    mkdir -p "$dir" || fail "cannot create $dir"
    mount -t tmpfs -o "size=$size,mode=0700" payterm-test "$dir" 2>"$PT_TMP/mount.err" ||
        pt_skip "cannot mount a tmpfs here: $(cat "$PT_TMP/mount.err")"
    echo "$dir" >>"$PT_TMP/mounts"
}

# pt_done - summary line and the script's exit status.
pt_done()
{
    local secs=$(( ($(date +%s%N) - PT_T0) / 1000000 )) bad
    # Sanitizer builds (make asan): a report in any daemon's log fails the
    # script even if every answer looked right.
    bad=$(grep -lE 'runtime error:|ERROR: (Address|Leak|Thread)Sanitizer' "$PT_TMP"/daemon.*.log \
        2>/dev/null | head -n 1)
    # A daemon that died of a signal no case sent it (SIGSEGV: a thread's
    # stack overflowed; SIGABRT, SIGBUS, SIGILL, SIGFPE) fails the script.
    local crashed
    crashed=$(grep -lxE '13[2456]|139' "$PT_TMP"/daemon.*.log.exit 2>/dev/null | head -n 1)
    if [ -n "$crashed" ]; then
        pt_log "payterm serve died of signal $(($(cat "$crashed") - 128)): ${crashed%.exit}"
        PT_FAILED=$((PT_FAILED + 1))
        PT_FAILED_NAMES+=("(daemon crashed)")
    fi
    if [ -n "$bad" ]; then
        pt_log "sanitizer report in $bad:"
        grep -E -A 12 'runtime error:|ERROR: (Address|Leak|Thread)Sanitizer' "$bad" | head -n 30 >&2
        PT_FAILED=$((PT_FAILED + 1))
        PT_FAILED_NAMES+=("(sanitizer report)")
    fi
    # Every answer the daemons of the cases gave, whoever asked
    # (PAYTERM_TEST_ANSWER_LOG), held to the OpenAPI description (SPEC 15).
    if [ "${PT_ANSWER_LOG:-1}" = 0 ]; then
        # A build without the simulator (the musl build) has no answer log,
        # and ctest says so: the answers are checked in the desktop build.
        pt_log "(no OpenAPI check of the answers: this build has no PT_WITH_SIM answer log)"
    elif [ -e "$PT_TMP/served" ] && [ ! -s "$PT_TMP/answers/journal" ]; then
        # A daemon answered (its /healthz at least) and nothing was kept:
        # the check would pass having checked nothing (a build without
        # PT_WITH_SIM has no answer log).
        pt_log "no answers were logged for the OpenAPI check (PAYTERM_TEST_ANSWER_LOG needs a PT_WITH_SIM build)"
        PT_FAILED=$((PT_FAILED + 1))
        PT_FAILED_NAMES+=("(openapi: no answers logged)")
    elif [ -s "$PT_TMP/answers/journal" ]; then
        if ! "$PT_PYTHON" -c 'import jsonschema' 2>/dev/null; then
            pt_log "python3 with jsonschema is needed to check the answers against the OpenAPI description (apt-get install python3-jsonschema)"
            PT_FAILED=$((PT_FAILED + 1))
            PT_FAILED_NAMES+=("(openapi: no python3-jsonschema)")
        elif ! "$PT_PYTHON" "$PT_DIR/openapi_check.py" "$PT_DIR/../../firmware/openapi.json" \
            "$PT_TMP/answers/journal" >"$PT_TMP/answers.report" 2>&1; then
            cat "$PT_TMP/answers.report" >&2
            PT_FAILED=$((PT_FAILED + 1))
            PT_FAILED_NAMES+=("(answers that do not fit the OpenAPI description)")
        else
            tail -n 1 "$PT_TMP/answers.report"
        fi
    fi
    if [ "$PT_FAILED" -eq 0 ]; then
        printf '%s: all %d cases passed (%d ms)\n' "$PT_SCRIPT" "$PT_CASES" "$secs"
        exit 0
    fi
    printf '%s: %d of %d cases FAILED: %s\n' "$PT_SCRIPT" "$PT_FAILED" "$PT_CASES" \
        "${PT_FAILED_NAMES[*]}"
    exit 1
}

# ---- setup and cleanup ---------------------------------------------------------

pt_cleanup()
{
    local pid
    # Nothing may cut the cleanup short (a closed stdout raises SIGPIPE on
    # every write).
    trap '' INT TERM HUP PIPE
    if [ -f "$PT_TMP/pids" ]; then
        while read -r pid; do
            kill -KILL "$pid" 2>/dev/null
        done <"$PT_TMP/pids"
    fi
    # Background curls of a case that failed mid-way.
    jobs -p | while read -r pid; do kill "$pid" 2>/dev/null; done
    # Lazily: a daemon just killed may still hold files open there.
    if [ -f "$PT_TMP/mounts" ]; then
        while read -r dir; do
            umount -l "$dir" 2>/dev/null
        done <"$PT_TMP/mounts"
    fi
    if [ "${PT_KEEP_TMP:-0}" = 1 ]; then
        pt_log "kept $PT_TMP"
    else
        rm -rf "$PT_TMP"
    fi
}

pt_init()
{
    local tool
    if [ -z "$PAYTERM" ] || [ ! -x "$PAYTERM" ]; then
        pt_log "$PT_SCRIPT: set PAYTERM to the payterm binary (got '${PAYTERM}')"
        exit 2
    fi
    for tool in curl jq awk cmp; do
        command -v "$tool" >/dev/null || {
            pt_log "$PT_SCRIPT: '$tool' is needed (apt-get install curl jq gawk diffutils)"
            exit 2
        }
    done
    PT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/payterm-$PT_SCRIPT.XXXXXX") || exit 2
    trap pt_cleanup EXIT
    # A signal (ctest's timeout, ^C, a reader that went away) still runs the
    # EXIT trap, so no daemon outlives the script.
    trap 'exit 130' INT TERM HUP PIPE
    PT_T0=$(date +%s%N)
    PT_BODY_FILE=$PT_TMP/last.body
    PT_HDR_FILE=$PT_TMP/last.hdr
    PT_CFG_BASE=$PT_TMP/base.json
    PT_CFG=$PT_TMP/config.json
    PT_STARTS=0
    # Gateway keys and secrets (throw-away, never used anywhere else); git
    # keeps no modes, and payterm refuses secrets others can read.
    cp "$PT_KEYS/merchant_alipay_pkcs1.pem" "$PT_TMP/alipay.key" &&
        cp "$PT_KEYS/alipay_gateway_public.pem" "$PT_TMP/alipay.pub" &&
        cp "$PT_KEYS/merchant_wechat_pkcs8.pem" "$PT_TMP/wechat.key" &&
        cp "$PT_KEYS/wechat_platform_public.pem" "$PT_TMP/wechat.pub" &&
        cp "$PT_KEYS/c2p_merchant_private.pem" "$PT_TMP/c2p_pm.key" &&
        cp "$PT_KEYS/c2p_merchant_public.pem" "$PT_TMP/c2p_pm_merchant.pub" &&
        cp "$PT_KEYS/c2p_gateway_cert.cer" "$PT_TMP/c2p_pm.cer" || {
        pt_log "$PT_SCRIPT: cannot copy the test keys from $PT_KEYS"
        exit 2
    }
    printf '0123456789abcdef0123456789abcdef' >"$PT_TMP/wechat.v3"
    printf 'sk_test_payterm_integration' >"$PT_TMP/stripe.sk"
    printf '0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF' >"$PT_TMP/c2p.sk"
    chmod 600 "$PT_TMP"/*.key "$PT_TMP"/*.pub "$PT_TMP/wechat.v3" "$PT_TMP/stripe.sk" \
        "$PT_TMP/c2p.sk" "$PT_TMP/c2p_pm.cer"
    pt_config
}

# pt_config [JQ_FILTER] - writes the base configuration (all four gateways,
# pointing at an address where nothing listens; offline limits for CNY and
# USD, none for THB; a sync interval of 1 s, so that a restarted daemon's
# sync engine finds the gateways down quickly) with the filter applied, e.g.
#   pt_config '.offline.max_count = 2'
pt_config()
{
    local filter=${1:-.}
    jq -n --arg dir "$PT_TMP" "{
        data_dir: (\$dir + \"/data\"),
        log_level: \"info\",
        limits: {max_amount: 10000000},
        offline: {
            limits: {CNY: {max_amount: 50000, max_total: 500000},
                     USD: {max_amount: 10000, max_total: 100000}},
            max_count: 500
        },
        sync: {interval_s: 1},
        gateways: {
            alipay: {endpoint: \"https://127.0.0.1:1/gateway.do\", app_id: \"2021000000000000\",
                     private_key_file: (\$dir + \"/alipay.key\"),
                     alipay_public_key_file: (\$dir + \"/alipay.pub\")},
            wechat: {endpoint: \"https://127.0.0.1:1\", mchid: \"1900000001\",
                     appid: \"wx0000000000000001\", serial_no: \"ABCDEF0123\",
                     private_key_file: (\$dir + \"/wechat.key\"),
                     platform_public_key_file: (\$dir + \"/wechat.pub\"),
                     platform_serial: \"PLAT0001\", apiv3_key_file: (\$dir + \"/wechat.v3\"),
                     notify_url: \"https://pos.example/notify/wechat\"},
            stripe: {endpoint: \"https://127.0.0.1:1\", secret_key_file: (\$dir + \"/stripe.sk\")},
            \"2c2p\": {endpoint: \"https://127.0.0.1:1\", merchant_id: \"JT01\",
                     secret_key_file: (\$dir + \"/c2p.sk\")}
        }
    } | $filter" >"$PT_CFG_BASE" || fail "pt_config: bad filter: $filter"
}

# refuse_to_start JQ_FILTER PART... - serve must exit non-zero at once,
# without serving, with every PART in what it prints.
refuse_to_start()
{
    local filter=$1 rc out
    shift
    pt_config "$filter"
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    out=$(timeout 20 "$PAYTERM" serve -c "$PT_CFG" 2>&1)
    rc=$?
    [ "$rc" -ne 124 ] || fail "payterm serve started with a bad configuration ($filter)"
    [ "$rc" -ne 0 ] || fail "payterm serve exited 0 with a bad configuration ($filter)"
    for part in "$@"; do
        expect_contains "$part" "$out" "what payterm serve printed for: $filter"
    done
}

# A port nobody listens on now, below the kernel's range of ephemeral ports
# (so no client connection of a test running in parallel holds it).  The
# daemon may still lose a race for it; pt_start then tries another one.
pt_pick_port()
{
    local port hex lo span
    lo=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${lo:-0}" -gt 12000 ] 2>/dev/null || lo=60000
    span=$((lo - 10000))
    for _ in $(seq 50); do
        port=$((10000 + (RANDOM * 32768 + RANDOM) % span))
        hex=$(printf ':%04X' "$port")
        if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2}' |
            grep -qi -- "$hex\$"; then
            echo "$port"
            return 0
        fi
    done
    echo $((20000 + RANDOM % 40000))
}

# pt_start [EXTRA SERVE ARGS] - starts `payterm serve` with the base config
# on a free port, waits until it serves /healthz and knows every gateway is
# unreachable (pt_gateways_down; PT_WARMUP=0 skips that).  Sets PT_PID,
# PT_PORT, PT_URL, PT_LOG.
# Keeps the port of the previous start (a restart on the same data dir)
# unless PT_PORT is empty.
pt_start()
{
    local deadline
    for _ in 1 2 3 4 5; do
        [ -n "${PT_PORT:-}" ] || PT_PORT=$(pt_pick_port)
        PT_URL=http://127.0.0.1:$PT_PORT
        jq --arg l "127.0.0.1:$PT_PORT" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
        if [ -n "${PT_NOTIFY_LISTEN:-}" ]; then
            # A second listener (notify_listen) gets its own port, picked
            # again with the first when either was taken.
            [ -n "${PT_NPORT:-}" ] || PT_NPORT=$(pt_pick_port)
            jq --arg l "127.0.0.1:$PT_NPORT" '.notify_listen = $l' "$PT_CFG" >"$PT_CFG.tmp" &&
                mv "$PT_CFG.tmp" "$PT_CFG"
        fi
        PT_STARTS=$((PT_STARTS + 1))
        PT_LOG=$PT_TMP/daemon.$BASHPID.$PT_STARTS.log
        # A small keeper runs the daemon and writes down its exit status, so
        # any case can learn it (only a process's parent can wait for it)
        # and bash has no killed job of its own to report.
        rm -f "$PT_LOG.pid" "$PT_LOG.exit"
        mkdir -p "$PT_TMP/answers"
        (
            PAYTERM_TEST_ANSWER_LOG="$PT_TMP/answers" "$PAYTERM" serve -c "$PT_CFG" "$@" >"$PT_LOG" 2>&1 &
            echo $! >"$PT_LOG.pid.tmp" && mv "$PT_LOG.pid.tmp" "$PT_LOG.pid"
            wait $!
            echo $? >"$PT_LOG.exit.tmp" && mv "$PT_LOG.exit.tmp" "$PT_LOG.exit"
        ) 2>/dev/null &
        # The keeper first, so that the cleanup kills it before the daemon
        # and it writes nothing into a directory being removed.
        echo $! >>"$PT_TMP/pids"
        until [ -s "$PT_LOG.pid" ]; do sleep 0.005; done
        PT_PID=$(cat "$PT_LOG.pid")
        echo "$PT_PID" >>"$PT_TMP/pids"
        deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
        # "serving on" is logged only after the listener is bound, so a
        # /healthz answer after it is ours, not another process's.
        while [ ! -e "$PT_LOG.exit" ]; do
            if grep -q 'serving on' "$PT_LOG" &&
                curl -s -o /dev/null --max-time 2 "$PT_URL/healthz"; then
                [ "${PT_WARMUP:-1}" = 0 ] || pt_gateways_down
                : >"$PT_TMP/served"
                return 0
            fi
            [ "$(date +%s)" -lt "$deadline" ] ||
                fail "payterm serve did not become ready within ${PT_START_TIMEOUT_S}s"
            sleep 0.02
        done
        if grep -q 'address in use' "$PT_LOG"; then
            PT_PORT=""
            PT_NPORT=""
            continue
        fi
        fail "payterm serve exited during startup: $(cat "$PT_LOG")"
    done
    fail "payterm serve found no free port in 5 attempts"
}

# pt_metrics NAME_AND_LABELS... - the samples' values from one /metrics
# scrape, one line each ("" for a sample that is missing).
pt_metrics()
{
    curl -s --max-time "$PT_CURL_MAX_S" ${PT_AUTH:+-H "Authorization: Bearer $PT_AUTH"} \
        "$PT_URL/metrics" | awk '
            BEGIN { for (i = 1; i < ARGC; i++) want[i] = ARGV[i]; n = ARGC - 1; ARGC = 1 }
            { v[$1] = $2 }
            END { for (i = 1; i <= n; i++) print v[want[i]] }' "$@"
}

# pt_gateways_down - makes the daemon know that every configured gateway is
# unreachable, and waits until its sync engine is idle.
#
# For a gateway with queued charges, the daemon's own sync pass (the first
# one after a start, then every sync.interval_s) tries them and finds out;
# charging it here would race that pass.  Every other gateway gets one
# require_online charge, warmup-<gateway>-N: the daemon probes the gateway,
# finds it down and answers 503 offline_not_allowed.
pt_gateways_down()
{
    local auth gw body queued="" after=0 deadline
    auth=$(jq -r '.api_token_file // empty' "$PT_CFG")
    [ -z "$auth" ] || auth=$(head -n 1 "$auth")
    local PT_AUTH=${PT_AUTH:-$auth} PT_BODY_FILE=$PT_TMP/warmup.body.$BASHPID \
        PT_HDR_FILE=$PT_TMP/warmup.hdr.$BASHPID PT_STATUS PT_LAST_REQ PT_BODY
    while :; do
        pt_get "/v1/charges?state=INIT&limit=100&after=$after"
        [ "$PT_STATUS" = 200 ] || fail "pt_gateways_down: GET /v1/charges: $PT_STATUS $PT_BODY"
        queued="$queued $(jq -r '[.data[].gateway] | unique | join(" ")' <"$PT_BODY_FILE")"
        [ "$(jq .has_more <"$PT_BODY_FILE")" = true ] || break
        after=$(jq '.data[-1].id' <"$PT_BODY_FILE")
    done
    # A charge a killed daemon left PROCESSING stays so while its gateway
    # is down (whether its send left is unknown until the gateway answers):
    # those found here are not the sync engine at work.
    local left
    pt_get "/v1/charges?state=PROCESSING&limit=100"
    [ "$PT_STATUS" = 200 ] || fail "pt_gateways_down: GET /v1/charges: $PT_STATUS $PT_BODY"
    left=$(jq -c '[.data[].id]' <"$PT_BODY_FILE")
    local gws=() samples=() up=() want="" i
    read -r -a gws <<<"$(jq -r '.gateways | keys | join(" ")' "$PT_CFG")"
    for gw in "${gws[@]}"; do
        samples+=("payterm_gateway_online{gateway=\"$gw\"}")
        want+="0 "
    done
    samples+=('payterm_charges{state="PROCESSING"}')
    want+="0 "
    mapfile -t up < <(pt_metrics "${samples[@]}")
    for i in "${!gws[@]}"; do
        gw=${gws[$i]}
        [[ " $queued " != *" $gw "* ]] && [ "${up[$i]}" = 1 ] || continue
        case $gw in
        alipay) body='"currency":"CNY","gateway":"alipay","method":"qr"' ;;
        wechat) body='"currency":"CNY","gateway":"wechat","method":"qr"' ;;
        stripe) body='"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa","offline":"require_online"' ;;
        2c2p) body='"currency":"THB","gateway":"2c2p","method":"redirect"' ;;
        esac
        pt_post /v1/charges "warmup-key-$gw-$RANDOM$RANDOM" \
            "{\"order_id\":\"warmup-$gw-$RANDOM$RANDOM\",\"amount\":1,$body}"
        [ "$PT_STATUS" = 503 ] || fail "pt_gateways_down: the $gw warm-up charge got $PT_STATUS: $PT_BODY"
    done
    # Every gateway down, no charge PROCESSING but those left so: the sync
    # engine is idle.
    deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    local still=0 have
    while :; do
        if [ "$left" != "[]" ]; then
            pt_get "/v1/charges?state=PROCESSING&limit=100"
            still=$(jq --argjson left "$left" '[.data[].id | select(. as $i | $left | index($i))] | length' <"$PT_BODY_FILE")
        fi
        have=$(pt_metrics "${samples[@]}" | tr '\n' ' ')
        [ "$have" != "${want%0 }$still " ] || break
        [ "$(date +%s)" -lt "$deadline" ] ||
            fail "pt_gateways_down: ${samples[*]} are $have (left PROCESSING by an earlier life: $still)"
        sleep 0.02
    done
}

# pt_wait_exit - waits for the current daemon to exit and sets PT_EXIT to
# its exit status (128 + N when signal N ended it).
pt_wait_exit()
{
    local deadline=$(($(date +%s) + PT_STOP_TIMEOUT_S))
    until [ -s "$PT_LOG.exit" ]; do
        [ "$(date +%s)" -lt "$deadline" ] ||
            fail "payterm (pid $PT_PID) did not exit within ${PT_STOP_TIMEOUT_S}s"
        sleep 0.01
    done
    PT_EXIT=$(cat "$PT_LOG.exit")
}

# pt_stop - SIGTERM, then wait; fails unless the exit status is 0.
pt_stop()
{
    kill -TERM "$PT_PID" 2>/dev/null || fail "pt_stop: daemon $PT_PID is not running"
    pt_wait_exit
    expect_eq 0 "$PT_EXIT" "exit status of payterm serve after SIGTERM"
}

# pt_kill9 - SIGKILL: no cleanup, no commit of anything in flight.
pt_kill9()
{
    kill -KILL "$PT_PID" 2>/dev/null
    pt_wait_exit
    expect_eq 137 "$PT_EXIT" "exit status of payterm serve after SIGKILL"
}

# pt_wait_requests_read - waits until the daemon has accepted the open
# connections to its port and read every byte sent on them: a request sent
# before this is in its hands.  (/proc/net/tcp: for the listening socket
# rx_queue is the accept backlog; for an accepted one, the unread bytes.)
pt_wait_requests_read()
{
    local port deadline=$(($(date +%s) + PT_START_TIMEOUT_S))
    port=$(printf ':%04X' "$PT_PORT")
    until awk -v p="$port" '
        NR > 1 && substr($2, length($2) - 4) == p {
            split($5, q, ":")
            if ($4 == "0A" && q[2] !~ /^0+$/) busy = 1
            if ($4 == "01") { open = 1; if (q[2] !~ /^0+$/) busy = 1 }
        }
        END { exit !(open && !busy) }' /proc/net/tcp; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "the daemon did not read the request"
        sleep 0.01
    done
}

# ---- requests ------------------------------------------------------------------

# pt_request METHOD PATH [CURL ARGS...] - sets PT_STATUS, PT_BODY and the files.
pt_request()
{
    local method=$1 path=$2
    shift 2
    PT_LAST_REQ="$method $path"
    rm -f "$PT_BODY_FILE" "$PT_HDR_FILE"
    PT_STATUS=$(curl -s -X "$method" -o "$PT_BODY_FILE" -D "$PT_HDR_FILE" \
        -w '%{http_code}' --max-time "$PT_CURL_MAX_S" ${PT_AUTH:+-H "Authorization: Bearer $PT_AUTH"} \
        "$@" "$PT_URL$path") || PT_STATUS=${PT_STATUS:-000}
    [ -f "$PT_BODY_FILE" ] || : >"$PT_BODY_FILE"
    [ -f "$PT_HDR_FILE" ] || : >"$PT_HDR_FILE"
    PT_BODY=$(cat "$PT_BODY_FILE")
}

pt_get() { pt_request GET "$@"; }

# pt_post PATH KEY [BODY] - KEY "-" sends no Idempotency-Key header; BODY
# "-" sends no body at all.  The body is sent byte for byte.
pt_post()
{
    local path=$1 key=$2 body=${3--}
    local args=(-H 'Content-Type: application/json' -H 'Expect:')
    [ "$key" == "-" ] || args+=(-H "Idempotency-Key: $key")
    if [ "$body" != "-" ]; then
        printf '%s' "$body" >"$PT_TMP/req.body.$BASHPID"
        args+=(--data-binary "@$PT_TMP/req.body.$BASHPID")
    fi
    pt_request POST "$path" "${args[@]}"
    rm -f "$PT_TMP/req.body.$BASHPID"
}

# jq filters that leave out the warm-up charges of pt_gateways_down.
NOWARM='select(.order_id | startswith("warmup-") | not)'

# pt_all_charges [QUERY] - every charge (all pages) as one JSON array,
# warm-up charges left out, on stdout.
pt_all_charges()
{
    local after=0 q=${1:+&$1}
    while :; do
        pt_get "/v1/charges?limit=100&after=$after$q"
        [ "$PT_STATUS" = 200 ] || fail "GET /v1/charges: $PT_STATUS $PT_BODY"
        jq -c ".data[] | $NOWARM" <"$PT_BODY_FILE"
        [ "$(jq .has_more <"$PT_BODY_FILE")" = true ] || break
        after=$(jq '.data[-1].id' <"$PT_BODY_FILE")
    done | jq -cs .
}

# pt_feed_next - the feed position now (where a test's own events begin).
pt_feed_next()
{
    local next=0
    while :; do
        pt_get "/v1/events?limit=100&after=$next"
        [ "$(jq '.data | length' <"$PT_BODY_FILE")" != 0 ] || break
        next=$(jq .next <"$PT_BODY_FILE")
    done
    echo "$next"
}

# pt_save NAME / pt_saved NAME - keep a response's exact bytes for later.
pt_save() { cp "$PT_BODY_FILE" "$PT_TMP/saved.$1"; }
pt_saved() { echo "$PT_TMP/saved.$1"; }

# charge_body ORDER [JQ FILTER] - a valid offline-able charge request
# (Stripe card on file, 1.00 USD), modified by the filter.
charge_body()
{
    local order=$1 filter=${2:-.}
    jq -cn --arg o "$order" "{order_id: \$o, amount: 100, currency: \"USD\", gateway: \"stripe\",
        method: \"card_on_file\", payment_method: \"pm_card_visa\", subject: \"Coffee\"} | $filter"
}
