#!/bin/sh
# check-hash.sh - checks a downloaded file against .hash files the way
# Buildroot does before it builds a package, so that the project's tests can
# hold the release tarball to the Buildroot package's payterm.hash
# (tests/package/test_dist.sh).  Written from Buildroot's manual ("The .hash
# file") and the documented exit codes of its support/download/check-hash.
#
# usage: scripts/check-hash.sh [-q] FILE BASENAME HASHFILE...
#   FILE      the file to check (a path)
#   BASENAME  the name it is saved under, which the hash lines name
#   HASHFILE  files of lines "TYPE  HEX  NAME" (two spaces; '#' comments
#             and empty lines ignored); TYPE is md5, sha1, sha224, sha256,
#             sha384 or sha512; every line naming BASENAME must match
#   -q        say nothing on stdout
#
# Exit status:
#   0  every hash naming BASENAME matches, or none of the HASHFILEs exists
#   1  bad usage
#   2  a hash does not match
#   3  a hash file exists, and no line names BASENAME ("No hash found")
#   4  a line naming BASENAME has a hash type Buildroot does not know
# Like Buildroot, BR_NO_CHECK_HASH_FOR (names separated by spaces) lets a
# file with no hash line through.
set -uf

if [ "${1:-}" = -q ]; then
    exec >/dev/null
    shift
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [-q] FILE BASENAME HASHFILE..." >&2
    exit 1
fi
file=$1
base=$2
shift 2

files=0
checks=0
for hashfile in "$@"; do
    [ -f "$hashfile" ] || continue
    files=$((files + 1))
    # "|| [ -n ... ]": a last line without its newline still counts.
    while IFS= read -r line || [ -n "$line" ]; do
        # Fields split on blanks, as a shell read does: "TYPE  HEX  NAME".
        # shellcheck disable=SC2086
        set -- $line
        type=${1:-}
        case "$type" in
        '' | '#'*) continue ;;
        esac
        [ "${3:-}" = "$base" ] || continue
        case "$type" in
        md5 | sha1 | sha224 | sha256 | sha384 | sha512) ;;
        *)
            echo "ERROR: unknown hash '$type' for '$base'" >&2
            exit 4
            ;;
        esac
        want=${2:-}
        got=$("${type}sum" "$file" | cut -d' ' -f1)
        if [ "$got" != "$want" ]; then
            echo "ERROR: while checking hashes from $hashfile" >&2
            echo "ERROR: $base has wrong $type hash:" >&2
            echo "ERROR: expected: $want" >&2
            echo "ERROR: got     : $got" >&2
            exit 2
        fi
        echo "$base: OK ($type: $got)"
        checks=$((checks + 1))
    done <"$hashfile"
done

if [ "$files" -eq 0 ]; then
    echo "WARNING: no hash file for $base" >&2
    exit 0
fi
if [ "$checks" -eq 0 ]; then
    case " ${BR_NO_CHECK_HASH_FOR:-} " in
    *" $base "*) exit 0 ;;
    esac
    echo "ERROR: No hash found for $base" >&2
    exit 3
fi
exit 0
