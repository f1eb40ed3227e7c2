#!/usr/bin/env bash
# payment_codes.sh PAYTERM - a customer's payment code is kept only while a
# send may still need it (SPEC section 3), and every file payterm creates is
# 0600 whatever the umask (SPEC section 11):
#   * barcode charges that end every way - paid online, paid from the offline
#     queue, declined, canceled in the queue, reversed after
#     barcode_timeout_s - each with its own code;
#   * while one is still PENDING its code is in the database (it may be
#     needed for a resend);
#   * once they are final and the daemon has checkpointed, the digits of
#     every code appear in no byte of any file under data_dir, nor in a
#     backup taken after that, nor in the daemon's log;
#   * the database, its -wal and -shm, the backup are mode 0600 although the
#     daemon runs with umask 022;
#   * a daemon SIGKILLed right after a charge became final wipes the WAL
#     when it starts again.
. "$(dirname "$0")/synclib.sh" "$@"
umask 022
cat >"$T/extra.json" <<'JSON'
{"gateways": {"alipay": {"barcode_timeout_s": 5}}}
JSON
sync_start "$T/extra.json"

# 18-digit Alipay codes (25-30 prefix), one per charge.
code_of() { printf '2876344382566%05d' "$1"; }
barcode() { # barcode N AMOUNT [extra fields]
    printf '"amount":%d,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"%s","subject":"Latte"%s' \
        "$2" "$(code_of "$1")" "${3:-}"
}
# hits CODE FILE...: how many of the files hold CODE somewhere in their bytes.
hits() {
    local code=$1 n=0 f
    shift
    for f in "$@"; do
        [ -f "$f" ] || continue
        if grep -qaF "$code" "$f"; then n=$((n + 1)); fi
    done
    echo "$n"
}
data_files() { find "$T/data" -type f; }

charge k-pc-1 PC-ONLINE "$(barcode 1 1200)"
expect "PC-ONLINE" 201 "$ST"
charge k-pc-2 PC-DECLINED "$(barcode 2 1251)"
expect "PC-DECLINED" 402 "$ST"
# The link is down while two are queued; one of them is canceled there.
sim_fault '{"gateway":"alipay","mode":"refuse_connect","count":-1}'
charge k-pc-3 PC-QUEUED "$(barcode 3 1300)"
expect "PC-QUEUED" 202 "$ST"
expect "PC-QUEUED state" INIT "$(field .state)"
charge k-pc-4 PC-CANCELED "$(barcode 4 1400)"
expect "PC-CANCELED" 202 "$ST"
cancel c-pc-4 PC-CANCELED
expect "PC-CANCELED cancel" 200 "$ST"
sim_clear
wait_state PC-QUEUED SUCCESS 20
charge k-pc-5 PC-WAIT "$(barcode 5 1252)"
expect "PC-WAIT" 202 "$ST"
expect "PC-WAIT state" PENDING "$(field .state)"
log "charges paid, declined, queued and paid, canceled, waiting for the customer"

# Still waiting: its code may be needed for a resend and is kept.
# shellcheck disable=SC2046
[ "$(hits "$(code_of 5)" $(data_files))" -ge 1 ] ||
    fail "PC-WAIT is PENDING but its payment code is in no file: it could not be resent"
wait_state PC-WAIT CANCELED 20
log "PC-WAIT reversed after barcode_timeout_s"

# Every charge is final now; the daemon checkpoints (and truncates the WAL)
# within a few seconds of the last erasure.
gone() {
    local i f
    for i in 1 2 3 4 5; do
        # shellcheck disable=SC2046
        [ "$(hits "$(code_of "$i")" $(data_files))" = 0 ] || return 1
    done
}
wait_until 20 gone || {
    for i in 1 2 3 4 5; do
        for f in $(data_files); do
            grep -qaF "$(code_of "$i")" "$f" && log "payment code $i still in $f ($(stat -c %s "$f") bytes)"
        done
    done
    fail "payment codes of final charges are still in the files under data_dir"
}
log "no payment code in any file under data_dir"
for f in "$T/data/payterm.db" "$T/data/payterm.db-wal" "$T/data/payterm.db-shm"; do
    [ -f "$f" ] || continue
    expect "mode of $(basename "$f")" 600 "$(stat -c %a "$f")"
done

"$PAYTERM" backup -c "$T/base.json" "$T/backup.db" >"$T/backup.log" 2>&1 || fail "payterm backup: $(cat "$T/backup.log")"
expect "mode of the backup" 600 "$(stat -c %a "$T/backup.db")"
for i in 1 2 3 4 5; do
    expect "payment code $i in the backup" 0 "$(hits "$(code_of "$i")" "$T/backup.db")"
    expect "payment code $i in the daemon's log" 0 "$(hits "$(code_of "$i")" "$T"/payterm.*.log)"
done
# The charges themselves are all there, final.
expect "charges in the backup" 5 "$(sqlite3 "$T/backup.db" "SELECT count(*) FROM charges WHERE state IN ('SUCCESS','FAILED','CANCELED')")"
expect "payment codes left in the backup's rows" 0 "$(sqlite3 "$T/backup.db" "SELECT count(*) FROM charges WHERE payment_code IS NOT NULL")"
# A retry of a paid order under another key with the same parameters still
# gets the charge (the code is gone, the other parameters decide).
charge k-pc-1-again PC-ONLINE "$(barcode 1 1200)"
expect "PC-ONLINE under another key, same parameters" 200 "$ST"
expect "PC-ONLINE state in that answer" SUCCESS "$(field .state)"
expect_captured_once PC-ONLINE

# A daemon killed right after a charge became final (inside the 5 s between
# two truncating checkpoints) wipes the WAL when it starts again.
charge k-pc-6 PC-KILL-1 "$(barcode 6 1200)"
expect "PC-KILL-1" 201 "$ST"
charge k-pc-7 PC-KILL-2 "$(barcode 7 1200)"
expect "PC-KILL-2" 201 "$ST"
daemon_kill KILL
daemon_restart
gone_after_kill() {
    # shellcheck disable=SC2046
    [ "$(hits "$(code_of 6)" $(data_files))" = 0 ] && [ "$(hits "$(code_of 7)" $(data_files))" = 0 ]
}
wait_until 15 gone_after_kill || fail "payment codes survived a SIGKILL and a restart in the files under data_dir"
log "payment codes gone after a SIGKILL and a restart"
pass
