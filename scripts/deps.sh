#!/bin/sh
# deps.sh - make sure the Debian packages payterm needs are installed.
#
# usage: scripts/deps.sh [base|cross|fuzz|bench]...
#   base  (default) compiler, CMake and the -dev libraries, test tools
#   cross aarch64/armhf cross compilers, the :arm64/:armhf -dev packages, qemu
#   fuzz  clang with libFuzzer
#   bench wrk and sqlite3 for the HTTP and storage benchmarks
# As root, missing packages are installed with apt-get.  Otherwise the single
# apt-get line to run is printed and the script fails.
set -eu

base="gcc libc6-dev cmake make pkg-config libsqlite3-dev libmbedtls-dev libcurl4-openssl-dev
libcjson-dev libmicrohttpd-dev libcmocka-dev curl jq sqlite3 ca-certificates procps"
cross="gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf qemu-user-static libsqlite3-dev:arm64
libmbedtls-dev:arm64 libcurl4-openssl-dev:arm64 libcjson-dev:arm64 libmicrohttpd-dev:arm64
libcmocka-dev:arm64 libsqlite3-dev:armhf libmbedtls-dev:armhf libcurl4-openssl-dev:armhf
libcjson-dev:armhf libmicrohttpd-dev:armhf libcmocka-dev:armhf"
fuzz="clang libclang-rt-14-dev"
bench="wrk sqlite3"

want=""
[ $# -eq 0 ] && set -- base
for set in "$@"; do
    case "$set" in
    base) want="$want $base" ;;
    cross) want="$want $cross" ;;
    fuzz) want="$want $fuzz" ;;
    bench) want="$want $bench" ;;
    *) echo "deps.sh: unknown package set '$set' (base, cross, fuzz, bench)" >&2; exit 2 ;;
    esac
done

missing=""
for p in $want; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

case " $missing " in
*:arm64*|*:armhf*) need_arch=1 ;;
*) need_arch=0 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
    echo "payterm needs these Debian packages:$missing" >&2
    [ "$need_arch" = 1 ] && echo "  sudo dpkg --add-architecture arm64 && sudo dpkg --add-architecture armhf" >&2
    echo "  sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "deps.sh: installing:$missing"
if [ "$need_arch" = 1 ]; then
    dpkg --add-architecture arm64
    dpkg --add-architecture armhf
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
