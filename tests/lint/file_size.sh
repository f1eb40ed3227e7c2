#!/usr/bin/env bash
# file_size.sh SRCDIR - no product C file is over 1 500 lines (issue 34):
# a file that grows past it holds two things; split it by what they are.
# Counts every .c under core/, firmware/ and platform/; prints each one
# over, FILE: LINES.
set -euo pipefail
SRC=${1:?usage: $0 SRCDIR}
MAX=1500
cd "$SRC"
files=$(find core firmware platform -name '*.c' | sort)
[ "$(wc -w <<<"$files")" -ge 50 ] || { echo "file_size: too few sources under $SRC" >&2; exit 1; }
over=$(for f in $files; do
    n=$(wc -l <"$f")
    [ "$n" -le "$MAX" ] || echo "$f: $n lines"
done)
if [ -n "$over" ]; then
    echo "file_size: product C files over $MAX lines:"
    echo "$over"
    exit 1
fi
largest=$(for f in $files; do echo "$(wc -l <"$f") $f"; done | sort -n | tail -1)
echo "file_size: $(wc -w <<<"$files") files, none over $MAX lines (largest: $largest)"
