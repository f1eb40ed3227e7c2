#!/usr/bin/env bash
# store_backend.sh SRCDIR - nothing outside the store branches on which
# backend it is (issue 34): the daemon and the commands ask the store what
# it does (pt_store_caps, pt_config_store_caps: PT_STORE_CAP_* in
# core/store.h), so that a new backend is its own files and its bits.
# Fails on any use, in firmware/ and platform/ and in core/ outside the
# store (core/store*.[ch], and core/config.[ch], which map the
# configuration to the store's options), of
#   * the backend enum's values (PT_STORE_SQLITE, PT_STORE_POSTGRESQL) or
#     the options' .backend field;
#   * the configuration's store_postgresql, except in firmware/config_load.c,
#     which reads store.backend and checks the keys that go with it;
#   * pt_store_backend() anywhere but on the line of a log or printf call:
#     the backend's name is for messages only.
# Prints every occurrence, FILE:LINE: TEXT.
set -euo pipefail
SRC=${1:?usage: $0 SRCDIR}
cd "$SRC"
files=$(find core firmware platform \( -name '*.c' -o -name '*.h' \) |
    grep -v -e '^core/store[^/]*\.[ch]$' -e '^core/config\.[ch]$' | sort)
[ "$(wc -w <<<"$files")" -ge 50 ] || { echo "store_backend: too few sources under $SRC" >&2; exit 1; }
found=$(for f in $files; do
    grep -Hn -E 'PT_STORE_(SQLITE|POSTGRESQL)\b|(\.|->)backend *(==|!=|=)' "$f" || true
    [ "$f" = firmware/config_load.c ] || grep -Hn -E '\bstore_postgresql\b' "$f" || true
    grep -Hn -E 'pt_store_backend\(' "$f" | grep -v -E 'pt_log_[a-z]+\(|printf\(' || true
done)
if [ -n "$found" ]; then
    echo "store_backend: branches on the store's backend outside the store (ask pt_store_caps):"
    echo "$found"
    exit 1
fi
echo "store_backend: $(wc -w <<<"$files") sources, no branch on the backend's name"
