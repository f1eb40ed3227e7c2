#!/usr/bin/env bash
# deb-check.sh - the .deb on a Debian 12 machine, as an integrator meets it
# (SPEC 14, issue 17).  Meant for a brand-new Debian 12:
#
#   ../shared/tools/fresh-debian.sh . 'tests/package/deb-check.sh'
#
# and safe on a machine that is not new (it installs the package for real;
# running it again reinstalls the same version; it removes nothing of the
# host's).  Run as root from anywhere in the repository.
#
#   1. make deb, then apt-get install ./build/payterm_VERSION_ARCH.deb
#   2. what the package installed: dpkg -L (unit, man pages, sysusers,
#      tmpfiles, logrotate), the payterm user, /var/lib/payterm 0700
#      payterm, /etc/payterm/payterm.json root:payterm 0640, the conffile,
#      the unit enabled and not started; lintian: no E: line
#   3. the simulator from the dev build (cmake preset dev, target payterm;
#      DEB_CHECK_SIM=/path/to/payterm uses that binary instead, for a
#      machine where build/dev belongs to someone else), run as payterm
#   4. as payterm, the installed /usr/bin/payterm: init, then serve with the
#      packaged config plus a fragment pointing at the simulator; one charge
#      through the local API reaches SUCCESS, captured once at the
#      simulator; SIGTERM stops the daemon with status 0
#
# Prints a PASS or FAIL line per check and exits 1 if any failed.  The
# test's own files live in a temporary directory and in
# /var/lib/payterm/deb-check (its data_dir), both removed at the end.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
T0=$SECONDS
FAILS=0
PASSES=0
pass() { PASSES=$((PASSES + 1)); echo "PASS: $*"; }
fail() { FAILS=$((FAILS + 1)); echo "FAIL: $*"; }
skip() { echo "SKIP: $*"; }
check() { # check WHAT CMD... : PASS when CMD succeeds
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
# The end: a summary, and status 1 on any failure.
finish() {
    echo "deb-check: $PASSES passed, $FAILS failed in $((SECONDS - T0)) s"
    [ "$FAILS" -eq 0 ] && exit 0
    exit 1
}
# A failure that leaves nothing to check after it.
abort() {
    fail "$*"
    finish
}

[ "$(id -u)" = 0 ] || { echo "deb-check: run as root (it installs the package)" >&2; exit 2; }

# A root directory that others cannot search makes every program run as a
# service user fail ("error while loading shared libraries: ... Permission
# denied").  A Debian system's / is 0755; a chroot unpacked into a
# `mktemp -d` directory (fresh-debian.sh) keeps that directory's 0700.
if [ $(($(stat -c '0%a' /) & 01)) = 0 ]; then
    echo "deb-check: / is mode $(stat -c %a /), not searchable by other users (a chroot made in a" \
        "mktemp -d directory); setting 0755 as on any Debian system"
    chmod 0755 /
fi

VERSION=$(cat VERSION)
ARCH=$(dpkg --print-architecture)
DEB=build/payterm_${VERSION}_${ARCH}.deb
echo "deb-check: payterm $VERSION for $ARCH in $(pwd)"

W=""
SIM_PID=""
D_PID=""
DATA=/var/lib/payterm/deb-check
cleanup() {
    local p
    for p in $D_PID $SIM_PID; do
        kill -TERM "$p" 2>/dev/null && { sleep 1; kill -KILL "$p" 2>/dev/null; }
    done
    [ -n "$W" ] && rm -rf "$W"
    rm -rf "$DATA"
}
trap cleanup EXIT

# ---- 1. build and install --------------------------------------------------------

echo "deb-check: make deb"
make deb || abort "make deb"
[ -f "$DEB" ] || abort "make deb made $DEB"
pass "make deb: $DEB ($(du -k "$DEB" | cut -f1) KiB)"
echo "deb-check: Depends: $(dpkg-deb -f "$DEB" Depends)"

# --reinstall: on a second run the same version is installed again from the
# new file (without it apt-get would keep the old one).
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y --reinstall "./$DEB"; then
    pass "apt-get install ./$DEB"
else
    abort "apt-get install ./$DEB"
fi

# ---- 2. what the package installed ---------------------------------------------

listing=$(dpkg -L payterm)
for f in /usr/bin/payterm /lib/systemd/system/payterm.service \
    /usr/share/man/man8/payterm.8.gz /usr/share/man/man5/payterm.json.5.gz \
    /usr/lib/sysusers.d/payterm.conf /usr/lib/tmpfiles.d/payterm.conf \
    /etc/logrotate.d/payterm /etc/payterm/payterm.json /usr/share/doc/payterm/copyright \
    /usr/share/doc/payterm/changelog.gz; do
    check "dpkg -L payterm lists $f" grep -qx "$f" <<<"$listing"
done
check "/etc/payterm/payterm.json is a conffile" \
    grep -q '^ /etc/payterm/payterm.json ' <<<"$(dpkg-query -W -f='${Conffiles}\n' payterm)"

got=$(/usr/bin/payterm version)
check "/usr/bin/payterm version says $VERSION ($got)" grep -q "^payterm $VERSION " <<<"$got"
th=$(zcat /usr/share/man/man8/payterm.8.gz | grep '^\.TH')
check "payterm(8) is version $VERSION ($th)" grep -q "\"payterm $VERSION\"" <<<"$th"

pw=$(getent passwd payterm)
check "user payterm exists ($pw)" test -n "$pw"
check "user payterm's home is /var/lib/payterm" test "$(cut -d: -f6 <<<"$pw")" = /var/lib/payterm
check "user payterm has no login shell" grep -q 'nologin$\|/bin/false$' <<<"$pw"
has_group() { getent group payterm >/dev/null; }
check "group payterm exists" has_group
mode() { stat -c '%a %U:%G' "$1" 2>/dev/null; }
check "/var/lib/payterm is 700 payterm:payterm ($(mode /var/lib/payterm))" \
    test "$(mode /var/lib/payterm)" = "700 payterm:payterm"
check "/etc/payterm/payterm.json is 640 root:payterm ($(mode /etc/payterm/payterm.json))" \
    test "$(mode /etc/payterm/payterm.json)" = "640 root:payterm"
check "/etc/payterm/keys is 750 root:payterm ($(mode /etc/payterm/keys))" \
    test "$(mode /etc/payterm/keys)" = "750 root:payterm"
check "payterm.service is enabled (multi-user.target.wants)" \
    test -L /etc/systemd/system/multi-user.target.wants/payterm.service
if [ -d /run/systemd/system ]; then
    check "payterm.service was not started" test "$(systemctl is-active payterm.service)" != active
else
    skip "payterm.service not started: systemd is not running here (nothing could start it)"
fi

lint=$(lintian "$DEB" 2>&1 | grep -v '^running with root privileges')
echo "deb-check: lintian: $(grep -c '^E:' <<<"$lint") errors, $(grep -c '^W:' <<<"$lint") warnings," \
    "$(grep -c '^I:' <<<"$lint") info"
[ -z "$lint" ] || sed 's/^/    /' <<<"$lint"
check "lintian $DEB: no E: line" test "$(grep -c '^E:' <<<"$lint")" = 0

# ---- 3. the simulator, as payterm ----------------------------------------------

SIM=${DEB_CHECK_SIM:-}
if [ -z "$SIM" ]; then
    echo "deb-check: building the simulator (cmake preset dev, target payterm)"
    scripts/deps.sh base || abort "scripts/deps.sh base"
    { cmake --preset dev >/dev/null && cmake --build --preset dev -j 2 --target payterm; } ||
        abort "the dev build of payterm (the simulator)"
    SIM=build/dev/firmware/payterm
fi
[ -x "$SIM" ] || abort "simulator binary $SIM"

# Everything the test writes lives under $W, owned by payterm: the
# simulator (run as payterm) writes its keys there 0600, which is what
# payterm init accepts for a secret (no group or other bits), and the
# daemon as payterm reads them.
W=$(mktemp -d /var/tmp/payterm-deb-check.XXXXXX)
cp "$SIM" "$W/payterm-sim"
chmod 0755 "$W/payterm-sim"
chown -R payterm:payterm "$W"
chmod 0700 "$W"
# setpriv execs the command: in the background, $! is the program's own pid.
AS_PAYTERM=(setpriv --reuid=payterm --regid=payterm --init-groups --)

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
API_PORT=""
for _ in $(seq 50); do
    p=$((20000 + RANDOM % 10000))
    if port_free "$p"; then API_PORT=$p; break; fi
done
[ -n "$API_PORT" ] || abort "a free port for the daemon"
API=http://127.0.0.1:$API_PORT

"${AS_PAYTERM[@]}" "$W/payterm-sim" sim --dir "$W/sim" --listen 127.0.0.1:0 --notify-base "$API" \
    --pay-delay-ms 500 --quiet >"$W/sim.out" 2>"$W/sim.log" &
SIM_PID=$!
for _ in $(seq 300); do
    grep -q 'ready on port' "$W/sim.out" 2>/dev/null && break
    kill -0 "$SIM_PID" 2>/dev/null || break
    sleep 0.1
done
SIM_PORT=$(sed -n 's/.*ready on port \([0-9]*\).*/\1/p' "$W/sim.out")
[ -n "$SIM_PORT" ] || abort "the simulator started (log: $(tail -n 3 "$W/sim.log"))"
pass "simulator (payterm sim, as payterm) on port $SIM_PORT"
echo "deb-check: the simulator's files: $(stat -c '%a %U' "$W"/sim/* | sort | uniq -c | tr -s ' \n' ' ')"

# The fragment: the simulator's gateways.json (its gateways, their keys,
# tls.ca_file = its CA; relative paths, so the fragment stays beside it)
# with this test's data_dir and listen address.
FRAG=$W/sim/deb-check.json
jq --arg dd "$DATA" --arg l "127.0.0.1:$API_PORT" \
    '. + {data_dir: $dd, listen: $l, log_level: "debug"}' "$W/sim/gateways.json" >"$FRAG" ||
    abort "the simulator fragment $FRAG"
chown payterm:payterm "$FRAG"
rm -rf "$DATA"
CFG=(-c /etc/payterm/payterm.json -c "$FRAG")

# ---- 4. the installed payterm, as payterm --------------------------------------

if /usr/bin/payterm init --help | grep -q -- --check-gateways; then
    "${AS_PAYTERM[@]}" /usr/bin/payterm init --check-gateways -c /etc/payterm/payterm.json
    check "init --check-gateways: the packaged config has no gateway (exit 1, got $?)" test $? = 1
    "${AS_PAYTERM[@]}" /usr/bin/payterm init --check-gateways "${CFG[@]}"
    check "init --check-gateways: with the simulator's gateways (exit 0, got $?)" test $? = 0
else
    skip "init --check-gateways: not in this build"
fi

if out=$("${AS_PAYTERM[@]}" /usr/bin/payterm init "${CFG[@]}" 2>&1); then
    pass "payterm init as payterm: $(tail -n 1 <<<"$out")"
else
    abort "payterm init as payterm: $out"
fi
check "data_dir $DATA is 700 payterm ($(mode "$DATA"))" test "$(mode "$DATA")" = "700 payterm:payterm"

"${AS_PAYTERM[@]}" /usr/bin/payterm serve "${CFG[@]}" >"$W/serve.log" 2>&1 &
D_PID=$!
up=0
for _ in $(seq 300); do
    if curl -sf "$API/healthz" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$D_PID" 2>/dev/null || break
    sleep 0.1
done
[ $up = 1 ] || abort "payterm serve as payterm answers $API/healthz (log: $(tail -n 5 "$W/serve.log"))"
pass "payterm serve as payterm: $API/healthz answers (pid $D_PID, user $(ps -o user= -p "$D_PID"))"

ORDER=deb-check-1
st=$(curl -sS -o "$W/charge.json" -w '%{http_code}' -X POST "$API/v1/charges" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: deb-check-$ORDER" \
    -d "{\"order_id\":\"$ORDER\",\"amount\":1234,\"currency\":\"USD\",\"gateway\":\"stripe\",\"method\":\"card_on_file\",\"payment_method\":\"pm_card_visa\"}")
check "POST /v1/charges answered 2xx (HTTP $st: $(head -c 300 "$W/charge.json"))" grep -q '^2' <<<"$st"
state=""
for _ in $(seq 300); do
    state=$(curl -sS "$API/v1/charges/$ORDER" | jq -r '.state // .error.code' 2>/dev/null)
    [ "$state" = SUCCESS ] && break
    case $state in FAILED | CANCELED) break ;; esac
    sleep 0.1
done
check "charge $ORDER reached SUCCESS (it is ${state:-?})" test "$state" = SUCCESS
captures=$(curl -sS --cacert "$W/sim/ca.pem" "https://127.0.0.1:$SIM_PORT/_sim/ledger?order_id=$ORDER" |
    jq '[.data[].captures] | add // 0')
check "the simulator captured $ORDER once (captures: $captures)" test "$captures" = 1

kill -TERM "$D_PID"
rc=""
for _ in $(seq 300); do
    kill -0 "$D_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$D_PID" 2>/dev/null; then
    fail "payterm serve stopped within 30 s of SIGTERM"
else
    wait "$D_PID"
    rc=$?
    check "payterm serve exited 0 on SIGTERM (status $rc)" test "$rc" = 0
fi
D_PID=""
if [ "$FAILS" -ne 0 ]; then
    echo "deb-check: last lines of the daemon's log:"
    tail -n 20 "$W/serve.log" | sed 's/^/    /'
fi

finish
