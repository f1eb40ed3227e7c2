#!/usr/bin/env bash
# kiosk_examples.sh PAYTERM - the two kiosk examples (SPEC 15) against the
# daemon and the simulator:
# * examples/kiosk.py (Python, standard library only) takes an Alipay QR
#   charge, shows the QR code, is killed right after the answer and started
#   again (the same key from its state file: the answer is replayed, never a
#   second charge), rides out a restart of the daemon while it waits on the
#   feed, and delivers the goods once; run again, it delivers nothing;
# * examples/kiosk.html + kiosk.js in headless Chromium, served from an
#   origin listed in cors_origins, take a charge and deliver it from the
#   feed; served from an origin that is not listed, they cannot read
#   payterm's answers (no CORS headers for that origin; its preflight would be
#   403) and no charge exists.
. "$(dirname "$0")/synclib.sh" "$@"
PY=${PT_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
BROWSER=$HERE/tests/integration/browser.py
command -v chromium >/dev/null || fail "chromium is needed (scripts/deps.sh installs it)"

WEB_OK=$(pick_port)
WEB_NO=$(pick_port)
while [ "$WEB_NO" = "$WEB_OK" ]; do WEB_NO=$(pick_port); done
cat >"$T/extra.json" <<JSON
{"cors_origins": ["http://127.0.0.1:$WEB_OK"]}
JSON
SIM_PAY_DELAY_MS=4000 sync_start "$T/extra.json"

# ---- the Python kiosk ---------------------------------------------------------
run_kiosk() { # run_kiosk LOG: kiosk.py for KIOSK-PY-1 in the background -> K_PID
    "$PY" "$HERE/examples/kiosk.py" --api "$API" --order KIOSK-PY-1 --amount 1200 \
        --currency CNY --gateway alipay --method qr --state "$T/kiosk.json" >"$1" 2>&1 &
    K_PID=$!
}
run_kiosk "$T/kiosk.1.log"
wait_until 30 grep -q '^SHOW ' "$T/kiosk.1.log" || fail "kiosk.py showed no QR code: $(cat "$T/kiosk.1.log")"
kill -9 "$K_PID"; wait "$K_PID" 2>/dev/null || true
log "kiosk.py killed after the answer: $(grep '^SHOW' "$T/kiosk.1.log")"

run_kiosk "$T/kiosk.2.log"
wait_until 30 grep -q 'POST /v1/charges -> 20[12] (replayed)' "$T/kiosk.2.log" ||
    fail "kiosk.py's retry was not a replay of the same key: $(cat "$T/kiosk.2.log")"
expect "the QR code of the retry" "$(grep '^SHOW' "$T/kiosk.1.log")" "$(grep '^SHOW' "$T/kiosk.2.log")"
daemon_kill TERM
log "daemon stopped while kiosk.py waits on the feed"
sleep 1
daemon_restart
wait "$K_PID" || fail "kiosk.py did not deliver: $(cat "$T/kiosk.2.log")"
expect "DELIVER lines" 1 "$(grep -c '^DELIVER KIOSK-PY-1$' "$T/kiosk.2.log")"
expect "KIOSK-PY-1 state" SUCCESS "$(state KIOSK-PY-1)"
expect "KIOSK-PY-1 captured once" 1 "$(captures KIOSK-PY-1)"
expect "KIOSK-PY-1 charges" 1 "$(api '/v1/charges?limit=100' | jq '[.data[] | select(.order_id == "KIOSK-PY-1")] | length')"
"$PY" "$HERE/examples/kiosk.py" --api "$API" --order KIOSK-PY-1 --amount 1200 \
    --state "$T/kiosk.json" >"$T/kiosk.3.log" 2>&1 || fail "kiosk.py run again: $(cat "$T/kiosk.3.log")"
expect "DELIVER lines when run again" 0 "$(grep -c '^DELIVER' "$T/kiosk.3.log")"
log "kiosk.py: one charge, one capture, goods delivered once across its own kill and a daemon restart"

# ---- the browser kiosk --------------------------------------------------------
"$PY" -m http.server "$WEB_OK" --bind 127.0.0.1 --directory "$HERE/examples" >"$T/web-ok.log" 2>&1 &
WEB_OK_PID=$!
"$PY" -m http.server "$WEB_NO" --bind 127.0.0.1 --directory "$HERE/examples" >"$T/web-no.log" 2>&1 &
WEB_NO_PID=$!
trap 'kill $WEB_OK_PID $WEB_NO_PID 2>/dev/null; on_exit' EXIT
wait_until 20 port_listening "$WEB_OK" || fail "no web server on $WEB_OK"
wait_until 20 port_listening "$WEB_NO" || fail "no web server on $WEB_NO"
cat >"$T/web.steps" <<STEPS
open http://127.0.0.1:$WEB_OK/kiosk.html?api=$API&order=KIOSK-WEB-1&amount=1300
wait document.getElementById('qr').textContent.startsWith('https://') 30
wait document.getElementById('status').textContent === 'delivered' 60
open http://127.0.0.1:$WEB_NO/kiosk.html?api=$API&order=KIOSK-WEB-2&amount=1400
wait document.getElementById('status').textContent.includes('not allowed') 30
STEPS
"$PY" "$BROWSER" "$T/web.steps" >"$T/web.log" 2>&1 || fail "the browser kiosk: $(tail -n 12 "$T/web.log")"
expect "KIOSK-WEB-1 state" SUCCESS "$(state KIOSK-WEB-1)"
expect "KIOSK-WEB-1 captured once" 1 "$(captures KIOSK-WEB-1)"
expect "KIOSK-WEB-2 (origin not listed) exists" not_found "$(state KIOSK-WEB-2)"
expect "KIOSK-WEB-2 at the simulator" 0 "$(trades KIOSK-WEB-2)"
log "browser kiosk: the listed origin charged and delivered, the other was refused"
pass
