#!/usr/bin/env bash
# reachability.sh PAYTERM - reachability is fresh (SPEC 18).
#
# sync.interval_s is 60 here: the background pass alone would find a
# gateway back only a minute later.
#   * a customer-present charge for a gateway believed down tries it at
#     once: while it is still down a prefer_online charge is queued (202),
#     once it is back the next one goes online (201), and a QR charge
#     (which may not wait) gets its code instead of a 503;
#   * several at once: one tries, the others wait for its outcome and go
#     online with it;
#   * an idle daemon sees a gateway go away within sync.probe_idle_s, and
#     /v1/status says when it last looked (last_probe_at).
. "$(dirname "$0")/synclib.sh" "$@"
cat >"$T/extra.json" <<'JSON'
{"sync": {"interval_s": 60, "probe_idle_s": 2}}
JSON
sync_start "$T/extra.json"
online_of() { api /v1/status | jq -r ".gateways.$1.online"; }
is_down() { [ "$(online_of "$1")" = false ]; }
is_up() { [ "$(online_of "$1")" = true ]; }

# ---- believed down, still down: queued; back: online at once -----------------------------
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
charge k-r1 RCH-1 "$(stripe_card 1100)"
expect "RCH-1 while Stripe is down" "202 INIT" "$ST $(field .state)"
wait_until 5 is_down stripe || fail "Stripe is not believed down: $(api /v1/status | jq -c .gateways)"
charge k-r2 RCH-2 "$(stripe_card 1200)"
expect "RCH-2: tried at once, still down, queued" "202 INIT" "$ST $(field .state)"
sim_clear
charge k-r3 RCH-3 "$(stripe_card 1300)"
expect "RCH-3 once Stripe is back (no sync pass in between)" "201 SUCCESS" "$ST $(field .state)"
expect "Stripe believed up again" true "$(online_of stripe)"
for o in RCH-1 RCH-2; do wait_final "$o" 20; done
expect_all_captured_once RCH-1 RCH-2 RCH-3

# ---- a charge that may not wait ------------------------------------------------------------------
sim_fault '{"gateway":"alipay","mode":"refuse_connect","count":-1}'
charge k-q1 RCH-Q1 "$(alipay_qr 1400)"
expect "a QR charge while Alipay is down" 503 "$ST"
wait_until 5 is_down alipay || fail "Alipay is not believed down"
sim_clear
charge k-q2 RCH-Q2 "$(alipay_qr 1500)"
expect "a QR charge once Alipay is back" "202 PENDING" "$ST $(field .state)"
[ -n "$(field '.qr_code // empty')" ] || fail "RCH-Q2 has no qr_code: $(cat "$BODY")"
charge k-q1 RCH-Q1 "$(alipay_qr 1400)"
expect "the refused key, tried again" "202 PENDING" "$ST $(field .state)"

# ---- several at once: one tries, the others wait for it ------------------------------------------
sim_fault '{"gateway":"stripe","mode":"refuse_connect","count":-1}'
charge k-r4 RCH-4 "$(stripe_card 1600)"
wait_until 5 is_down stripe || fail "Stripe is not believed down"
sim_clear
pids=()
for i in 1 2 3 4 5; do
    CHARGE_OUT=$T/many.$i charge "k-m$i" "RCH-M$i" "$(stripe_card $((1700 + i)))" &
    pids+=($!)
done
wait "${pids[@]}"
for i in 1 2 3 4 5; do
    st=$(jq -r .state "$T/many.$i.json")
    expect "RCH-M$i (one of five at once after Stripe came back)" SUCCESS "$st"
done
wait_final RCH-4 20
expect_all_captured_once RCH-4 RCH-M1 RCH-M2 RCH-M3 RCH-M4 RCH-M5

# ---- idle: a gateway that went away is seen ----------------------------------------------------
wait_until 10 is_up wechat || fail "WeChat is not believed up"
before=$(api /v1/status | jq -r .gateways.wechat.last_probe_at)
[ "$before" != null ] || fail "no last_probe_at for WeChat: $(api /v1/status | jq -c .gateways)"
sim_fault '{"gateway":"wechat","mode":"refuse_connect","count":-1}'
wait_until 10 is_down wechat ||
    fail "an idle daemon did not see WeChat go away within 10 s (probe_idle_s 2): $(api /v1/status | jq -c .gateways)"
after=$(api /v1/status | jq -r .gateways.wechat.last_probe_at)
[ "$(date -d "$after" +%s%N)" -gt "$(date -d "$before" +%s%N)" ] ||
    fail "last_probe_at did not move: $before -> $after"
age=$(($(date +%s) - $(date -d "$after" +%s)))
[ "$age" -le 5 ] || fail "last_probe_at is $age s old"
sim_clear
pass
