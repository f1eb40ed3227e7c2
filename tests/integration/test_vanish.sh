#!/usr/bin/env bash
# test_vanish.sh - the database must not vanish under the daemon (SPEC 18).
#
# While payterm serve runs, its database or the database's WAL is unlinked,
# or another file is moved over the database (a backup restored in place):
# from then on every write answers 503 storage_unavailable, /healthz is 503,
# /v1/status says why, and the log names the file - nothing is acknowledged
# into a file that is gone.  At start, a data_dir that held a database
# (payterm.marker beside it) refuses a missing or empty one - serve and init
# alike, since systemd runs init before serve - until `payterm init
# --new-database` says a new one is wanted.
source "$(dirname "$0")/lib.sh"

DB_NAME=payterm.db

# run_cmd ARGS... - payterm with a 20 s ceiling; sets RC and OUT.
run_cmd()
{
    OUT=$(timeout 20 "$PAYTERM" "$@" 2>&1)
    RC=$?
    [ "$RC" -ne 124 ] || fail "payterm $* did not end within 20 s (it started serving?)"
}

# serve_once - payterm serve on the base config, expected to refuse at
# once; sets RC and OUT.
serve_once()
{
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    run_cmd serve -c "$PT_CFG"
}

# refused_at_start WHAT - serve and init both exit 1, naming the database
# and the command that allows a new one; nothing is created at the path.
refused_at_start()
{
    local what=$1 db=$PT_TMP/data/$DB_NAME size_before
    size_before=$(stat -c %s "$db" 2>/dev/null || echo none)
    serve_once
    expect_eq 1 "$RC" "exit status of payterm serve on $what; it printed: $OUT"
    expect_contains "$db" "$OUT" "what serve printed on $what"
    expect_contains "payterm init --new-database" "$OUT" "what serve printed on $what"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 1 "$RC" "exit status of payterm init on $what; it printed: $OUT"
    expect_contains "$db" "$OUT" "what init printed on $what"
    expect_contains "payterm init --new-database" "$OUT" "what init printed on $what"
    expect_eq "$size_before" "$(stat -c %s "$db" 2>/dev/null || echo none)" \
        "the size of $db after the refusals"
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
    # Not started afresh on the missing file.
    refused_at_start "a data_dir whose database was removed"
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

case_marker_and_new_database()
{
    local db=$PT_TMP/data/$DB_NAME marker=$PT_TMP/data/payterm.marker
    rm -rf "$PT_TMP/data"
    pt_config .
    # A fresh data_dir starts as ever, and gets its marker.
    pt_start
    [ -f "$marker" ] || fail "no $marker after the first start"
    expect_eq 600 "$(stat -c %a "$marker")" "mode of $marker"
    pt_post /v1/charges kept-key "$(charge_body kept)"
    expect_status 202
    pt_stop
    # The database deleted while payterm was stopped.
    rm -f "$db" "$db-wal" "$db-shm"
    refused_at_start "a missing database"
    [ ! -e "$db" ] || fail "the refusals created $db"
    # An empty file where the database was.
    : >"$db"
    refused_at_start "an empty database file"
    # Asked for: a new database (init says what it did), then serve starts.
    # A WAL the old database left (a SIGKILL, a power cut) is not read as
    # the new one's: it is moved aside, kept.
    printf 'the old WAL' >"$db-wal"
    run_cmd init --new-database -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init --new-database: $OUT"
    expect_contains "$db" "$OUT" "what init --new-database printed"
    expect_contains "$db-wal.orphaned-" "$OUT" "what init --new-database printed"
    expect_eq "the old WAL" "$(cat "$db"-wal.orphaned-*)" "the WAL moved aside"
    pt_start
    pt_get /v1/charges/kept
    expect_error 404 not_found
    pt_post /v1/charges new-key "$(charge_body new)"
    expect_status 202
    # --new-database never replaces a database that holds data, and is
    # refused while a daemon runs on the data_dir.
    run_cmd init --new-database -c "$PT_CFG_BASE"
    expect_eq 1 "$RC" "payterm init --new-database while serve runs: $OUT"
    expect_contains "PID $PT_PID" "$OUT" "what init --new-database printed while serve runs"
    pt_stop
    run_cmd init --new-database -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init --new-database on a database that holds data: $OUT"
    pt_start
    pt_get /v1/charges/new
    expect_status 200
    pt_stop
}

# A database an older payterm created has no marker: it is kept and
# marked at the next start.
case_database_without_marker()
{
    local db=$PT_TMP/data/$DB_NAME marker=$PT_TMP/data/payterm.marker
    rm -rf "$PT_TMP/data"
    pt_config .
    pt_start
    pt_post /v1/charges old-payterm-key "$(charge_body old-payterm)"
    expect_status 202
    pt_stop
    rm -f "$marker"
    pt_start
    [ -f "$marker" ] || fail "no $marker after a start on an unmarked database"
    pt_get /v1/charges/old-payterm
    expect_status 200
    pt_stop
}

# A marker that cannot be written (here: a directory where its temporary
# file goes; on a board, a full disk at an upgrade) is warned of, and the
# lane starts as it did before there were markers.
case_marker_not_written()
{
    local data=$PT_TMP/data
    rm -rf "$data"
    pt_config .
    pt_start
    pt_stop
    rm -f "$data/payterm.marker"
    mkdir "$data/payterm.marker.tmp"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init when the marker cannot be written: $OUT"
    expect_contains "$data/payterm.marker" "$OUT" "what init printed"
    pt_start
    grep -q "$data/payterm.marker.*will not be refused" "$PT_LOG" ||
        fail "serve did not warn of the marker: $(tail -n 5 "$PT_LOG")"
    pt_post /v1/charges unmarked-key "$(charge_body unmarked)"
    expect_status 202
    pt_stop
    rmdir "$data/payterm.marker.tmp"
}

pt_init

pt_case "the database unlinked under serve: writes and replays 503, /healthz 503, the log names it; no fresh start" \
    case_database_unlinked
pt_case "the WAL unlinked under serve: writes 503, /healthz 503, the log names it; what it held survives a SIGKILL" \
    case_wal_unlinked
pt_case "another file moved over the database under serve: writes 503, /healthz 503, the log names it" \
    case_database_replaced
pt_case "a marked data_dir refuses a missing or empty database until payterm init --new-database" \
    case_marker_and_new_database
pt_case "a database without a marker (an older payterm's) starts and is marked" \
    case_database_without_marker
pt_case "a marker that cannot be written is a warning, not a lane that does not start" \
    case_marker_not_written

pt_done
