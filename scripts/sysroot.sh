#!/bin/sh
# sysroot.sh - a private target sysroot for a cross build, made of Debian's
# own packages for that architecture, without installing anything through dpkg.
#
# usage: scripts/sysroot.sh armhf|arm64        (armhf when omitted)
#
# The result is build/sysroot-<target>/ (PT_SYSROOT overrides): the -dev
# packages payterm links against and their run-time library closure, unpacked
# with `dpkg -x`, plus links to the cross toolchain's C library
# (libc6-dev-<target>-cross, in /usr/<triplet>) so that the same directory
# serves as qemu's -L prefix.  toolchains/arm-linux-gnueabihf.cmake (armhf) and
# toolchains/aarch64-linux-gnu.cmake (arm64) use it.
#
# Why not multiarch (dpkg --add-architecture armhf|arm64)?  The :<target>
# libraries are Multi-Arch: same with the host's own amd64 packages and must
# be at exactly their versions, so installing them upgrades the host's own
# libssl3, libgnutls30, ... on a shared machine - or, on a mirror whose
# bookworm-security armhf index is out of sync with its amd64 one, apt refuses
# the install ("held broken packages") and the broken index aborts every
# later `apt-get update`.  Here apt runs with its own architecture, lists,
# cache and an empty dpkg status, so the host's dpkg/apt state is never
# touched (no root needed either), and a failing security index only means
# main-archive versions inside this private sysroot.
#
# Re-running is quick: nothing is done while the stamp matches this script and
# the package list.  `rm -rf build/sysroot-<target>` to rebuild.
set -eu

arch=${1:-armhf}
# The Debian architecture, its GNU triplet and the scripts/deps.sh set that
# installs its cross compiler and C library.
case "$arch" in
armhf) triplet=arm-linux-gnueabihf deps=armhf ;;
arm64) triplet=aarch64-linux-gnu deps=cross ;;
*) echo "sysroot.sh: unknown target '$arch' (armhf, arm64)" >&2; exit 2 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
out=${PT_SYSROOT:-$top/build/sysroot-$arch}
work=$out.work                         # apt's private state, lists and .debs
# What payterm builds against (scripts/deps.sh base, the :$arch versions).
pkgs="libsqlite3-dev libmbedtls-dev libcurl4-openssl-dev libcjson-dev libmicrohttpd-dev
zlib1g-dev libcmocka-dev"
# Provided by the cross toolchain (libc6-dev-$arch-cross, libgcc-s1-$arch-cross)
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
# libc.so.6 alone may come from libc6-$arch-cross: ask for the -dev package's
# headers too, which the compiler needs.
if [ ! -e "$cross_lib/libc.so.6" ] || [ ! -e "/usr/$triplet/include/stdio.h" ]; then
    echo "sysroot.sh: no cross C library in /usr/$triplet (libc6-dev-$arch-cross;" \
         "scripts/deps.sh $deps installs it)" >&2
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

# A mirror in mid-sync (bookworm-security's armhf index, for one) fails one
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

# Merged /usr, as on a Debian 12 board: /lib -> usr/lib.  Under qemu -L a
# path missing from the sysroot falls back to the build machine's file, and
# the target's loader looks in /lib/<triplet> first: with a separate /lib a
# library unpacked into /usr/lib would be taken from the host's multiarch
# /lib/<triplet> whenever one is installed there.  Relative links in /lib
# that climb out of their directory would change meaning one level down:
# make them absolute first (the next step makes them relative again).
if [ -d "$out.new/lib" ]; then
    find "$out.new/lib" -type l | while read -r link; do
        target=$(readlink "$link")
        case "$target" in
        ..|../*|*/../*) ln -sfn "$(dirname "${link#"$out.new"}")/$target" "$link" ;;
        esac
    done
    mkdir -p "$out.new/usr/lib"
    cp -a "$out.new/lib/." "$out.new/usr/lib/"
    rm -rf "$out.new/lib"
fi
ln -s usr/lib "$out.new/lib"

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

# The cross toolchain's C library (its run-time files; gcc links with the
# toolchain's own copy) in /lib/<triplet>, the first directory the target's
# loader searches, and the loader itself at its PT_INTERP path
# (/lib/ld-linux-armhf.so.3, /lib/ld-linux-aarch64.so.1): the sysroot is then
# a complete qemu -L prefix, and the host's multiarch libc is never reached.
# Absolute links: qemu resolves them on the host.  An empty ld.so.cache, or
# qemu hands the loader the build machine's, which lists the host's
# multiarch libraries.
mkdir -p "$out.new/usr/lib/$triplet" "$out.new/etc"
for f in "$cross_lib"/*.so.*; do
    [ -e "$out.new/usr/lib/$triplet/${f##*/}" ] || ln -s "$f" "$out.new/usr/lib/$triplet/${f##*/}"
done
for f in "$cross_lib"/ld-linux*.so.*; do
    [ -e "$out.new/usr/lib/${f##*/}" ] || ln -s "$triplet/${f##*/}" "$out.new/usr/lib/${f##*/}"
done
: >"$out.new/etc/ld.so.cache"
dangling=$(find "$out.new/usr/lib" -xtype l)
if [ -n "$dangling" ]; then
    echo "sysroot.sh: dangling library links in $out.new:" >&2
    echo "$dangling" | sed 's/^/  /' >&2
    exit 1
fi

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
