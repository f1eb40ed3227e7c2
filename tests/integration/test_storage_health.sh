#!/usr/bin/env bash
# test_storage_health.sh - /healthz tells the truth about the disk (SPEC 5,
# "Input strictness and connection handling"): it is 503 whenever a charge
# would get 503 storage_unavailable, and 200 again once it would not; and
# so do /v1/status ("storage"), /metrics (payterm_storage_*) and the
# operator page's header, which reads /v1/status (SPEC 15, "health that
# tells the truth").
#
# A real full file system: a small tmpfs as data_dir, filled up with a file
# and emptied again.  Mounting needs root (CI runs as root); elsewhere the
# case is skipped, and tests/unit/test_intake.c covers the same with a disk
# that fails under SQLite.
source "$(dirname "$0")/lib.sh"

# fill_up FILE - writes FILE until the file system has no room left.
fill_up()
{
    dd if=/dev/zero of="$1" bs=64k 2>/dev/null
    [ "$(df --output=avail -B1 "$(dirname "$1")" | tail -n 1)" -lt 65536 ] ||
        fail "the file system is not full after writing $1"
}

# expect_storage WRITABLE [REASON] - /v1/status and /metrics agree on the
# storage: writable or not, the free bytes under data_dir (what df says,
# within 1 MiB: the daemon and df look at different moments), and why not.
expect_storage()
{
    local writable=$1 reason=${2:-} dir free
    dir=$(jq -r .data_dir "$PT_CFG")
    free=$(df --output=avail -B1 "$dir" | tail -n 1)
    pt_get /v1/status
    expect_status 200
    expect_json .storage.writable "$writable"
    expect_json '.storage.free_bytes | type' number
    expect_json "(.storage.free_bytes - $free) | fabs < 1048576" true
    if [ "$writable" = true ]; then
        expect_json '.storage | has("reason")' false
    else
        expect_json .storage.reason "$reason"
    fi
    local m
    mapfile -t m < <(pt_metrics payterm_storage_writable payterm_storage_free_bytes)
    expect_eq "$([ "$writable" = true ] && echo 1 || echo 0)" "${m[0]}" "payterm_storage_writable"
    [ -n "${m[1]}" ] && [ $((${m[1]} - free)) -lt 1048576 ] && [ $((free - ${m[1]})) -lt 1048576 ] ||
        fail "payterm_storage_free_bytes is '${m[1]}', df says $free"
}

# page_header_says TEXT - the operator page, in Chromium, shows TEXT in its
# header (where it says online or offline).
page_header_says()
{
    command -v chromium >/dev/null || fail "chromium is needed (scripts/deps.sh installs it)"
    cat >"$PT_TMP/page.steps" <<STEPS
open $PT_URL/
wait document.getElementById('version').textContent !== '' 30
wait document.getElementById('online').textContent.includes('$1') 10
expect document.getElementById('online').className "off"
STEPS
    "$PT_PYTHON" "$PT_DIR/browser.py" "$PT_TMP/page.steps" >"$PT_TMP/page.log" 2>&1 ||
        fail "the operator page's header does not say '$1': $(tail -n 8 "$PT_TMP/page.log")"
}

case_full_disk()
{
    local small=$PT_TMP/small body
    pt_mount_tmpfs "$small" 8m
    pt_config ".data_dir = \"$small/data\""
    pt_start
    pt_post /v1/charges disk-before "$(charge_body disk-before)"
    expect_status 202
    pt_get /healthz
    expect_status 200
    expect_storage true

    fill_up "$small/filler"
    # Before any charge meets the full disk, /healthz already says so.
    pt_get /healthz
    expect_status 503
    expect_storage false "disk full"
    page_header_says "disk full"
    body=$(charge_body disk-full)
    pt_post /v1/charges disk-full-key "$body"
    expect_error 503 storage_unavailable
    pt_get /healthz
    expect_status 503
    pt_get /healthz
    expect_status 503

    rm -f "$small/filler"
    pt_get /healthz
    expect_status 200
    expect_storage true
    # The key was released with the 503: the same request now goes through.
    pt_post /v1/charges disk-full-key "$body"
    expect_status 202
    expect_json .order_id disk-full
    pt_get /healthz
    expect_status 200
    pt_stop
}

# storage.wal_vfs = false: SQLite's own VFS instead of payterm's WAL VFS
# (the same bytes, more system calls; make crash proves both).  A charge is
# taken, survives a restart, and is replayed from its stored answer.
case_wal_vfs_off()
{
    pt_config '.storage = {wal_vfs: false}'
    pt_start
    pt_post /v1/charges vfs-off "$(charge_body vfs-off)"
    expect_status 202
    pt_save vfs-off
    pt_stop
    pt_start
    pt_post /v1/charges vfs-off "$(charge_body vfs-off)"
    expect_status 202
    expect_header Idempotency-Replayed true
    expect_same_bytes "$(pt_saved vfs-off)" "$PT_BODY_FILE" "the replay after the restart"
    pt_stop
    pt_config '.storage = {wal_vfs: "no"}'
    local out rc
    out=$(timeout 20 "$PAYTERM" serve -c "$PT_CFG_BASE" 2>&1)
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "serve accepted storage.wal_vfs \"no\" (exit $rc)"
    expect_contains "'storage.wal_vfs'" "$out"
}

pt_init

pt_case "storage.wal_vfs false: SQLite's own VFS, charges kept across a restart" case_wal_vfs_off
pt_case "full disk: /healthz 503 like the charge, and /v1/status, /metrics and the operator page say so; all well again once room is made" case_full_disk

pt_done
