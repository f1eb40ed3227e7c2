#!/usr/bin/env bash
# test_crash.sh - SIGKILL, then a restart on the same data dir: every charge,
# every stored answer (replayed byte for byte), the audit trails and the
# feed are intact; requests cut off by the kill are retried with their keys
# and still make exactly one charge each.
source "$(dirname "$0")/lib.sh"

N=24
# The burst: enough requests that the kill lands while some are in flight.
BURST=96

# remember NAME METHOD PATH KEY BODY - sends a guarded request and records
# it, with its answer, to be replayed after the crash.
remember()
{
    local name=$1 path=$2 key=$3 body=$4
    pt_post "$path" "$key" "$body"
    pt_save "$name"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$PT_STATUS" "$path" "$key" "$body" >>"$PT_TMP/remembered"
}

# snapshot NAME - the read side, to compare after the restart: the charges
# (but updated_at: a restarted daemon's sync engine tries the queued ones,
# finds the gateway down and puts them back, which is a change), the feed,
# the audit trails.  Warm-up charges and their events are left out.
snapshot()
{
    local o
    pt_all_charges | jq -c '.[] | del(.updated_at)' >"$PT_TMP/snapshot.$1.charges"
    pt_get '/v1/events?limit=100'
    jq -c ".data[] | $NOWARM" <"$PT_BODY_FILE" >"$PT_TMP/snapshot.$1.events"
    for o in k-1 k-2 k-3 k-4 k-5; do
        pt_get "/v1/charges/$o/events"
        jq -c '.data[]' <"$PT_BODY_FILE" >"$PT_TMP/snapshot.$1.audit.$o"
    done
}

# same_snapshot A B - B holds what A held: charges and feed unchanged, each
# audit trail A's rows then (at most) the sync engine's send/not_sent pairs.
same_snapshot()
{
    local o n extra
    expect_same_bytes "$PT_TMP/snapshot.$1.charges" "$PT_TMP/snapshot.$2.charges" \
        "the charges after SIGKILL and restart"
    expect_same_bytes "$PT_TMP/snapshot.$1.events" "$PT_TMP/snapshot.$2.events" \
        "the feed after SIGKILL and restart"
    for o in k-1 k-2 k-3 k-4 k-5; do
        n=$(wc -l <"$PT_TMP/snapshot.$1.audit.$o")
        head -n "$n" "$PT_TMP/snapshot.$2.audit.$o" >"$PT_TMP/prefix"
        expect_same_bytes "$PT_TMP/snapshot.$1.audit.$o" "$PT_TMP/prefix" "audit trail of $o"
        extra=$(tail -n "+$((n + 1))" "$PT_TMP/snapshot.$2.audit.$o" |
            jq -r '"\(.from)>\(.to) \(.cause) \(.actor)"' | sort -u | tr '\n' ',')
        case $extra in
        "" | "INIT>PROCESSING send sync,PROCESSING>INIT not_sent sync,") ;;
        *) fail "audit trail of $o after the restart has unexpected rows: $extra" ;;
        esac
    done
}

# fresh_daemon NAME - a daemon of this case's own, on its own data dir.
fresh_daemon()
{
    pt_config ".data_dir = \"$PT_TMP/data-$1\""
    PT_PORT=""
    pt_start
}

case_state_and_replays_survive_sigkill()
{
    local name status path key body n=0
    fresh_daemon state
    remember q1 /v1/charges k-key-1 "$(charge_body k-1)"
    remember q2 /v1/charges k-key-2 "$(charge_body k-2 '.currency = "CNY" | .amount = 2000')"
    remember q3 /v1/charges k-key-3 "$(charge_body k-3 '.offline = "force_offline"')"
    remember q4 /v1/charges k-key-4 "$(charge_body k-4)"
    remember q5 /v1/charges k-key-5 "$(charge_body k-5)"
    remember same /v1/charges k-key-1b "$(charge_body k-1)"
    remember conflict /v1/charges k-key-1c "$(charge_body k-1 '.amount = 7')"
    remember invalid /v1/charges k-key-bad "$(charge_body k-6 '.amount = "ten"')"
    remember cancel /v1/charges/k-4/cancel k-cancel-4 -
    remember hold /v1/charges/k-5/review k-hold-5 '{"action":"hold","operator":"alice","note":"check"}'
    remember clear /v1/charges/k-5/review k-clear-5 '{"action":"clear","operator":"bob"}'
    remember hold2 /v1/charges/k-3/review k-hold-3 '{"action":"hold","operator":"carol"}'
    cut -f 1,2 "$PT_TMP/remembered" | tr '\t\n' ': ' >"$PT_TMP/statuses"
    expect_eq 'q1:202 q2:202 q3:202 q4:202 q5:202 same:200 conflict:409 invalid:400 cancel:200 hold:200 clear:200 hold2:200 ' \
        "$(cat "$PT_TMP/statuses")" "answers before the crash"
    snapshot before

    pt_kill9
    pt_start

    snapshot after
    same_snapshot before after
    while IFS=$'\t' read -r name status path key body; do
        pt_post "$path" "$key" "$body"
        expect_eq "$status" "$PT_STATUS" "status of the replay of $name after the crash"
        expect_header Idempotency-Replayed true
        expect_same_bytes "$(pt_saved "$name")" "$PT_BODY_FILE" "replay of $name after the crash"
        n=$((n + 1))
    done <"$PT_TMP/remembered"
    expect_eq 12 "$n" "replays checked"
    # And a second crash changes nothing either.
    pt_kill9
    pt_start
    snapshot again
    same_snapshot before again
    # The recovered daemon is a normal one: it stops cleanly.
    pt_stop
}

case_sigkill_during_a_burst()
{
    local dir=$PT_TMP/burst i status deadline answered=0 cut=0 committed=0
    fresh_daemon burst
    mkdir -p "$dir"
    : >"$dir/curl.cfg"
    for i in $(seq "$BURST"); do
        printf '{"order_id":"b-%d","amount":%d,"currency":"USD","gateway":"stripe","method":"card_on_file","payment_method":"pm_card_visa"}' \
            "$i" "$i" >"$dir/req.$i"
        cat >>"$dir/curl.cfg" <<EOF
url = "$PT_URL/v1/charges"
request = "POST"
header = "Content-Type: application/json"
header = "Expect:"
header = "Idempotency-Key: b-key-$i"
data-binary = "@$dir/req.$i"
output = "$dir/body.$i"
dump-header = "$dir/hdr.$i"
write-out = "%{http_code}\\n"
max-time = $PT_CURL_MAX_S
silent
EOF
        [ "$i" -eq "$BURST" ] || echo next >>"$dir/curl.cfg"
    done
    # Fire them all, kill the daemon once a few have been answered.
    curl -Z --parallel-immediate --parallel-max "$N" -K "$dir/curl.cfg" \
        >"$dir/statuses" 2>/dev/null &
    local bg=$!
    deadline=$(($(date +%s) + 20))
    # (The header files appear as answers arrive; curl's stdout is buffered.)
    until [ "$(find "$dir" -name 'hdr.*' -size +0 | wc -l)" -ge 5 ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "no answers to the burst"
        sleep 0.005
    done
    pt_kill9
    wait "$bg"
    pt_start

    for i in $(seq "$BURST"); do
        status=000
        [ -s "$dir/hdr.$i" ] && read -r _ status _ <"$dir/hdr.$i"
        if [ "$status" = 202 ]; then
            answered=$((answered + 1))
            # Told "accepted": the key must replay exactly what the client
            # was told (so the charge is there too).
            pt_post /v1/charges "b-key-$i" "$(cat "$dir/req.$i")"
            expect_status 202
            expect_header Idempotency-Replayed true
            expect_same_bytes "$dir/body.$i" "$PT_BODY_FILE" "replay of b-$i after the crash"
        else
            [ "$status" = 000 ] || fail "b-$i: expected 202 or no answer, got $status"
            cut=$((cut + 1))
            # No answer: the client retries with the same key and gets one
            # charge (created now, or the one committed before the kill).
            pt_post /v1/charges "b-key-$i" "$(cat "$dir/req.$i")"
            expect_status 202
            [ "$(pt_header Idempotency-Replayed)" != true ] || committed=$((committed + 1))
            cp "$PT_BODY_FILE" "$dir/retry.$i"
            pt_post /v1/charges "b-key-$i" "$(cat "$dir/req.$i")"
            expect_header Idempotency-Replayed true
            expect_same_bytes "$dir/retry.$i" "$PT_BODY_FILE" "second retry of b-$i"
        fi
    done
    pt_log "  burst: $answered answered before SIGKILL, $cut cut off ($committed of them committed before the kill)"
    # Exactly one charge per order, each with its own request's amount.
    pt_all_charges | jq -r '.[] | "\(.order_id) \(.amount)"' >"$dir/all"
    for i in $(seq "$BURST"); do echo "b-$i $i"; done | sort >"$dir/expected"
    sort "$dir/all" >"$dir/all.sorted"
    expect_same_bytes "$dir/expected" "$dir/all.sorted" "the charges after the crash and the retries"
    pt_stop
}

pt_init

pt_case "SIGKILL + restart: charges, feed, audit and every replay intact" case_state_and_replays_survive_sigkill
pt_case "SIGKILL amid $BURST charges ($N at a time): each ends as exactly one" case_sigkill_during_a_burst

pt_done
