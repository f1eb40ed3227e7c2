#!/usr/bin/env bash
# test_vanish.sh - the database must not vanish under the daemon (SPEC 18).
#
# While payterm serve runs, its database or the database's WAL is unlinked,
# or another file is moved over the database (a backup restored in place):
# from then on every write answers 503 storage_unavailable, /healthz is 503,
# /v1/status says why, and the log names the file - nothing is acknowledged
# into a file that is gone.
source "$(dirname "$0")/lib.sh"

DB_NAME=payterm.db

# run_cmd ARGS... - payterm with a 20 s ceiling; sets RC and OUT.
run_cmd()
{
    OUT=$(timeout 20 "$PAYTERM" "$@" 2>&1)
    RC=$?
    [ "$RC" -ne 124 ] || fail "payterm $* did not end within 20 s (it started serving?)"
}

# storage_gone FILE WORD - what a running daemon answers once FILE is no
# longer its file: a new charge 503 storage_unavailable, /healthz 503,
# /v1/status with the reason, and the log line naming FILE and WORD
# ("removed", "replaced").
storage_gone()
{
    local file=$1 word=$2 order=gone-$RANDOM
    pt_post /v1/charges "$order-key" "$(charge_body "$order")"
    expect_error 503 storage_unavailable
    pt_get /healthz
    expect_status 503
    expect_json .status storage_unavailable
    pt_get /v1/status
    expect_status 200
    expect_json .storage.writable false
    expect_json "(.storage.reason | contains(\"$word\"))" true
    expect_eq 0 "$(pt_metrics payterm_storage_writable)" "payterm_storage_writable"
    grep -F "$file" "$PT_LOG" | grep -q "$word" ||
        fail "the log does not name $file as $word: $(tail -n 5 "$PT_LOG")"
    # The sync engine and a retry change nothing either: still 503.
    pt_post /v1/charges "$order-key" "$(charge_body "$order")"
    expect_error 503 storage_unavailable
}

case_database_unlinked()
{
    rm -rf "$PT_TMP/data"
    pt_config .
    pt_start
    pt_post /v1/charges before-key "$(charge_body before)"
    expect_status 202
    rm -f "$PT_TMP/data/$DB_NAME"
    storage_gone "$PT_TMP/data/$DB_NAME" removed
    # A replay of a charge answered before is no answer from a file that
    # is gone either.
    pt_post /v1/charges before-key "$(charge_body before)"
    expect_error 503 storage_unavailable
    pt_stop
}

case_wal_unlinked()
{
    rm -rf "$PT_TMP/data"
    pt_config .
    pt_start
    pt_post /v1/charges wal-before-key "$(charge_body wal-before)"
    expect_status 202
    rm -f "$PT_TMP/data/$DB_NAME-wal"
    storage_gone "$PT_TMP/data/$DB_NAME-wal" removed
    # What the removed WAL held was answered: it is copied into the
    # database file, so that not even a SIGKILL (a power cut) takes it.
    grep -q "WAL that was removed is copied into $PT_TMP/data/$DB_NAME" "$PT_LOG" ||
        fail "the removed WAL was not copied into the database: $(tail -n 5 "$PT_LOG")"
    pt_kill9
    pt_start
    pt_get /v1/charges/wal-before
    expect_status 200
    pt_post /v1/charges wal-after-key "$(charge_body wal-after)"
    expect_status 202
    pt_stop
}

case_database_replaced()
{
    rm -rf "$PT_TMP/data"
    pt_config .
    pt_start
    pt_post /v1/charges old-key "$(charge_body old)"
    expect_status 202
    # A copy taken now, moved over the database while the daemon runs.
    run_cmd backup -c "$PT_CFG" "$PT_TMP/copy.db"
    expect_eq 0 "$RC" "payterm backup: $OUT"
    mv "$PT_TMP/copy.db" "$PT_TMP/data/$DB_NAME"
    storage_gone "$PT_TMP/data/$DB_NAME" replaced
    pt_stop
}

pt_init

pt_case "the database unlinked under serve: writes and replays 503, /healthz 503, the log names it" \
    case_database_unlinked
pt_case "the WAL unlinked under serve: writes 503, /healthz 503, the log names it; what it held survives a SIGKILL" \
    case_wal_unlinked
pt_case "another file moved over the database under serve: writes 503, /healthz 503, the log names it" \
    case_database_replaced

pt_done
