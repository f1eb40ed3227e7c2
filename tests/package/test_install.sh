#!/usr/bin/env bash
# test_install.sh BUILDDIR PAYTERM - what an integrator gets from this build
# (SPEC 14, issue 32 items 10d and 10e), without installing anything on the
# machine:
#
#   * `cmake --install BUILDDIR --prefix P` into a DESTDIR, for P = /usr and
#     /opt/payterm, whatever prefix the build was configured with: the
#     systemd unit lands where systemd looks for P (/lib/systemd/system for
#     /usr, P/lib/systemd/system otherwise) and its ExecCondition=,
#     ExecStartPre= and ExecStart= start P/bin/payterm, the BusyBox init
#     script starts P/bin/payterm, the binary is there, and no installed
#     text file names another prefix's binary;
#   * the .deb CPack makes of BUILDDIR (into a temporary directory): its
#     Depends holds libsqlite3-0 once, at least the SQLite version below
#     which PAYTERM refuses to open a database (the message it prints), and
#     its unit starts the binary it installs.
#
# Prints "ok N - ..." / "not ok N - ..." per case and exits 1 if any failed.
set -u -o pipefail

BUILD=$(cd "${1:?usage: $0 BUILDDIR PAYTERM}" && pwd) || exit 2
PAYTERM=${2:?usage: $0 BUILDDIR PAYTERM}
T=$(mktemp -d "${TMPDIR:-/tmp}/payterm-test_install.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
N=0
FAILED=0

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
expect_eq() { [ "$1" == "$2" ] || fail "$3"$'\n'"  expected: $1"$'\n'"  actual:   $2"; }
skip() { : >"$T/skip.$N"; printf '%s' "$*" >"$T/skip.$N"; exit 0; }
run_case() { # run_case NAME FUNCTION
    N=$((N + 1))
    if (set -u; "$2"); then
        if [ -e "$T/skip.$N" ]; then
            printf 'ok %d - %s # SKIP %s\n' "$N" "$1" "$(cat "$T/skip.$N")"
        else
            printf 'ok %d - %s\n' "$N" "$1"
        fi
    else
        printf 'not ok %d - %s\n' "$N" "$1"
        FAILED=$((FAILED + 1))
    fi
}

# unit_value FILE KEY - the value of KEY= in [Service] (the last one).
unit_value()
{
    awk -v key="$2" '
        /^\[/ { service = ($0 == "[Service]"); next }
        service && index($0, key "=") == 1 { v = substr($0, length(key) + 2) }
        END { print v }' "$1"
}

# installed_at PREFIX UNITDIR - cmake --install with --prefix PREFIX into a
# DESTDIR of its own; the unit must be in UNITDIR, the binary in PREFIX/bin.
installed_at()
{
    local prefix=$1 unitdir=$2 root=$T/root$(echo "$1" | tr / _) unit init out
    out=$(DESTDIR=$root cmake --install "$BUILD" --prefix "$prefix" 2>&1) ||
        fail "cmake --install $BUILD --prefix $prefix: $out"
    [ -x "$root$prefix/bin/payterm" ] || fail "no $prefix/bin/payterm in the DESTDIR"
    unit=$root$unitdir/payterm.service
    [ -f "$unit" ] || fail "the unit is not at $unitdir/payterm.service; installed units: $(cd "$root" && find . -name payterm.service)"
    expect_eq "$prefix/bin/payterm init --check-gateways -c /etc/payterm/payterm.json" \
        "$(unit_value "$unit" ExecCondition)" "ExecCondition= of the unit installed with --prefix $prefix"
    expect_eq "$prefix/bin/payterm init -c /etc/payterm/payterm.json" \
        "$(unit_value "$unit" ExecStartPre)" "ExecStartPre= of the unit installed with --prefix $prefix"
    expect_eq "$prefix/bin/payterm serve -c /etc/payterm/payterm.json" \
        "$(unit_value "$unit" ExecStart)" "ExecStart= of the unit installed with --prefix $prefix"
    init=$root$prefix/share/payterm/S80payterm
    [ -f "$init" ] || fail "no $prefix/share/payterm/S80payterm in the DESTDIR"
    expect_eq "PAYTERM_BIN=\"$prefix/bin/\$DAEMON\"" "$(grep '^PAYTERM_BIN=' "$init")" \
        "the BusyBox init script installed with --prefix $prefix"
    # No installed file that runs or configures it names the binary under
    # another prefix (the documentation may tell the story).
    local other
    other=$(grep -rIl --exclude-dir=doc -E '/usr(/local)?/bin/(payterm|\$DAEMON)' "$root" 2>/dev/null |
        xargs -r grep -IHn -E '/usr(/local)?/bin/(payterm|\$DAEMON)' | grep -v -F "$prefix/bin/" |
        head -5)
    [ -z "$other" ] || fail "installed with --prefix $prefix, these still name another prefix's binary:"$'\n'"$other"
}

case_prefix_usr() { installed_at /usr /lib/systemd/system; }
case_prefix_opt() { installed_at /opt/payterm /opt/payterm/lib/systemd/system; }

case_deb_depends()
{
    command -v cpack >/dev/null && command -v dpkg-deb >/dev/null &&
        command -v dpkg-shlibdeps >/dev/null || skip "needs cpack, dpkg-deb and dpkg-shlibdeps"
    [ -f "$BUILD/CPackConfig.cmake" ] || fail "no $BUILD/CPackConfig.cmake"
    local need out deb depends sqlite
    # What payterm itself refuses: "SQLite 3.x is too old: payterm needs X or newer".
    need=$(grep -ao 'payterm needs [0-9][0-9.]* or newer' "$PAYTERM" | head -1 | awk '{print $3}')
    [ -n "$need" ] || fail "$PAYTERM does not say which SQLite it needs"
    out=$(cd "$T" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$T/deb" 2>&1) ||
        fail "cpack: $out"
    deb=$(ls "$T"/deb/*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || fail "cpack made no .deb: $out"
    depends=$(dpkg-deb -f "$deb" Depends)
    sqlite=$(tr ',' '\n' <<<"$depends" | sed 's/^ *//' | grep '^libsqlite3-0')
    expect_eq "libsqlite3-0 (>= $need)" "$sqlite" \
        "the .deb's libsqlite3-0 dependency (payterm needs SQLite $need; Depends: $depends)"
    # And the unit in it starts the binary it installs.
    local unit start
    dpkg-deb -x "$deb" "$T/deb/root" || fail "dpkg-deb -x $deb"
    unit=$(cd "$T/deb/root" && find . -path '*/systemd/system/payterm.service' | head -1)
    [ -n "$unit" ] || fail "no payterm.service in $deb"
    start=$(unit_value "$T/deb/root/$unit" ExecStart)
    [ -x "$T/deb/root${start%% *}" ] || fail "the .deb's unit starts ${start%% *}, which it does not install"
}

run_case "cmake --install --prefix /usr: the unit in /lib/systemd/system starts /usr/bin/payterm, so does S80payterm" \
    case_prefix_usr
run_case "cmake --install --prefix /opt/payterm: the unit and S80payterm start /opt/payterm/bin/payterm" \
    case_prefix_opt
run_case "the .deb depends on the SQLite payterm needs, once" case_deb_depends

[ "$FAILED" -eq 0 ] || { echo "test_install: $FAILED of $N cases FAILED"; exit 1; }
echo "test_install: all $N cases passed"
