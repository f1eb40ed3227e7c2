#!/bin/sh
# version_agrees.sh SRCDIR PAYTERM BUILDDIR - the version in one place (SPEC
# 14): VERSION holds it, and these must all say the same:
#   * `payterm version` (PT_VERSION, from VERSION through cmake/config.h.in)
#   * the man pages generated in BUILDDIR/docs/man (their .TH line)
#   * the .deb CPack would make from BUILDDIR (CPackConfig.cmake)
#   * PAYTERM_VERSION in the Buildroot package (firmware/board/buildroot/.../payterm.mk)
#   * the newest release in CHANGELOG.md (## [X.Y.Z] - YYYY-MM-DD)
# Prints each source with what it says; fails naming every one that differs.
set -eu
SRC=${1:?usage: $0 SRCDIR PAYTERM BUILDDIR}
PAYTERM=${2:?usage: $0 SRCDIR PAYTERM BUILDDIR}
BUILD=${3:?usage: $0 SRCDIR PAYTERM BUILDDIR}

want=$(sed -n '1p' "$SRC/VERSION")
case "$want" in
'' | *[!0-9.]* | .* | *. | *..*) echo "version_agrees: VERSION holds '$want', not MAJOR.MINOR.PATCH" >&2; exit 1 ;;
esac
[ "$(wc -l <"$SRC/VERSION")" -le 1 ] || { echo "version_agrees: VERSION has more than one line" >&2; exit 1; }

bad=0
check() { # check WHAT VALUE
    if [ "$2" = "$want" ]; then
        printf 'version_agrees: %-48s %s\n' "$1" "$2"
    else
        printf 'version_agrees: %-48s %s   <- VERSION says %s\n' "$1" "${2:-(none)}" "$want" >&2
        bad=$((bad + 1))
    fi
}

# "payterm 0.2.0 (database schema 6)"
check "payterm version" "$("$PAYTERM" version | sed -n 's/^payterm \([^ ]*\) .*/\1/p')"
# .TH PAYTERM 8 2026-12-01 "payterm 0.2.0" "System Manager's Manual"
for page in payterm.8 payterm.json.5; do
    f=$BUILD/docs/man/$page
    [ -f "$f" ] || { echo "version_agrees: $f is missing (not built?)" >&2; bad=$((bad + 1)); continue; }
    check "man page $page" "$(sed -n 's/^\.TH [^ ]* [0-9] [^ ]* "payterm \([^"]*\)".*/\1/p' "$f")"
done
if [ -f "$BUILD/CPackConfig.cmake" ]; then
    check ".deb (CPACK_PACKAGE_VERSION)" \
        "$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\([^"]*\)")$/\1/p' "$BUILD/CPackConfig.cmake")"
else
    echo "version_agrees: $BUILD/CPackConfig.cmake is missing" >&2
    bad=$((bad + 1))
fi
# The BR2_EXTERNAL tree's package (firmware/board/buildroot/package/payterm).
mk=$(find "$SRC/firmware/board/buildroot" -name payterm.mk | sort | head -n 1)
if [ -n "$mk" ]; then
    check "${mk#"$SRC"/}" "$(sed -n 's/^PAYTERM_VERSION *= *\([^ ]*\) *$/\1/p' "$mk")"
else
    echo "version_agrees: no payterm.mk under firmware/board/buildroot" >&2
    bad=$((bad + 1))
fi
# The first "## [X]" heading that is not [Unreleased] is the newest release.
check "CHANGELOG.md newest release" \
    "$(sed -n 's/^## \[\([0-9][^]]*\)\] - [0-9-]*.*$/\1/p' "$SRC/CHANGELOG.md" | head -n 1)"

if [ "$bad" -ne 0 ]; then
    echo "version_agrees: $bad of them differ from VERSION ($want)" >&2
    exit 1
fi
echo "version_agrees: all agree on $want"
