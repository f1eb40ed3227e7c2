#!/usr/bin/env bash
# cancel_in_flight.sh PAYTERM - a cancel that arrives while its charge is on
# its way (SPEC 18): recorded, answered 202 with cancel_requested, carried
# out once the charge's own request has an outcome - never beside it, and
# never dropped.
#
#   won:   a queued Stripe charge is being sent (the simulator holds its
#          answer); the cancel gets 202; the pay succeeds: no cancel is
#          sent, the money stays, charge.succeeded once, and the cancel's
#          key answers 409 charge_already_succeeded from then on.
#   lost:  a queued Alipay barcode charge is being sent and its answer is
#          lost (the request times out, the simulator captures it late);
#          the cancel gets 202 and the network goes down: the cancel waits,
#          still 202; the network returns: the engine reverses the trade,
#          the charge ends CANCELED, no charge.succeeded, the money is back,
#          and the cancel's key answers 200.
#   idle:  a charge marked in a run, its cancel requested before its turn:
#          never sent, CANCELED.
. "$(dirname "$0")/synclib.sh" "$@"
# No notifications: in "lost" the simulator would otherwise tell the daemon
# of the late capture before the network returns (then the money stays and
# the cancel is answered 409 - right, but not the case this test is for).
SIM_NOTIFY_BASE=http://127.0.0.1:1
sync_start

# cancel_json ORDER KEY -> ST, BODY (the last cancel's answer)
marked() { [ "$(state "$1")" = PROCESSING ]; }

# ---- won ---------------------------------------------------------------------------------
# (A queued charge wakes the drain at once: the fault is set first.)
sim_fault '{"gateway":"stripe","mode":"delay","count":1,"delay_ms":1200}'
charge k-won CIF-WON "$(stripe_card 1500),\"offline\":\"force_offline\""
expect "CIF-WON queued" "202 INIT" "$ST $(field .state)"
wait_until 10 marked CIF-WON || fail "CIF-WON never went PROCESSING: $(state CIF-WON)"
cancel c-won CIF-WON
expect "cancel while the pay is out" 202 "$ST"
expect "its body says the cancel is requested" "PROCESSING true" "$(field '"\(.state) \(.cancel_requested)"')"
wait_final CIF-WON 20
expect_captured_once CIF-WON
expect "CIF-WON at the simulator" captured "$(sim_status CIF-WON)"
cancel c-won CIF-WON
expect "the cancel's key after the pay won" "409 charge_already_succeeded" "$ST $(field .error.code)"
cancel c-won-2 CIF-WON
expect "a new cancel after it" "409 charge_not_cancelable" "$ST $(field .error.code)"
expect "cancel requests in the trail" 1 \
    "$(api /v1/charges/CIF-WON/events | jq '[.data[] | select(.cause == "cancel_requested")] | length')"

# ---- lost --------------------------------------------------------------------------------
# Longer than sync.request_timeout_ms (1.5 s): the answer is lost, the trade
# is captured at the simulator after it.
sim_fault '{"gateway":"alipay","mode":"delay","count":1,"delay_ms":2500}'
charge k-lost CIF-LOST "$(alipay_barcode 1600),\"offline\":\"force_offline\""
expect "CIF-LOST queued" "202 INIT" "$ST $(field .state)"
wait_until 10 marked CIF-LOST || fail "CIF-LOST never went PROCESSING: $(state CIF-LOST)"
sim_fault '{"gateway":"alipay","mode":"refuse_connect","count":-1}'
cancel c-lost CIF-LOST
expect "cancel while the pay is out (or its answer was just lost)" 202 "$ST"
case $(field '"\(.state) \(.cancel_requested)"') in
"PROCESSING true" | "UNKNOWN true") ;;
*) fail "its body: $(cat "$BODY")" ;;
esac
in_unknown() { [ "$(state CIF-LOST)" = UNKNOWN ]; }
wait_until 10 in_unknown || fail "CIF-LOST did not become UNKNOWN: $(state CIF-LOST)"
captured_late() { [ "$(sim_status CIF-LOST)" = captured ]; }
wait_until 10 captured_late || fail "the simulator did not capture CIF-LOST late: $(ledger CIF-LOST)"
sleep 2 # passes go by with the network down: the cancel waits, nothing else
expect "CIF-LOST while the network is down" UNKNOWN "$(state CIF-LOST)"
cancel c-lost CIF-LOST
expect "the cancel's key while it waits" "202 true" "$ST $(field .cancel_requested)"
sim_clear
wait_final CIF-LOST 30
expect "CIF-LOST after the network returned" CANCELED "$(state CIF-LOST)"
expect "CIF-LOST at the simulator (reversed)" canceled "$(sim_status CIF-LOST)"
expect "CIF-LOST charge.succeeded events" 0 "$(events_of CIF-LOST charge.succeeded)"
expect "CIF-LOST charge.canceled events" 1 "$(events_of CIF-LOST charge.canceled)"
cancel c-lost CIF-LOST
expect "the cancel's key once carried out" "200 CANCELED" "$ST $(field .state)"

# ---- idle --------------------------------------------------------------------------------
# The network is down while three are queued; when it returns they go out
# in one run, whose first pay is held: the other two wait, marked.  The
# hold is armed before Stripe is reachable again, and only the refusal is
# lifted (clearing "stripe" keeps the "*" fault): a pass that finds Stripe
# back between the two would otherwise send all three unheld.
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
for i in 1 2 3; do
    charge "k-idle-$i" "CIF-IDLE-$i" "$(stripe_card $((1700 + i))),\"offline\":\"force_offline\""
    expect "CIF-IDLE-$i queued" 202 "$ST"
done
sim_fault '{"gateway":"*","mode":"delay","count":1,"delay_ms":1500,"path":"/v1/payment_intents"}'
sim_fault '{"gateway":"stripe","mode":"none"}'
api /v1/sync -X POST >/dev/null
wait_until 10 marked CIF-IDLE-3 || fail "CIF-IDLE-3 was not marked in the run: $(state CIF-IDLE-3)"
cancel c-idle CIF-IDLE-3
expect "cancel of a charge waiting in its run" 202 "$ST"
wait_final CIF-IDLE-3 20
expect "CIF-IDLE-3" CANCELED "$(state CIF-IDLE-3)"
expect "CIF-IDLE-3 trades at the simulator" 0 "$(trades CIF-IDLE-3)"
for i in 1 2; do
    wait_final "CIF-IDLE-$i" 20
    expect_captured_once "CIF-IDLE-$i"
done
cancel c-idle CIF-IDLE-3
expect "its cancel's key" "200 CANCELED" "$ST $(field .state)"
pass
