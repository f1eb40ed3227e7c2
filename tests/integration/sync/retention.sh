#!/usr/bin/env bash
# retention.sh PAYTERM - a year and more later (SPEC 19): what is closed,
# reconciled and older than retention_days leaves the live database for
# data_dir/archive/YYYY-MM.db, through the real daemon and simulator.  What
# the shop relies on: GET still answers for an archived charge and refund as
# they were; an archived order_id or refund_id is never used again (409
# naming it); a charge the day's close did not take stays; the archive is
# 0600 in a 0700 directory.
. "$(dirname "$0")/synclib.sh" "$@"

CLOCK=$T/clock
set_clock() { echo "$*" >"$CLOCK"; }
export PAYTERM_TEST_CLOCK_FILE=$CLOCK
set_clock "0 boot_id=boot-1 synced=1"

# Stripe's bill day is UTC: payments a minute before its midnight would be
# the next day's.
while [ "$(date -u +%H%M)" -ge 2358 ]; do sleep 5; done
DAY=$(date -u +%F) MONTH=$(date -u +%Y-%m)

echo '{"reconcile": {"daily": false}}' >"$T/extra.json"
sync_start "$T/extra.json"

post() { # post PATH KEY JSON -> ST, BODY (file)
    BODY=$T/post.json
    ST=$(curl -sS -o "$BODY" -w '%{http_code}' -X POST "$API$1" -H "Idempotency-Key: $2" \
        -H 'Content-Type: application/json' ${3:+-d "$3"})
}
paid() { # paid ORDER AMOUNT
    charge "k-$1" "$1" "$(stripe_card "$2")"
    wait_state "$1" SUCCESS 30
}
paid RET-A 1000
paid RET-B 2000
post /v1/charges/RET-A/refunds k-ret-a-r1 '{"refund_id":"RET-A-R1","amount":300}'
refund_paid() { [ "$(api /v1/refunds/RET-A-R1 | jq -r .state)" = SUCCESS ]; }
wait_until 60 refund_paid || fail "refund RET-A-R1 is not SUCCESS: $(api /v1/refunds/RET-A-R1)"
api /v1/charges/RET-A >"$T/a.before"
api /v1/refunds/RET-A-R1 >"$T/r.before"

post /v1/reports/z close-1
expect "the day's close" 201 "$ST"
paid RET-C 3000 # after the close: in no closed report
post /v1/charges/RET-C/refunds k-ret-c-r0 '{"refund_id":"RET-C-R0","amount":100}'
expect "a refund of RET-C" 201 "$ST" # the newest refund: RET-A-R1 may move

# The next day, Stripe's books of this one (a run during the day would not
# do: the day was not over).
set_clock "86400000 boot=86400000 boot_id=boot-1 synced=1" # a day passes for the board
sleep 0.5
post /v1/reconciliations recon-1 "{\"gateway\":\"stripe\",\"date\":\"$DAY\"}"
expect "the day's Stripe run ($(cat "$BODY"))" "201 done 5" "$ST $(jq -r '"\(.state) \(.matched)"' "$BODY")"
expect "the run began the next day" 1 \
    "$(jq -r --arg d "$DAY" 'if .run_at[0:10] > $d then 1 else 0 end' "$BODY")"

# ---- 401 days later ------------------------------------------------------------------
daemon_kill TERM
set_clock "$((401 * 86400000)) boot_id=boot-2 synced=1"
daemon_restart
moved() { [ "$(db_query "SELECT count(*) FROM archived")" = 3 ]; }
wait_until 30 moved || fail "retention did not move RET-A, its refund and RET-B: $(db_query "SELECT * FROM archived")"
expect "the ids kept, with their month" "charge RET-A $MONTH;charge RET-B $MONTH;refund RET-A-R1 $MONTH" \
    "$(db_query "SELECT group_concat(kind || ' ' || ext_id || ' ' || month, ';') FROM (SELECT * FROM archived ORDER BY 1, 2)")"
expect "no live row of RET-A" 0 "$(db_query "SELECT count(*) FROM charges WHERE order_id IN ('RET-A', 'RET-B')")"
expect "RET-C stays (no closed report)" SUCCESS "$(state RET-C)"
grep -q "retention: 2 charges older than 400 days moved" "$T"/payterm*.log ||
    fail "the pass is not logged: $(grep retention "$T"/payterm*.log)"

# Found as they were.
expect "GET /v1/charges/RET-A" 200 "$(curl -s -o "$T/a.after" -w '%{http_code}' "$API/v1/charges/RET-A")"
expect "RET-A as it was" "$(jq -S -c . "$T/a.before")" "$(jq -S -c . "$T/a.after")"
expect "GET /v1/refunds/RET-A-R1" 200 "$(curl -s -o "$T/r.after" -w '%{http_code}' "$API/v1/refunds/RET-A-R1")"
expect "RET-A-R1 as it was" "$(jq -S -c . "$T/r.before")" "$(jq -S -c . "$T/r.after")"
expect "GET /v1/charges/RET-NONE" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$API/v1/charges/RET-NONE")"

# Never used again.
charge k-again RET-A "$(stripe_card 1000)"
expect "a new charge RET-A" "409 order_id_archived" "$ST $(field .error.code)"
expect_contains() { [[ $2 == *"$1"* ]] || fail "$3: '$2' lacks '$1'"; }
expect_contains "$MONTH" "$(field .error.message)" "the 409 names the month"
post /v1/charges/RET-B/refunds k-ret-b-r1 '{"refund_id":"RET-B-R1","amount":100}'
expect "a refund of archived RET-B" "409 order_id_archived" "$ST $(jq -r .error.code "$BODY")"
post /v1/charges/RET-C/refunds k-ret-c-r1 '{"refund_id":"RET-A-R1","amount":100}'
expect "a refund of RET-C reusing RET-A-R1" "409 refund_id_archived" "$ST $(jq -r .error.code "$BODY")"

# A run of the day now would not find its records: refused, naming the date.
post /v1/reconciliations recon-2 "{\"gateway\":\"stripe\",\"date\":\"$DAY\"}"
expect "a run of an archived day" "400 invalid_request" "$ST $(jq -r .error.code "$BODY")"
expect_contains "retention_days" "$(jq -r .error.message "$BODY")" "the 400 says why"

# The files.
expect "archive directory mode" 700 "$(stat -c %a "$T/data/archive")"
expect "archive file mode" 600 "$(stat -c %a "$T/data/archive/$MONTH.db")"
expect "the archive holds RET-A's trail" "$(jq -r .order_id "$T/a.before")" \
    "$(sqlite3 "$T/data/archive/$MONTH.db" "SELECT order_id FROM charges WHERE order_id = 'RET-A'")"
pass
