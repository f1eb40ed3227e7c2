#!/usr/bin/env bash
# operator_page.sh PAYTERM - the operator page (SPEC 15) in a real browser:
# Debian's headless Chromium loads GET / from the daemon, sees a charge the
# kiosk queued while the network was down appear without a reload, and an
# operator clears, with the page's button, the review hold of a charge that
# was paid while held; the test then reads through the API the audit row
# with actor operator:<name> and the charge.succeeded event the clearing
# released (once), and that the money moved once at the simulator.
# Also: the page is served with its no-framing and no-outside-loads
# headers, and a screenshot is kept (OPERATOR_PAGE_PNG=FILE keeps it there:
# `make screenshot` refreshes docs/operator-page.png with it).
. "$(dirname "$0")/synclib.sh" "$@"
PY=${PT_PYTHON:-/usr/bin/python3}
BROWSER=$(cd "$(dirname "$0")/.." && pwd)/browser.py
command -v chromium >/dev/null || fail "chromium is needed (scripts/deps.sh installs it)"
"$PY" -c 'import websocket' 2>/dev/null || fail "python3-websocket is needed (scripts/deps.sh installs it)"
SIM_PAY_DELAY_MS=60000 sync_start # a QR order stays PENDING until the page cancels it

# The page itself: HTML from the binary, no framing, nothing from elsewhere.
hdr=$(curl -sS -D - -o "$T/page.html" "$API/")
expect "GET / content type" "text/html; charset=utf-8" \
    "$(sed -n 's/^Content-Type: //Ip' <<<"$hdr" | tr -d '\r')"
expect "GET / X-Frame-Options" DENY "$(sed -n 's/^X-Frame-Options: //Ip' <<<"$hdr" | tr -d '\r')"
grep -qi "^Content-Security-Policy: default-src 'none';.*frame-ancestors 'none'" <<<"$hdr" ||
    fail "GET / has no strict Content-Security-Policy: $hdr"
grep -Eq '<(script|link|img)[^>]+(src|href)=' "$T/page.html" && fail "the page loads an outside asset"

ORDER=OP-PAGE-1
SHOT=${OPERATOR_PAGE_PNG:-$T/operator-page.png}
cat >"$T/page.steps" <<STEPS
open $API/
wait document.getElementById('version').textContent !== '' 30
eval (() => { const o = document.getElementById('operator'); o.value = 'ann'; o.dispatchEvent(new Event('change')); return 1; })()
touch $T/b.loaded
# The queued charge appears without a reload (the page polls /v1/status and the lists).
wait document.querySelector('#attention tr[data-order="$ORDER"]') 30
expect document.querySelector('#queue').textContent.startsWith('1 charge') true
touch $T/b.saw-queued
waitfile $T/s.paid-held 120
# The page shows it paid and still held before the operator clears it.
wait (document.querySelector('#attention tr[data-order="$ORDER"] td.state') || {}).textContent === 'SUCCESS · review' 30
wait document.querySelector('#attention button[data-action="clear"][data-order="$ORDER"]') 30
screenshot $SHOT 1280 720
eval document.querySelector('#attention button[data-action="clear"][data-order="$ORDER"]').click()
# The released event reaches the page's feed.
wait [...document.querySelectorAll('#feed td')].some(td => td.textContent === '$ORDER') 30
wait document.getElementById('msg').textContent.includes('done') 10
wait !document.querySelector('#attention tr[data-order="$ORDER"]') 10
# Cancel, from the list: a QR order waiting for the customer (PENDING).
waitfile $T/s.qr-pending 60
wait document.querySelector('#attention button[data-action="cancel"][data-order="OP-PAGE-QR"]') 30
eval (() => { window.confirm = () => true; document.querySelector('#attention button[data-action="cancel"][data-order="OP-PAGE-QR"]').click(); return 1; })()
wait document.getElementById('msg').textContent.startsWith('Cancel OP-PAGE-QR: done') 30
# Refund, from a charge looked up by its order id.
eval (() => { document.getElementById('order').value = '$ORDER'; document.getElementById('find').requestSubmit(); return 1; })()
wait document.querySelector('#charge button[data-action="refund"]') 10
eval (() => { window.prompt = () => '1000'; document.querySelector('#charge button[data-action="refund"]').click(); return 1; })()
wait document.getElementById('msg').textContent.startsWith('Refund $ORDER: done') 30
STEPS

sim_fault '{"gateway":"*","mode":"refuse_connect","count":-1}'
"$PY" "$BROWSER" "$T/page.steps" >"$T/browser.log" 2>&1 &
B_PID=$!
wait_until 60 test -e "$T/b.loaded" || fail "the page did not load: $(tail -n 5 "$T/browser.log")"
log "page loaded in Chromium"

charge k-op-1 "$ORDER" "$(stripe_card 4200)"
expect "$ORDER queued while the network is down" 202 "$ST"
expect "$ORDER state" INIT "$(field .state)"
wait_until 60 test -e "$T/b.saw-queued" ||
    fail "the page did not show the queued charge: $(tail -n 8 "$T/browser.log")"
log "the queued charge appeared on the page"

# Held (an operator at another lane, through the API), then paid while held.
ST=$(curl -sS -o "$T/hold.json" -w '%{http_code}' -X POST "$API/v1/charges/$ORDER/review" \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: hold-op-1' \
    -d '{"action":"hold","operator":"bob"}')
expect "hold $ORDER" 200 "$ST"
sim_clear
wait_state "$ORDER" SUCCESS 60
expect "$ORDER captured once" 1 "$(captures "$ORDER")"
expect "no charge.succeeded while held" 0 "$(events_of "$ORDER" charge.succeeded)"
touch "$T/s.paid-held"
log "paid while held: no event yet"
charge k-op-qr OP-PAGE-QR "$(alipay_qr 3300)"
expect "OP-PAGE-QR" "202 PENDING" "$ST $(field .state)"
touch "$T/s.qr-pending"

wait "$B_PID" || fail "the browser steps failed: $(tail -n 12 "$T/browser.log")"
log "cleared with the page's button"

api "/v1/charges/$ORDER/events" >"$T/trail.json"
expect "audit row of the clearing" 1 \
    "$(jq '[.data[] | select(.actor == "operator:ann" and .refused == false and .refund_id == null)] | length' "$T/trail.json")"
expect "audit row of the hold" 1 "$(jq '[.data[] | select(.actor == "operator:bob")] | length' "$T/trail.json")"
expect "charge.succeeded released once" 1 "$(events_of "$ORDER" charge.succeeded)"
expect "review flag" false "$(api "/v1/charges/$ORDER" | jq .review)"
expect "$ORDER captured once after all" 1 "$(captures "$ORDER")"
# The page's Cancel: through the gateway, the operator in the trail first.
wait_state OP-PAGE-QR CANCELED 30
expect "OP-PAGE-QR at the simulator" canceled "$(sim_status OP-PAGE-QR)"
expect "the cancel's request row names the operator" "cancel_requested operator:ann" \
    "$(api /v1/charges/OP-PAGE-QR/events | jq -r '[.data[] | select(.actor | startswith("operator:"))][0] | "\(.cause) \(.actor)"')"
# The page's Refund: its own refund id, the operator in the refund's trail.
api "/v1/charges/$ORDER/refunds" >"$T/refunds.json"
expect "refunds of $ORDER" "1 1000" "$(jq -r '"\(.data | length) \(.data[0].amount)"' "$T/refunds.json")"
RID=$(jq -r '.data[0].refund_id' "$T/refunds.json")
api "/v1/charges/$ORDER/events" >"$T/trail2.json"
expect "the refund's first audit row names the operator" "operator:ann" \
    "$(jq -r --arg r "$RID" '[.data[] | select(.refund_id == $r)][0].actor' "$T/trail2.json")"
# A declined charge asked for with Accept: application/problem+json is
# still the charge (its "error" member says why), not a problem document.
ST=$(curl -sS -o "$T/declined.json" -D "$T/declined.h" -w '%{http_code}' -X POST "$API/v1/charges" \
    -H 'Accept: application/problem+json' -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: declined-1' -d "{\"order_id\":\"OP-DECLINED\",$(stripe_card 4251)}")
expect "declined charge status" 402 "$ST"
expect "declined charge content type" application/json \
    "$(sed -n 's/^Content-Type: //Ip' "$T/declined.h" | tr -d '\r')"
expect "declined charge body" "OP-DECLINED FAILED" "$(jq -r '"\(.order_id) \(.state)"' "$T/declined.json")"
[ -s "$SHOT" ] || fail "no screenshot at $SHOT"
expect "screenshot is a PNG" "89504e47" "$(head -c 4 "$SHOT" | od -An -tx1 | tr -d ' \n')"
pass
