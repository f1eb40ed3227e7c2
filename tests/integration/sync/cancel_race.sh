#!/usr/bin/env bash
# cancel_race.sh PAYTERM [ROUNDS] - a cancel never races its own charge
# (SPEC 18).
#
# Each race is one charge and one cancel of it, the cancel sent at a random
# moment while the charge is being created, sent, queued, marked in a run,
# waiting for the customer or already final.  The simulator delays each pay
# by a random time (shorter than the request timeout), so the cancel lands
# on every state the charge passes through.  Two kinds of rounds:
#
#   online  one charge per gateway and method (Alipay and WeChat payment
#           codes, Stripe, Alipay and WeChat QR, 2C2P), each sent at once
#           by its POST (prefer_online), all at the same time;
#   drain   the same charges queued (force_offline), then a sync pass sends
#           them in runs while their cancels arrive.
#
# After each round, for every charge, against the simulator's ledger:
#   * a charge.succeeded event exactly when the gateway keeps the money
#     (its trade "captured", nothing returned), and the charge is SUCCESS
#     exactly then;
#   * a cancel answered 2xx is never dropped: the charge ends CANCELED, or
#     its own request took the money first and the cancel's key is answered
#     from then on by 409 charge_already_succeeded (and no reverse was sent).
# ROUNDS (default 2: 28 races) of each kind; make races (in .ci/run) runs
# 15 (210 races).
. "$(dirname "$0")/synclib.sh" "$@"

ROUNDS=${2:-${PT_CANCEL_RACE_ROUNDS:-2}}
KINDS=(alipay.barcode wechat.barcode stripe.card_on_file alipay.qr wechat.qr 2c2p.redirect)
gw_of() { echo "${1%%.*}"; }
rand_ms() { echo $((RANDOM % $1)); }
sleep_ms() { sleep "$(printf '0.%03d' "$1")"; }

# The simulator pays a QR order itself after 800 ms: a cancel may meet it.
SIM_PAY_DELAY_MS=800
SYNC_REQUEST_TIMEOUT_MS=3000 sync_start
# An amount within every offline limit that the simulator neither declines
# nor leaves waiting (...51, ...52): ...01 to ...91 in steps of 10, but 51.
amount() {
    local a=$((1000 + RANDOM % 300 * 10 + 1))
    [ $((a % 100)) != 51 ] || a=$((a + 10))
    echo "$a"
}

RACES=0
FAILS=()
# post_cancel ORDER KEY OUT: the cancel's status into OUT.status, body OUT.json.
post_cancel() {
    curl -sS --max-time 30 -o "$3.json" -w '%{http_code}' -X POST \
        "$API/v1/charges/$1/cancel" -H "Idempotency-Key: $2" >"$3.status"
}
# post_charge ORDER KEY BODY OUT
post_charge() {
    curl -sS --max-time 30 -o "$4.json" -w '%{http_code}' -X POST "$API/v1/charges" \
        -H 'Content-Type: application/json' -H "Idempotency-Key: $2" \
        -d "{\"order_id\":\"$1\",$3}" >"$4.status"
}

# check ORDER CANCEL_KEY OUT: the invariants for one race (LEDGER and
# EVENTS: the simulator's ledger and the whole feed, read once a round).
LEDGER='{}'
EVENTS='[]'
check() {
    local o=$1 key=$2 out=$3 st cst led kept succeeded replay
    st=$(state "$o")
    cst=$(cat "$out.cancel.status")
    led=$(jq -c --arg o "$o" '[.data[] | select(.order_id == $o)][0] // {}' <<<"$LEDGER")
    kept=$(jq -r 'if .status == "captured" and (.refunded // 0) == 0 then 1 else 0 end' <<<"$led")
    succeeded=$(jq --arg o "$o" '[.[] | select(.order_id == $o and .type == "charge.succeeded")] | length' <<<"$EVENTS")
    RACES=$((RACES + 1))
    local why=""
    [ "$succeeded" = "$kept" ] || why="charge.succeeded events $succeeded, gateway keeps the money $kept"
    if [ "$kept" = 1 ] && [ "$st" != SUCCESS ]; then why="$why; the gateway kept the money of a $st charge"; fi
    if [ "$kept" = 0 ] && [ "$st" = SUCCESS ]; then why="$why; SUCCESS but the gateway kept nothing"; fi
    case $cst in
    2??)
        if [ "$st" = SUCCESS ]; then
            local code
            replay=$(curl -sS -o "$out.replay.json" -w '%{http_code}' -X POST \
                "$API/v1/charges/$o/cancel" -H "Idempotency-Key: $key")
            code=$(jq -r '.error.code // empty' "$out.replay.json")
            [ "$replay $code" = "409 charge_already_succeeded" ] ||
                why="$why; cancel answered $cst, the charge is SUCCESS, its replay says $replay $code"
        elif [ "$st" != CANCELED ]; then
            why="$why; cancel answered $cst but the charge is $st"
        fi
        ;;
    esac
    if [ -n "$why" ]; then
        FAILS+=("$o ($(cat "$out.how")): ${why#; } [cancel $cst, ledger $led]")
    fi
    echo "cancel=$cst state=$st kept=$kept $o ($(cat "$out.how"))" >>"$T/races.log"
}

wait_round() {
    local o
    log "waiting for ${#@} charges to be final"
    for o in "$@"; do
        wait_until 60 is_final "$o" || {
            FAILS+=("$o: not final after 60 s ($(state "$o"))")
        }
    done
    log "final"
}

online_round() {
    local r=$1 kind o i=0 orders=() pids=()
    for kind in "${KINDS[@]}"; do
        i=$((i + 1))
        o=RACE-ON-$r-$i-$(gw_of "$kind")
        orders+=("$o")
        local out=$T/race.$o d c
        d=$((100 + $(rand_ms 900)))
        c=$(rand_ms 1200)
        echo "online, pay delayed ${d} ms, cancel after ${c} ms" >"$out.how"
        sim_fault "{\"gateway\":\"$(gw_of "$kind")\",\"mode\":\"delay\",\"count\":1,\"delay_ms\":$d}"
        (
            post_charge "$o" "kc-$o" "$(body_for "$kind" "$(amount)")" "$out.charge" &
            sleep_ms "$c"
            post_cancel "$o" "kx-$o" "$out.cancel"
            wait
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
    wait_round "${orders[@]}"
    sim_clear
    LEDGER=$(sim /_sim/ledger)
    EVENTS=$(all_events)
    i=0
    for kind in "${KINDS[@]}"; do
        i=$((i + 1))
        o=RACE-ON-$r-$i-$(gw_of "$kind")
        check "$o" "kx-$o" "$T/race.$o"
    done
}

drain_round() {
    local r=$1 kind o i=0 orders=() pids=()
    # Every pay of the pass is slowed: the cancels meet charges marked in a
    # run, on their way, and settled.
    sim_fault "{\"gateway\":\"*\",\"mode\":\"delay\",\"count\":-1,\"delay_ms\":$((100 + $(rand_ms 300)))}"
    for kind in alipay.barcode wechat.barcode stripe.card_on_file stripe.card_on_file alipay.barcode wechat.barcode stripe.card_on_file alipay.barcode; do
        i=$((i + 1))
        o=RACE-DR-$r-$i-$(gw_of "$kind")
        orders+=("$o")
        CHARGE_OUT=$T/race.$o.charge charge "kc-$o" "$o" "$(body_for "$kind" "$(amount)"),\"offline\":\"force_offline\""
        [ "$ST" = 202 ] || fail "$o not queued: $ST $(cat "$BODY")"
    done
    api /v1/sync -X POST >/dev/null
    for o in "${orders[@]}"; do
        local out=$T/race.$o c
        c=$(rand_ms 2500)
        echo "drain, cancel after ${c} ms" >"$out.how"
        (
            sleep_ms "$c"
            post_cancel "$o" "kx-$o" "$out.cancel"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
    sim_clear
    wait_round "${orders[@]}"
    LEDGER=$(sim /_sim/ledger)
    EVENTS=$(all_events)
    for o in "${orders[@]}"; do check "$o" "kx-$o" "$T/race.$o"; done
}

for r in $(seq "$ROUNDS"); do
    online_round "$r"
    log "round $r online done"
    drain_round "$r"
    log "round $r: $RACES races, ${#FAILS[@]} failed"
done
log "outcomes (count, cancel's answer, final state, money kept):"
awk '{print $1, $2, $3}' "$T/races.log" | sort | uniq -c >&2
if [ ${#FAILS[@]} -gt 0 ]; then
    printf '%s\n' "${FAILS[@]}" >&2
    fail "${#FAILS[@]} of $RACES races broke the invariant"
fi
log "$RACES races, 0 failed"
pass
