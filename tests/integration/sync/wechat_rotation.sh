#!/usr/bin/env bash
# wechat_rotation.sh - WeChat Pay rotates its platform key (SPEC 8, 9): a
# daemon running against the simulator keeps taking WeChat charges and
# notifications across the rotation without a restart, keeps the
# downloaded certificate in data_dir (0600), still trusts it after a restart
# while the simulator's /v3/certificates fails, and refuses a notification
# signed under a serial nobody trusts - without a download per message.
#
#   1. a QR charge paid and notified under the first platform key;
#   2. POST /_sim/rotate: the answers and notifications now carry the new
#      serial only; the next charge's answer makes the daemon download the
#      certificates once, and the charge and its notification go through;
#   3. data_dir/wechat-platform-<new serial>.pem, mode 0600;
#   4. restart with GET /v3/certificates answering 500: the stored
#      certificate verifies the next charge and its notification;
#   5. three notifications signed with a fresh key under a made-up serial:
#      400 each, nothing applied, one certificate download at most.
. "$(dirname "$0")/synclib.sh" "$@"
WXFORGE=${PT_WXFORGE:?PT_WXFORGE must name the wxforge helper (set by CMake)}
command -v openssl >/dev/null || fail "openssl is missing (a forger's key is made with it)"

sync_start
GWJ=$T/sim/gateways.json
WX_MCHID=$(jq -r .gateways.wechat.mchid "$GWJ")
WX_APPID=$(jq -r .gateways.wechat.appid "$GWJ")
FIRST_SERIAL=$(jq -r .gateways.wechat.platform_serial "$GWJ")

# How often the daemon asked the simulator for the certificates.
cert_downloads() { grep -c 'GET /v3/certificates' "$T/sim.log" || true; }
stored() { echo "$T/data/wechat-platform-$1.pem"; }

# paid_qr ORDER AMOUNT: a QR charge the simulated customer pays; the
# simulator notifies it.  Checks the whole story of the order.
paid_qr() {
    charge "k-$1" "$1" "$(wechat_qr "$2")"
    expect "$1 first answer" 202 "$ST"
    expect "$1 code_url given" true "$(field '.code_url != null and .code_url != ""')"
    wait_state "$1" SUCCESS 30
    wait_notes
    expect_captured_once "$1"
}

# ---- 1. the first key ------------------------------------------------------------------
log "1. a charge under the first platform key ($FIRST_SERIAL)"
wait_until 10 grep -q 'GET /v3/certificates' "$T/sim.log" ||
    fail "the daemon did not download the platform certificates at start"
paid_qr RT-BEFORE-1 1600
expect "downloads at start" 1 "$(cert_downloads)"
expect "nothing stored for the configured key" 0 "$(ls "$T/data" | grep -c '^wechat-platform-' || true)"

# ---- 2. the rotation -----------------------------------------------------------------
log "2. POST /_sim/rotate: answers and notifications under the new serial only"
R=$(sim /_sim/rotate -H 'Content-Type: application/json' -d '{"gateway":"wechat"}')
NEW_SERIAL=$(jq -r .serial <<<"$R")
[ -n "$NEW_SERIAL" ] && [ "$NEW_SERIAL" != null ] || fail "POST /_sim/rotate: $R"
[ "$NEW_SERIAL" != "$FIRST_SERIAL" ] || fail "the rotation kept the serial $FIRST_SERIAL"
expect "serials listed by the simulator" "[\"$FIRST_SERIAL\",\"$NEW_SERIAL\"]" "$(jq -c .serials <<<"$R")"
before=$(cert_downloads)
paid_qr RT-AFTER-1 1700
expect "one download for the new serial" $((before + 1)) "$(cert_downloads)"
grep -q "platform certificate $NEW_SERIAL trusted (downloaded)" "$T/payterm.1.log" ||
    fail "the daemon did not log trusting $NEW_SERIAL"
paid_qr RT-AFTER-2 1800
expect "no download once the serial is known" $((before + 1)) "$(cert_downloads)"
log "   charges and notifications under $NEW_SERIAL, no restart, one download"

# ---- 3. stored -----------------------------------------------------------------------
log "3. the downloaded certificate is kept in data_dir"
F=$(stored "$NEW_SERIAL")
[ -f "$F" ] || fail "$F is missing: $(ls -l "$T/data")"
expect "mode of $F" 600 "$(stat -c %a "$F")"
expect "serial in $F" "serial=$NEW_SERIAL" "$(openssl x509 -in "$F" -noout -serial)"
ls "$T/data" | grep -q '\.tmp\.' && fail "a temporary file was left in data_dir: $(ls "$T/data")"

# ---- 4. restart while the download fails -------------------------------------------------
log "4. restart with GET /v3/certificates failing: the stored certificate is used"
daemon_kill TERM
sim_fault '{"gateway":"wechat","mode":"http_500_after_commit","path":"/v3/certificates","count":-1}'
before=$(cert_downloads)
daemon_restart
wait_until 10 grep -q 'platform certificates refused (HTTP 500)' "$T/payterm.2.log" ||
    fail "the restarted daemon did not try (and fail) to download the certificates"
grep -q "1 downloaded platform certificate(s) loaded" "$T/payterm.2.log" ||
    fail "the stored certificate was not loaded at start"
paid_qr RT-RESTART-1 1900
expect "the charge needed no download" $((before + 1)) "$(cert_downloads)"
sim_clear
log "   verified with the certificate stored before the restart"

# ---- 5. a serial nobody trusts -------------------------------------------------------
log "5. notifications signed with a fresh key under an unknown serial"
openssl genrsa -out "$T/forger.pem" 2048 2>/dev/null
FORGED_SERIAL=0BADC0FFEE0BADC0FFEE0BADC0FFEE0BADC0FFEE
charge k-RT-FORGED RT-FORGED "$(wechat_qr 1352)"
expect "RT-FORGED first answer" 202 "$ST"
wait_state RT-FORGED PENDING 20
jq -cn --arg o RT-FORGED --arg m "$WX_MCHID" --arg app "$WX_APPID" '{
    amount: {currency: "CNY", payer_currency: "CNY", payer_total: 1352, total: 1352},
    appid: $app, attach: "", bank_type: "OTHERS", mchid: $m, out_trade_no: $o,
    payer: {openid: "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}, promotion_detail: [],
    success_time: "2026-11-30T13:00:05+08:00", trade_state: "SUCCESS",
    trade_state_desc: "支付成功", trade_type: "NATIVE", transaction_id: "4200000000000000999"}' \
    >"$T/forged.plain"
"$WXFORGE" body "$T/sim" EV-FORGED-1 <"$T/forged.plain" >"$T/forged.json"
before=$(cert_downloads)
events=$(all_events | jq length)
for i in 1 2 3; do
    "$WXFORGE" headers "$T/sim" "$FORGED_SERIAL" "$T/forger.pem" <"$T/forged.json" >"$T/forged.h"
    hs=()
    while IFS= read -r line; do hs+=(-H "$line"); done <"$T/forged.h"
    NST=$(curl -sS --max-time 10 -o "$T/forged.reply" -w '%{http_code}' -X POST \
        "$API/notify/wechat" -H 'Content-Type: application/json' --data-binary "@$T/forged.json" \
        "${hs[@]}")
    expect "forged notification $i: status" 400 "$NST"
    expect "forged notification $i: reply" '{"code":"FAIL","message":"signature verification failed"}' \
        "$(cat "$T/forged.reply")"
done
expect "RT-FORGED state" PENDING "$(state RT-FORGED)"
expect "RT-FORGED at the simulator" pending "$(sim_status RT-FORGED)"
expect "events after the forgeries" "$events" "$(all_events | jq length)"
got=$(($(cert_downloads) - before))
[ "$got" -le 1 ] || fail "three forged notifications made $got certificate downloads (at most 1)"
[ -f "$(stored "$FORGED_SERIAL")" ] && fail "a certificate was stored for the forged serial"
expect "bad signatures counted" 3 "$(metric payterm_notifications_total 'result="bad_signature"')"
log "   refused 3 times, nothing applied, $got download"

pass
