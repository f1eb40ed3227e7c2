#!/bin/sh
# musl.sh - the libraries payterm links, built with musl-gcc from Debian's own
# source packages, for `make cross-musl` (SPEC 14: the board build is a musl
# build).
#
# usage: scripts/musl.sh            (prints the prefix it made or found)
#
# SQLite, mbed TLS, libcurl (with mbed TLS, nothing else), cJSON,
# libmicrohttpd, zlib and, for the unit tests, cmocka: `apt-get source` of
# bookworm's packages (the newest of bookworm, -updates and -security, so
# that Debian's security patches are in), unpacked with dpkg-source (which
# applies Debian's patches), configured the way Debian configures them where
# it matters (mbed TLS's threading, SQLite's compile-time options), built as
# static libraries with musl-gcc (Debian's musl-tools) into one prefix.
#
# apt runs with its own lists, cache and an empty dpkg status (no deb-src line
# is added to the machine's sources, no root needed), as scripts/sysroot.sh
# does.  Everything goes under a cache outside the work tree, so that a new
# clone (CI) reuses it:
#   $PT_MUSL_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/payterm-musl)
#     apt/              the private apt state and the downloaded sources
#     prefix-<key>/     the installed libraries; <key> is a checksum of how
#                       they are built (this script from "the build" on),
#                       musl-gcc's version and the source versions
# A prefix whose key matches is used as it is: a rebuild happens only when
# this script, musl or a source package changes (a Debian security update).
# Without a network the newest lists already fetched decide the key.
set -eu

cache=${PT_MUSL_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/payterm-musl}
jobs=${JOBS:-2}
srcpkgs="sqlite3 mbedtls curl cjson libmicrohttpd zlib cmocka"

for tool in musl-gcc apt-get dpkg-source cmake make tclsh flock; do
    command -v $tool >/dev/null || {
        echo "musl.sh: needs $tool (scripts/deps.sh musl installs it)" >&2
        exit 1
    }
done

mkdir -p "$cache"
# One build at a time per cache (two work trees running make cross-musl):
# the second waits, then finds the prefix the first made.
exec 9>"$cache/.lock"
flock 9

# ---- the private apt: bookworm's source indexes ----------------------------
# shellcheck disable=SC1091
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || codename=bookworm
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
main_uri=$(mirror debian)
main_uri=${main_uri:-http://deb.debian.org/debian}
sec_uri=$(mirror debian-security)
sec_uri=${sec_uri:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/state" "$apt/etc/parts" "$apt/src"
: >"$apt/status"
{
    opt=""
    [ -f "$keyring" ] && opt="[signed-by=$keyring] "
    echo "deb-src $opt$main_uri $codename main"
    echo "deb-src $opt$main_uri $codename-updates main"
    echo "deb-src $opt$sec_uri $codename-security main"
} >"$apt/etc/sources.list"
sandbox=""
[ "$(id -u)" -eq 0 ] && sandbox="-o APT::Sandbox::User=root"
aptopts="-o Dir::State=$apt/state -o Dir::State::Lists=$apt/lists
 -o Dir::State::status=$apt/status -o Dir::Cache=$apt -o Dir::Cache::archives=$apt/archives
 -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
 -o Dir::Etc::SourceList=$apt/etc/sources.list -o Dir::Etc::SourceParts=$apt/etc/parts
 -o Debug::NoLocking=true -o Acquire::Languages=none $sandbox"

have_lists() { ls "$apt/lists/"*"_dists_${codename}_main_source_Sources"* >/dev/null 2>&1; }
updated=0
for try in 1 2 3; do
    # shellcheck disable=SC2086
    if apt-get $aptopts -qq update 2>"$apt/update.err"; then
        updated=1
        break
    fi
    [ "$try" -lt 3 ] && sleep 5
done
if [ "$updated" = 0 ]; then
    have_lists || {
        sed 's/^/  /' "$apt/update.err" >&2
        echo "musl.sh: cannot fetch $codename's source index from $main_uri" >&2
        exit 1
    }
    echo "musl.sh: apt-get update failed; using the source lists fetched before" >&2
fi

# PKG=VERSION's .dsc, where fetch puts it.
dsc_of() { echo "$apt/src/${1%%=*}_$(echo "${1#*=}" | sed 's/^[0-9]*://').dsc"; }
# The newest version of each source package among the suites whose source
# can be had: a mirror's security index can list a version whose files it
# does not serve yet (404), and then the one before it is built.  Without a
# network the newest listed decides (a cached prefix may still match it).
version_of() {
    first=""
    # shellcheck disable=SC2086
    for v in $(apt-cache $aptopts showsrc "$1" 2>/dev/null | awk '/^Version:/ { print $2 }' |
        sort -Vru); do
        [ -n "$first" ] || first=$v
        if [ -f "$(dsc_of "$1=$v")" ] ||
            (cd "$apt/src" && apt-get $aptopts -qq source --download-only "$1=$v") >/dev/null 2>&1; then
            echo "$v"
            return
        fi
        echo "musl.sh: $1 $v is listed but cannot be downloaded; trying the one before" >&2
    done
    echo "$first"
}
versions=""
for p in $srcpkgs; do
    v=$(version_of "$p")
    [ -n "$v" ] || { echo "musl.sh: no source package $p in $codename" >&2; exit 1; }
    versions="$versions $p=$v"
done
muslv=$(dpkg-query -W -f='${Version}' musl-dev 2>/dev/null || musl-gcc --version | head -n 1)
key=$( (sed -n '/^# ---- the build/,$p' "$0"; echo "$muslv$versions") | cksum | cut -d' ' -f1)
prefix=$cache/prefix-$key
if [ -f "$prefix/.done" ]; then
    echo "$prefix"
    exit 0
fi

echo "musl.sh: building the libraries with musl-gcc (musl $muslv):$versions" >&2
rm -rf "$prefix" "$prefix.build"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig" "$prefix.build"
build=$prefix.build

# fetch PKG=VERSION - the source package into $apt/src (once).
fetch() {
    if [ ! -f "$(dsc_of "$1")" ]; then
        # shellcheck disable=SC2086
        (cd "$apt/src" && apt-get $aptopts -qq source --download-only "$1") >&2
    fi
}
for pv in $versions; do
    fetch "$pv"
done

# unpack PKG=VERSION - sets SRC to the unpacked, patched tree.
unpack() {
    # The .dsc is checked against its files; its signature needs a keyring
    # of Debian's developers that this machine need not have.
    (cd "$build" && dpkg-source -q --no-check -x "$(dsc_of "$1")" "${1%%=*}" >/dev/null)
    SRC=$build/${1%%=*}
}

# ---- the build (this part of the script is in the cache key) ----------------

cflags="-Os -fno-strict-aliasing -ffunction-sections -fdata-sections"
export CC=musl-gcc AR=ar RANLIB=ranlib
export PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH=

t0=$(date +%s)
step() { echo "musl.sh: $* ($(($(date +%s) - t0)) s)" >&2; }

# build_one PKG=VERSION - one library, built and installed into the prefix.
build_one() {
    pv=$1
    p=${pv%%=*}
    unpack "$pv"
    case $p in
    mbedtls)
        # Debian's configuration of mbed TLS (debian/rules): threading on.
        (cd "$SRC" && python3 scripts/config.py set MBEDTLS_THREADING_C &&
            python3 scripts/config.py set MBEDTLS_THREADING_PTHREAD &&
            python3 scripts/config.py set MBEDTLS_CMAC_C &&
            make -s -j"$jobs" -C library CC=musl-gcc CFLAGS="$cflags" static >/dev/null &&
            cp -R include/mbedtls include/psa "$prefix/include/" &&
            cp library/libmbedtls.a library/libmbedx509.a library/libmbedcrypto.a "$prefix/lib/") >&2
        ;;
    sqlite3)
        # The amalgamation (tclsh makes it), compiled with Debian's options
        # (debian/rules) less the loadable extensions: a static binary has no
        # dlopen.  ($cflags is several flags.)
        # shellcheck disable=SC2086
        (cd "$SRC" && mkdir -p bld && cd bld &&
            ../configure -q --disable-tcl --disable-readline --disable-shared --enable-static \
                --disable-load-extension >/dev/null &&
            make -s sqlite3.c >/dev/null &&
            musl-gcc $cflags -DSQLITE_SECURE_DELETE -DSQLITE_ENABLE_COLUMN_METADATA \
                -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_RTREE=1 \
                -DSQLITE_SOUNDEX=1 -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_ENABLE_DBSTAT_VTAB \
                -DSQLITE_ALLOW_ROWID_IN_VIEW -DSQLITE_ENABLE_UPDATE_DELETE_LIMIT=1 \
                -DSQLITE_ENABLE_JSON1 -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_THREADSAFE=1 \
                -DSQLITE_USE_URI=1 -DSQLITE_MAX_SCHEMA_RETRY=25 -DSQLITE_ENABLE_PREUPDATE_HOOK \
                -DSQLITE_ENABLE_SESSION -DSQLITE_ENABLE_STMTVTAB \
                -DSQLITE_MAX_VARIABLE_NUMBER=250000 -DSQLITE_OMIT_LOAD_EXTENSION \
                -c sqlite3.c -o sqlite3.o &&
            ar rcs "$prefix/lib/libsqlite3.a" sqlite3.o &&
            cp sqlite3.h sqlite3ext.h "$prefix/include/") >&2
        sv=$(sed -n 's/^#define SQLITE_VERSION *"\(.*\)"/\1/p' "$prefix/include/sqlite3.h")
        cat >"$prefix/lib/pkgconfig/sqlite3.pc" <<EOF
prefix=$prefix
Name: SQLite
Description: SQL database engine ($pv, musl)
Version: $sv
Libs: -L\${prefix}/lib -lsqlite3
Cflags: -I\${prefix}/include
EOF
        ;;
    cjson | cmocka)
        (cd "$SRC" && cmake -S . -B bld -DCMAKE_C_COMPILER=musl-gcc -DCMAKE_BUILD_TYPE=MinSizeRel \
            -DCMAKE_C_FLAGS="$cflags" -DCMAKE_INSTALL_PREFIX="$prefix" \
            -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=OFF -DBUILD_SHARED_AND_STATIC_LIBS=OFF \
            -DENABLE_CJSON_TEST=OFF -DENABLE_CJSON_UTILS=OFF -DENABLE_CUSTOM_COMPILER_FLAGS=OFF \
            -DWITH_STATIC_LIB=ON -DWITH_SHARED_LIB=OFF -DUNIT_TESTING=OFF -DWITH_EXAMPLES=OFF \
            --no-warn-unused-cli >/dev/null && cmake --build bld -j "$jobs" >/dev/null &&
            cmake --install bld >/dev/null) >&2
        # cmocka 1.1 builds a shared library beside libcmocka-static.a:
        # static only, under the name its pkg-config file links.
        if [ "$p" = cmocka ]; then
            rm -f "$prefix"/lib/libcmocka.so*
            mv "$prefix/lib/libcmocka-static.a" "$prefix/lib/libcmocka.a"
        fi
        ;;
    libmicrohttpd)
        # No HTTPS (the API listens on loopback), no libcurl-based tests.
        (cd "$SRC" && ./configure -q --prefix="$prefix" --disable-shared --enable-static \
            --disable-https --disable-curl --disable-doc --disable-examples --disable-nls \
            --without-gnutls CFLAGS="$cflags" >/dev/null &&
            make -s -j"$jobs" -C src/microhttpd >/dev/null &&
            make -s -C src/microhttpd install >/dev/null &&
            make -s -C src/include install >/dev/null &&
            make -s install-pkgconfigDATA >/dev/null) >&2
        ;;
    zlib)
        # Static, as Debian's own libz.a (Alipay's bill is a zip).
        (cd "$SRC" && CFLAGS="$cflags" ./configure --static --prefix="$prefix" >/dev/null &&
            make -s -j"$jobs" libz.a >/dev/null && make -s install >/dev/null) >&2
        ;;
    curl)
        # HTTPS through mbed TLS and nothing else payterm does not use.  The
        # threaded resolver as Debian builds it: musl's getaddrinfo needs no
        # NSS modules, so it works in a static binary.
        (cd "$SRC" && ./configure -q --prefix="$prefix" --disable-shared --enable-static \
            --with-mbedtls="$prefix" --without-openssl --without-gnutls --without-zlib \
            --without-brotli --without-zstd --without-libpsl --without-libidn2 \
            --without-nghttp2 --without-libssh2 --without-libssh --without-librtmp \
            --without-ca-bundle --without-ca-path --enable-threaded-resolver \
            --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
            --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp \
            --disable-gopher --disable-mqtt --disable-manual --disable-ftp --disable-file \
            --disable-ntlm --disable-alt-svc --disable-hsts --disable-cookies \
            CFLAGS="$cflags" CPPFLAGS="-I$prefix/include" LDFLAGS="-L$prefix/lib" >/dev/null &&
            make -s -j"$jobs" -C lib >/dev/null &&
            make -s -C lib install >/dev/null &&
            make -s -C include install >/dev/null &&
            make -s install-pkgconfigDATA >/dev/null) >&2
        ;;
    esac
    rm -rf "$SRC"
    step "$pv built"
}

# Two at a time: most of the time goes to configure scripts, which keep one
# core busy.  mbed TLS and then libcurl, which links it, here; the others
# in a subshell beside them.  The script waits for it whatever happens.
first=""
rest=""
for pv in $versions; do
    case $pv in
    mbedtls=* | curl=*) first="$first $pv" ;;
    *) rest="$rest $pv" ;;
    esac
done
(for pv in $rest; do build_one "$pv"; done) &
beside=$!
trap 'wait $beside 2>/dev/null' EXIT
for pv in $first; do
    build_one "$pv"
done
wait $beside || { echo "musl.sh: building$rest failed (above)" >&2; exit 1; }
trap - EXIT

# The .pc files name the prefix relative to themselves: the cache can move.
for pc in "$prefix"/lib/pkgconfig/*.pc; do
    sed -i "s|$prefix|\${pcfiledir}/../..|g" "$pc"
done
echo "$versions" | tr ' ' '\n' | sed '/^$/d' >"$prefix/PACKAGES"
rm -rf "$build"
: >"$prefix/.done"
step "made $prefix"
echo "$prefix"
