#!/bin/sh
# sysroot.sh - a private target sysroot for the cross build, made of Debian's
# own armhf packages, without installing anything through dpkg.
#
# usage: scripts/sysroot.sh [armhf]        (the only target so far)
#
# The result is build/sysroot-armhf/ (PT_SYSROOT overrides): the -dev packages
# payterm links against and their run-time library closure, unpacked with
# `dpkg -x`, plus links to the cross toolchain's C library so that the same
# directory serves as qemu-arm's -L prefix.  toolchains/arm-linux-gnueabihf.cmake
# uses it.
#
# Why not multiarch (dpkg --add-architecture armhf) as for aarch64?  A mirror
# whose bookworm-security armhf index is out of sync with its amd64 one leaves
# the :armhf libraries at main-archive versions while their Multi-Arch: same
# amd64 twins (libssl3, ...) are at security versions, and apt refuses the
# install ("held broken packages"); the broken index also aborts later
# `apt-get update`s.  Here apt runs with its own architecture, lists, cache and
# an empty dpkg status, so the host's dpkg/apt state is never touched (no root
# needed either), and a failing security index only means main-archive
# versions inside this private sysroot.
#
# Re-running is quick: nothing is done while the stamp matches this script and
# the package list.  `rm -rf build/sysroot-armhf` to rebuild.
set -eu

arch=${1:-armhf}
case "$arch" in
armhf) triplet=arm-linux-gnueabihf ;;
*) echo "sysroot.sh: unknown target '$arch' (armhf)" >&2; exit 2 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
out=${PT_SYSROOT:-$top/build/sysroot-$arch}
work=$out.work                         # apt's private state, lists and .debs
# What payterm builds against (scripts/deps.sh base, the :$arch versions).
pkgs="libsqlite3-dev libmbedtls-dev libcurl4-openssl-dev libcjson-dev libmicrohttpd-dev
libcmocka-dev"
# Provided by the cross toolchain (libc6-dev-armhf-cross, libgcc-s1-armhf-cross)
# or not needed to link and run: never unpacked into the sysroot.
skip="libc6 libc6-dev libgcc-s1 gcc-12-base libcrypt1 libcrypt-dev libnsl2 libnsl-dev
libtirpc3 libtirpc-dev libtirpc-common linux-libc-dev rpcsvc-proto libc-dev-bin
debconf perl-base dpkg tar install-info"

# shellcheck disable=SC1091
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || codename=bookworm
stamp="sysroot.sh $(cksum <"$0" | cut -d' ' -f1) $arch $codename $(echo "$pkgs" | tr '\n' ' ')"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    exit 0
fi

for tool in apt-get dpkg-deb; do
    command -v $tool >/dev/null || { echo "sysroot.sh: needs $tool (Debian)" >&2; exit 1; }
done
cross_lib=/usr/$triplet/lib
if [ ! -e "$cross_lib/libc.so.6" ]; then
    echo "sysroot.sh: no cross C library in $cross_lib (scripts/deps.sh $arch installs it)" >&2
    exit 1
fi

# The host's Debian mirrors (deb822 or one-line sources), else deb.debian.org.
mirror() { # $1 = debian | debian-security
    cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        2>/dev/null | awk -v want="$1" '
        /^[ \t]*#/ { next }
        { for (i = 1; i <= NF; i++) if ($i ~ /^(https?|file):\/\//) {
              u = $i; sub(/\/+$/, "", u)
              if ((want == "debian-security") == (u ~ /security/) && u ~ /debian/) { print u; exit }
          } }'
}
main_uri=$(mirror debian); main_uri=${main_uri:-http://deb.debian.org/debian}
sec_uri=$(mirror debian-security); sec_uri=${sec_uri:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

echo "sysroot.sh: building $out ($codename $arch from $main_uri)"
rm -rf "$out" "$out.new"
mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/state" "$work/etc/parts" \
         "$work/debs" "$out.new"
: >"$work/status"
{
    opt="arch=$arch"
    [ -f "$keyring" ] && opt="$opt signed-by=$keyring"
    echo "deb [$opt] $main_uri $codename main"
    echo "deb [$opt] $main_uri $codename-updates main"
    echo "deb [$opt] $sec_uri $codename-security main"
} >"$work/etc/sources.list"

# Command-line options win over the host's apt.conf.d (which still supplies
# proxies and the like); everything stateful points into $work.
sandbox=""
[ "$(id -u)" -eq 0 ] && sandbox="-o APT::Sandbox::User=root"
aptopts="-o APT::Architecture=$arch -o APT::Architectures=$arch
 -o Dir::State=$work/state -o Dir::State::Lists=$work/lists -o Dir::State::status=$work/status
 -o Dir::Cache=$work -o Dir::Cache::archives=$work/archives
 -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
 -o Dir::Etc::SourceList=$work/etc/sources.list -o Dir::Etc::SourceParts=$work/etc/parts
 -o Debug::NoLocking=true -o APT::Install-Recommends=false -o APT::Install-Suggests=false
 -o Acquire::Languages=none $sandbox"

# A mirror in mid-sync (typically bookworm-security's armhf index) fails one
# index: retry, then go on with what arrived - main-archive versions are fine
# in a private sysroot.  Only a missing main index is fatal.
have_main() {
    ls "$work/lists/"*"_dists_${codename}_main_binary-${arch}_Packages"* >/dev/null 2>&1
}
for try in 1 2 3; do
    # shellcheck disable=SC2086
    apt-get $aptopts -qq update 2>"$work/update.err" && break
    if have_main; then
        echo "sysroot.sh: some $arch indexes failed (main-archive versions are used):" >&2
        grep '^E: Failed' "$work/update.err" | cut -c1-160 | sed 's/^/  /' >&2
        break
    fi
    sed 's/^/  /' "$work/update.err" >&2
    echo "sysroot.sh: apt-get update (private, $arch) failed (try $try of 3)" >&2
    [ "$try" -lt 3 ] && sleep 5
done
if ! have_main; then
    echo "sysroot.sh: could not fetch the $codename $arch package index from $main_uri" >&2
    exit 1
fi

# Resolve the closure as if installing onto an empty $arch system; keep what
# the cross toolchain does not already provide.
# shellcheck disable=SC2086
apt-get $aptopts -s -qq install $pkgs >"$work/resolve.out" 2>"$work/resolve.err" || {
    cat "$work/resolve.out" "$work/resolve.err" >&2
    echo "sysroot.sh: cannot resolve the $arch packages" >&2
    exit 1
}
want=$(awk -v skip=" $(echo "$skip" | tr '\n' ' ') " '$1 == "Inst" {
           n = $2; sub(/:.*/, "", n)
           if (index(skip, " " n " ") == 0) print n }' "$work/resolve.out" | sort -u)
[ -n "$want" ] || { echo "sysroot.sh: nothing to download?" >&2; exit 1; }

rm -f "$work/debs/"*.deb
# shellcheck disable=SC2086
(cd "$work/debs" && apt-get $aptopts -qq download $want)
for deb in "$work/debs/"*.deb; do
    dpkg-deb -x "$deb" "$out.new"
done

# Library symlinks that are absolute (e.g. libz.so -> /lib/...) would point
# at the build machine: make them relative to the sysroot.
find "$out.new" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in
    /*) dir=$(dirname "${link#"$out.new"}")
        up=$(echo "$dir" | sed 's|/[^/]*|../|g; s|^/||')
        ln -sfn "${up%/}${target}" "$link" ;;
    esac
done

# The cross toolchain's C library under /lib, where the armhf dynamic loader
# (/lib/ld-linux-armhf.so.3) and its default search path expect it: the
# sysroot is then a complete qemu -L prefix.  Absolute links: qemu resolves
# them on the host.
mkdir -p "$out.new/lib"
for f in "$cross_lib"/*.so*; do
    [ -e "$out.new/lib/${f##*/}" ] || ln -s "$f" "$out.new/lib/${f##*/}"
done

{
    echo "# $arch sysroot made by scripts/sysroot.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    for deb in "$work/debs/"*.deb; do
        # shellcheck disable=SC2016
        dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"
    done
} >"$out.new/PACKAGES"
echo "$stamp" >"$out.new/.stamp"
rm -rf "$out"
mv "$out.new" "$out"
echo "sysroot.sh: $(grep -vc '^#' "$out/PACKAGES") packages in $out"
