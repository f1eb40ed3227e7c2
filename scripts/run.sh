#!/usr/bin/env bash
# run.sh - the daemon in simulation mode, in the foreground (make run).
#
# Starts the gateway simulator in the background (state in build/run/sim,
# kept between runs) and `payterm serve` in the foreground with the
# simulator's gateways.json.  Ctrl-C stops both.  Try:
#   curl -s -XPOST localhost:8080/v1/charges -H 'Idempotency-Key: k1' \
#     -d '{"order_id":"O-1","amount":1200,"currency":"USD","gateway":"stripe",
#          "method":"card_on_file","payment_method":"pm_card_visa"}'
set -euo pipefail
cd "$(dirname "$0")/.."
PAYTERM=${PAYTERM:-build/dev/firmware/payterm}
API_PORT=${RUN_API_PORT:-8080}
SIM_PORT=${RUN_SIM_PORT:-8443}
DIR=build/run
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

"$PAYTERM" sim --listen "127.0.0.1:$SIM_PORT" --dir "$DIR/sim" \
    --notify-base "http://127.0.0.1:$API_PORT" >"$DIR/sim.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$DIR/sim/gateways.json" ] && break; sleep 0.1; done
[ -s "$DIR/sim/gateways.json" ] || { echo "run: the simulator did not start, see $DIR/sim.log" >&2; exit 1; }

[ -f "$DIR/payterm.json" ] || cat >"$DIR/payterm.json" <<JSON
{
  "data_dir": "data",
  "listen": "127.0.0.1:$API_PORT",
  "offline": {"limits": {"CNY": {"max_amount": 50000, "max_total": 500000},
                         "USD": {"max_amount": 20000, "max_total": 200000},
                         "THB": {"max_amount": 500000, "max_total": 5000000}}}
}
JSON
echo "simulator: https://127.0.0.1:$SIM_PORT (log $DIR/sim.log, CA $DIR/sim/ca.pem)"
echo "payterm:   http://127.0.0.1:$API_PORT (config $DIR/payterm.json + $DIR/sim/gateways.json)"
"$PAYTERM" serve -c "$DIR/payterm.json" -c "$DIR/sim/gateways.json"
