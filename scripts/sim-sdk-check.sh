#!/bin/sh
# sim-sdk-check.sh - checks the gateway simulator against the vendors' official
# Node SDKs (alipay-sdk, wechatpay-axios-plugin, stripe, jsonwebtoken).
#
# usage: scripts/sim-sdk-check.sh [path/to/payterm]
#
# Needs node and npm (not needed by `make test`).  Installs the SDKs pinned in
# tests/vectors/gen/package-lock.json when missing, starts `payterm sim` on a
# free port in a temporary directory, runs tests/sdk/sim_sdk_check.js, stops
# the simulator and exits with the check's status.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
payterm=${1:-$root/build/dev/firmware/payterm}
command -v node >/dev/null 2>&1 || { echo "sim-sdk-check: node is not installed; skipped" >&2; exit 0; }
[ -x "$payterm" ] || { echo "sim-sdk-check: $payterm not built (make build)" >&2; exit 1; }
if [ ! -d "$root/tests/vectors/gen/node_modules" ]; then
    (cd "$root/tests/vectors/gen" && npm ci --no-audit --no-fund >/dev/null)
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/payterm-sdk-XXXXXX")
log="$dir/sim.log"
notify_port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
"$payterm" sim --dir "$dir/sim" --listen 127.0.0.1:0 --pay-delay-ms 500 \
    --notify-base "http://127.0.0.1:$notify_port" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/^payterm sim: ready on port \([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "sim-sdk-check: simulator did not start" >&2; cat "$log" >&2; exit 1; }
NODE_EXTRA_CA_CERTS="$dir/sim/ca.pem" node "$root/tests/sdk/sim_sdk_check.js" "$dir/sim" "$port" "$notify_port"
