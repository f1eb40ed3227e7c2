#!/bin/sh
# deps.sh - make sure the Debian packages payterm needs are installed.
#
# usage: scripts/deps.sh [base|cross|armhf|musl|deb|fuzz|bench|lint]...
#   base  (default) compiler, CMake and the -dev libraries, test tools (BusyBox
#         for the init script's test, systemd for systemd-analyze on the unit,
#         strace for the unit's sandbox audit, python3-jsonschema to hold every
#         HTTP answer of the suites to the OpenAPI description, chromium and
#         python3-websocket for the operator page in a real browser, libpq and
#         PostgreSQL for the store server's backend and its tests, SPEC 16)
#   cross aarch64 cross compiler, qemu and the build tools; the arm64 libraries
#         come from scripts/sysroot.sh (a private sysroot, no dpkg architecture)
#   armhf the same for armhf
#   musl  musl-gcc (musl-tools) and what scripts/musl.sh needs to build the
#         libraries from Debian's source packages: dpkg-source, tclsh (SQLite's
#         amalgamation), python3 (mbed TLS's config.py)
#   deb   what `make deb` needs: dpkg-dev (shlibdeps), fakeroot, file, lintian
#   fuzz  clang with libFuzzer
#   bench binutils (strip, for the binary size figure), strace (fsyncs per online charge)
#   lint  clang-format (the layout .clang-format describes; .ci/run checks it)
# As root, missing packages are installed with apt-get.  Otherwise the single
# apt-get line to run is printed and the script fails.
set -eu

base="gcc libc6-dev cmake make pkg-config libsqlite3-dev libmbedtls-dev libcurl4-openssl-dev
libcjson-dev libmicrohttpd-dev zlib1g-dev libcmocka-dev curl jq sqlite3 ca-certificates procps busybox systemd strace
python3-jsonschema chromium python3-websocket libpq-dev postgresql"
cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static cmake make pkg-config
ca-certificates"
armhf="gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static cmake make pkg-config
ca-certificates"
musl="musl-tools gcc make cmake pkg-config dpkg-dev tcl python3 ca-certificates"
fuzz="clang libclang-rt-14-dev"
bench="binutils strace"
lint="clang-format"
deb="dpkg-dev fakeroot file lintian"

want=""
[ $# -eq 0 ] && set -- base
for set in "$@"; do
    case "$set" in
    base) want="$want $base" ;;
    cross) want="$want $cross" ;;
    armhf) want="$want $armhf" ;;
    musl) want="$want $musl" ;;
    fuzz) want="$want $fuzz" ;;
    bench) want="$want $bench" ;;
    lint) want="$want $lint" ;;
    deb) want="$want $deb" ;;
    *) echo "deps.sh: unknown package set '$set' (base, cross, armhf, musl, deb, fuzz, bench, lint)" >&2; exit 2 ;;
    esac
done

missing=""
native=$(dpkg --print-architecture)
for p in $want; do
    # Ask for the native architecture by name: with an :arm64 twin installed,
    # a bare name matches both and the status reads "installedinstalled".
    q=$p
    case "$p" in *:*) ;; *) q="$p:$native" ;; esac
    st=$(dpkg-query -W -f='${db:Status-Status}' "$q" 2>/dev/null || true)
    # Architecture-independent packages (ca-certificates) have no :native.
    [ -n "$st" ] || st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | head -c 9 || true)
    [ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

arches=""
case " $missing " in *:arm64*) arches="$arches arm64" ;; esac
case " $missing " in *:armhf*) arches="$arches armhf" ;; esac

if [ "$(id -u)" -ne 0 ]; then
    echo "payterm needs these Debian packages:$missing" >&2
    for a in $arches; do echo "  sudo dpkg --add-architecture $a" >&2; done
    echo "  sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "deps.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# Another apt or dpkg (a boot-time apt-daily run, an earlier job) may hold the
# lock: wait for it rather than fail on it.
wait_lock="-o DPkg::Lock::Timeout=600"
dpkg_busy() {
    for c in /proc/[0-9]*/comm; do
        case $(cat "$c" 2>/dev/null) in dpkg | apt | apt-get | unattended-upgr) return 0 ;; esac
    done
    return 1
}
# A dpkg run cut off half-way (a power cut, the OOM killer, a job that timed
# out) leaves its journal in /var/lib/dpkg/updates, and every apt-get then
# refuses to go on ("dpkg was interrupted").  Finish it first, once no other
# dpkg is at work.
if [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ]; then
    n=0
    while dpkg_busy && [ $n -lt 600 ]; do sleep 1; n=$((n + 1)); done
    if [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ]; then
        echo "deps.sh: an earlier dpkg run was cut off; finishing it first (dpkg --configure -a)" >&2
        dpkg --configure -a || echo "deps.sh: dpkg --configure -a failed; apt-get says why below" >&2
    fi
fi
for a in $arches; do dpkg --add-architecture "$a"; done
# A mirror in the middle of a sync can fail one index; retry, then go on with
# what we have (the install step fails clearly if a package is really missing).
for try in 1 2 3; do
    # shellcheck disable=SC2086
    apt-get $wait_lock update -qq && break
    echo "deps.sh: apt-get update failed (try $try of 3)" >&2
    sleep 5
done
# shellcheck disable=SC2086
apt-get $wait_lock install -y -qq --no-install-recommends $missing >/dev/null
