#!/usr/bin/env bash
# test_dist.sh SRCDIR - a release a board can fetch (SPEC 14):
#
#   * `make dist` (scripts/dist.sh) makes payterm-VERSION.tar.gz of a commit
#     reproducibly: the same bytes whatever the time, the umask, the time
#     zone or git's tar.umask, every entry under payterm-VERSION/ with the
#     commit's time, committed files only;
#   * the Buildroot package's payterm.hash holds the sha256 of the tarball
#     of the release its payterm.mk names: the tarball is made again from
#     the commit the hash file names (the tag vVERSION's, when the clone has
#     the tag) and checked against payterm.hash the way Buildroot's
#     support/download/check-hash does (scripts/check-hash.sh), and the
#     package downloads that file, not a tarball GitHub generates;
#   * HEAD's tarball passes against a .hash made for it the way the release
#     steps make one, and the checker refuses what Buildroot refuses: a
#     changed byte (exit 2), no line for the file (exit 3, "No hash found"),
#     an unknown hash type (exit 4).
#
# Needs the git history (a clone; not a tarball's tree).  Prints "ok N -
# ..." / "not ok N - ..." per case and exits 1 if any failed.
set -u -o pipefail

SRC=$(cd "${1:?usage: $0 SRCDIR}" && pwd) || exit 2
T=$(mktemp -d "${TMPDIR:-/tmp}/payterm-test_dist.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
N=0
FAILED=0
PKG=$SRC/firmware/board/buildroot/package/payterm
HASH=$PKG/payterm.hash
CHECK=$SRC/scripts/check-hash.sh
DIST=$SRC/scripts/dist.sh

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
expect_eq() { [ "$1" == "$2" ] || fail "$3"$'\n'"  expected: $1"$'\n'"  actual:   $2"; }
run_case() { # run_case NAME FUNCTION
    N=$((N + 1))
    if (set -u; "$2"); then
        printf 'ok %d - %s\n' "$N" "$1"
    else
        printf 'not ok %d - %s\n' "$N" "$1"
        FAILED=$((FAILED + 1))
    fi
}

# check FILE BASENAME HASHFILE... - runs the checker; sets RC and OUT
# (stdout and stderr together).
check() { OUT=$("$CHECK" "$@" 2>&1); RC=$?; }

if ! git -C "$SRC" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    echo "ok 1 - make dist and the Buildroot hash # SKIP $SRC is not a git clone (a tarball's tree)"
    exit 0
fi
VERSION=$(head -n 1 "$SRC/VERSION")
HEAD=$(git -C "$SRC" rev-parse HEAD)

case_reproducible()
{
    local a=$T/a b=$T/b tgz when names
    (cd "$SRC" && umask 022 && TZ=UTC "$DIST" HEAD "$a") >"$T/a.out" 2>&1 ||
        fail "scripts/dist.sh failed: $(cat "$T/a.out")"
    sleep 1.1
    # Another umask, time zone and tar.umask, a second later.
    (cd "$SRC" && umask 077 && TZ=Asia/Shanghai GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=tar.umask \
        GIT_CONFIG_VALUE_0=0077 "$DIST" HEAD "$b") >"$T/b.out" 2>&1 ||
        fail "scripts/dist.sh failed: $(cat "$T/b.out")"
    tgz=payterm-$VERSION.tar.gz
    [ -f "$a/$tgz" ] || fail "no $tgz from scripts/dist.sh: $(ls "$a")"
    cmp -s "$a/$tgz" "$b/$tgz" || fail "two runs of scripts/dist.sh on one commit differ"
    expect_eq "sha256  $(sha256sum "$a/$tgz" | cut -d' ' -f1)  $tgz" "$(tail -n 1 "$T/a.out")" \
        "the hash line dist.sh prints"
    expect_eq "$HEAD" "$(gzip -dc "$a/$tgz" | git get-tar-commit-id)" "the commit in the pax header"
    # Every entry under payterm-VERSION/, with the commit's time, root's.
    when=$(git -C "$SRC" log -1 --format=%ct HEAD)
    gzip -dc "$a/$tgz" | tar -tv --full-time --numeric-owner -f - >"$T/list" ||
        fail "tar cannot list $tgz"
    names=$(awk '{ print $6 }' "$T/list" | grep -v "^payterm-$VERSION/" | head -n 3)
    expect_eq "" "$names" "entries outside payterm-$VERSION/"
    expect_eq "0/0" "$(awk '{ print $2 }' "$T/list" | sort -u | tr '\n' ' ' | sed 's/ $//')" \
        "owners in $tgz"
    expect_eq "$(TZ=UTC date -d "@$when" '+%Y-%m-%d %H:%M:%S')" \
        "$(awk '{ print $4, $5 }' "$T/list" | sort -u | tr '\n' ' ' | sed 's/ $//')" \
        "mtimes in $tgz (all the commit's time)"
    expect_eq "" "$(awk '$1 !~ /^(-rw-r--r--|-rwxr-xr-x|drwxr-xr-x|lrwxrwxrwx)$/' "$T/list" | head -n 3)" \
        "entries whose mode is not 0644, 0755 or a link"
    # Committed files only: the same list as git's, nothing of build/.
    expect_eq "$(git -C "$SRC" ls-tree -r --name-only HEAD | sort)" \
        "$(awk '$1 !~ /^d/ { sub("^payterm-'"$VERSION"'/", "", $6); print $6 }' "$T/list" | sort)" \
        "the files in $tgz (git ls-tree HEAD)"
    mkdir -p "$T/x"
    tar -xzf "$a/$tgz" -C "$T/x" || fail "cannot unpack $tgz"
    expect_eq "$VERSION" "$(cat "$T/x/payterm-$VERSION/VERSION")" "VERSION inside $tgz"
}

case_release_hash()
{
    local mkver site line commit tag tgz rel=$T/release
    [ -f "$HASH" ] || fail "no $HASH"
    mkver=$(sed -n 's/^PAYTERM_VERSION *= *\([^ ]*\) *$/\1/p' "$PKG/payterm.mk")
    [ -n "$mkver" ] || fail "no PAYTERM_VERSION in payterm.mk"
    tgz=payterm-$mkver.tar.gz
    # The file make dist made and the release page carries; GitHub's own
    # archive of a tag is generated on request and its bytes are not promised.
    site=$(sed -n 's/^PAYTERM_SITE *= *//p' "$PKG/payterm.mk")
    case "$site" in
    */releases/download/v'$(PAYTERM_VERSION)') ;;
    *) fail "PAYTERM_SITE is '$site', not the release page's download of the tarball make dist made" ;;
    esac
    grep -q '^PAYTERM_SOURCE' "$PKG/payterm.mk" &&
        fail "payterm.mk sets PAYTERM_SOURCE: the default payterm-\$(PAYTERM_VERSION).tar.gz is the name"
    line=$(grep -E "^sha256  [0-9a-f]{64}  $tgz\$" "$HASH") ||
        fail "$HASH has no 'sha256  <hex>  $tgz' line for the release payterm.mk names"
    # "# payterm-X.Y.Z.tar.gz: make dist of vX.Y.Z <commit>"
    commit=$(sed -n "s/^# $tgz: make dist of [^ ]* \([0-9a-f]\{40\}\)\$/\1/p" "$HASH")
    [ -n "$commit" ] || fail "$HASH does not say which commit $tgz was made of ('# $tgz: make dist of vX.Y.Z <commit>')"
    git -C "$SRC" cat-file -e "$commit^{commit}" 2>/dev/null ||
        fail "commit $commit, which $HASH names, is not in this clone"
    expect_eq "$mkver" "$(git -C "$SRC" show "$commit:VERSION")" "VERSION of commit $commit"
    tag=$(git -C "$SRC" rev-parse -q --verify "refs/tags/v$mkver^{commit}" || true)
    if [ -n "$tag" ]; then
        expect_eq "$commit" "$tag" "the commit of tag v$mkver"
    else
        echo "# no tag v$mkver in this clone: the commit $HASH names stands for it" >&2
    fi
    "$DIST" "$commit" "$rel" >"$T/rel.out" 2>&1 || fail "scripts/dist.sh $commit: $(cat "$T/rel.out")"
    check "$rel/$tgz" "$tgz" "$HASH"
    expect_eq 0 "$RC" "check-hash of $tgz (made of $commit) against $HASH: $OUT"
    # And the license file, which Buildroot checks at legal-info.
    mkdir -p "$rel/x"
    tar -xzf "$rel/$tgz" -C "$rel/x"
    check "$rel/x/payterm-$mkver/LICENSE" LICENSE "$HASH"
    expect_eq 0 "$RC" "check-hash of the release's LICENSE: $OUT"
}

case_head_and_refusals()
{
    local out=$T/head tgz=payterm-$VERSION.tar.gz gen=$T/gen.hash
    "$DIST" --hash HEAD "$out" >"$T/head.hash" 2>"$T/head.err" ||
        fail "scripts/dist.sh --hash: $(cat "$T/head.err")"
    # The package's .hash with HEAD's tarball in place of the release's:
    # what the release's follow-up commit writes (docs/buildroot.md).
    { grep -v "  payterm-[0-9.]*\.tar\.gz\$" "$HASH" | grep -v '^# payterm-[0-9.]*\.tar\.gz:'
      cat "$T/head.hash"; } >"$gen"
    check "$out/$tgz" "$tgz" "$gen"
    expect_eq 0 "$RC" "check-hash of HEAD's tarball against a .hash made for it: $OUT"
    case "$OUT" in *"$tgz: OK (sha256: "*) ;; *) fail "no OK line: $OUT" ;; esac

    # A changed byte: exit 2, like a broken download.
    cp "$out/$tgz" "$T/bad.tar.gz"
    printf 'X' | dd of="$T/bad.tar.gz" bs=1 seek=100 conv=notrunc status=none
    check "$T/bad.tar.gz" "$tgz" "$gen"
    expect_eq 2 "$RC" "exit status for a changed byte ($OUT)"
    case "$OUT" in *"has wrong sha256 hash"*) ;; *) fail "no 'wrong hash' message: $OUT" ;; esac

    # No line for the file: Buildroot's "No hash found", exit 3.
    grep -v "  $tgz\$" "$gen" >"$T/nohash"
    check "$out/$tgz" "$tgz" "$T/nohash"
    expect_eq 3 "$RC" "exit status without a line for $tgz ($OUT)"
    case "$OUT" in *"No hash found for $tgz"*) ;; *) fail "no 'No hash found': $OUT" ;; esac
    BR_NO_CHECK_HASH_FOR="other $tgz" check "$out/$tgz" "$tgz" "$T/nohash"
    expect_eq 0 "$RC" "exit status with $tgz in BR_NO_CHECK_HASH_FOR"

    # Every line for the file must match: a second, wrong one fails it.
    { cat "$gen"; echo "sha512  $(printf '0%.0s' $(seq 128))  $tgz"; } >"$T/two"
    check "$out/$tgz" "$tgz" "$T/two"
    expect_eq 2 "$RC" "exit status with a matching sha256 and a wrong sha512 ($OUT)"
    { cat "$gen"; echo "sha512  $(sha512sum "$out/$tgz" | cut -d' ' -f1)  $tgz"; } >"$T/two"
    check "$out/$tgz" "$tgz" "$T/two"
    expect_eq 0 "$RC" "exit status with a matching sha256 and sha512 ($OUT)"

    # A type Buildroot does not know: exit 4.
    { cat "$T/nohash"; echo "sha3  abcd  $tgz"; } >"$T/unknown"
    check "$out/$tgz" "$tgz" "$T/unknown"
    expect_eq 4 "$RC" "exit status for an unknown hash type ($OUT)"

    # No hash file at all: not checked (a warning, exit 0), as Buildroot.
    check "$out/$tgz" "$tgz" "$T/absent.hash"
    expect_eq 0 "$RC" "exit status without any hash file ($OUT)"
}

run_case "make dist: the same bytes every time, payterm-$VERSION/, the commit's time" \
    case_reproducible
run_case "payterm.hash holds the sha256 of the release tarball payterm.mk downloads" \
    case_release_hash
run_case "HEAD's tarball against its .hash; a changed byte, no line, unknown type refused" \
    case_head_and_refusals
echo "# $((N - FAILED)) passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
