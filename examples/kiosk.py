#!/usr/bin/env python3
"""kiosk.py - a kiosk's side of payterm, Python standard library only.

    kiosk.py --api http://127.0.0.1:8080 --order ORDER-1 --amount 1200 \
             [--currency CNY] [--gateway alipay] [--method qr] \
             [--token-file FILE] [--state FILE]

Takes one charge and hands the goods over once it is paid, the way a kiosk
must (SPEC 5, 6):

* The Idempotency-Key of the order is chosen once and written to the state
  file before the first request, so every retry - after a timeout, a lost
  answer, a daemon restart or a restart of this program - asks for the same
  charge and can never pay twice.
* The QR code (Alipay qr_code, WeChat code_url) or payment page (2C2P) the
  answer carries is printed for the screen: "SHOW <text>".
* Goods are handed over from the fulfilment feed (GET /v1/events), never
  from the charge's answer: "DELIVER <order>" is printed once per order.
  The feed position and the orders delivered are kept in the state file,
  written (atomically) before the goods move, so a crash never delivers
  twice (it may leave one delivery to a person to check: the state file
  says which order was being delivered).
* A daemon that restarts or cannot be reached meanwhile is waited for:
  every request is retried with the same key until it answers.

Exit status: 0 delivered, 1 the charge failed or was canceled (printed),
2 usage.
"""
import argparse
import fcntl
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid


def load_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"keys": {}, "after": {}, "delivered": [], "delivering": None}


def save_state(path, state):
    """Atomic and durable: the file, then its directory (the rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)


class Api:
    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.token = token

    def call(self, method, path, body=None, key=None, timeout=35):
        """(status, json) - retried until the daemon answers."""
        delay = 0.2
        while True:
            req = urllib.request.Request(self.base + path, method=method)
            req.add_header("Accept", "application/json")
            if self.token:
                req.add_header("Authorization", "Bearer " + self.token)
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                req.add_header("Content-Type", "application/json")
            if key:
                req.add_header("Idempotency-Key", key)
            try:
                with urllib.request.urlopen(req, data, timeout=timeout) as r:
                    return r.status, json.loads(r.read() or b"null"), dict(r.headers)
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    doc = json.loads(raw)
                except ValueError:
                    doc = None
                code = (doc or {}).get("error", {}).get("code", "")
                # The first request with this key still runs, or the daemon is
                # stopping / its storage is busy: the same key, a bit later.
                # (offline_not_allowed / offline_limit_exceeded are answers:
                # this charge cannot be taken now; the caller says so.)
                if code in ("idempotency_key_in_use", "shutting_down", "storage_unavailable"):
                    wait = float(e.headers.get("Retry-After") or delay)
                    print("kiosk: %s %s: %d %s, retrying with the same key in %.1f s"
                          % (method, path, e.code, code, wait), flush=True)
                    time.sleep(min(wait, 5))
                    continue
                return e.code, doc, dict(e.headers)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                print("kiosk: %s %s: %s; retrying with the same key" % (method, path, e), flush=True)
                time.sleep(delay)
                delay = min(delay * 2, 3)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True)
    p.add_argument("--order", required=True)
    p.add_argument("--amount", type=int, required=True)
    p.add_argument("--currency", default="CNY")
    p.add_argument("--gateway", default="alipay")
    p.add_argument("--method", default="qr")
    p.add_argument("--subject", default="Kiosk order")
    p.add_argument("--token-file")
    p.add_argument("--state", default="kiosk-state.json")
    p.add_argument("--give-up-s", type=float, default=600)
    a = p.parse_args()
    token = open(a.token_file).read().strip() if a.token_file else None
    api = Api(a.api, token)
    # One kiosk process per state file: a second one would deliver too.
    lock = open(a.state + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("kiosk: another kiosk.py uses %s" % a.state, file=sys.stderr)
        return 2
    state = load_state(a.state)
    state.setdefault("after", {})

    if a.order in state["delivered"]:
        print("kiosk: %s was delivered before; nothing to do" % a.order, flush=True)
        return 0
    if state.get("delivering") == a.order:
        print("kiosk: %s was being delivered when this program stopped: check it by hand"
              % a.order, flush=True)
        return 1
    key = state["keys"].get(a.order)
    if not key:
        key = "kiosk-" + str(uuid.uuid4())
        state["keys"][a.order] = key
        # The feed's end now: this order's events come after it.
        after = 0
        while True:
            status, page, _ = api.call("GET", "/v1/events?after=%d&limit=100" % after)
            if status != 200 or not page["data"]:
                break
            after = page["next"]
        state["after"][a.order] = after
        save_state(a.state, state)  # before the first request: retries keep it

    body = {"order_id": a.order, "amount": a.amount, "currency": a.currency,
            "gateway": a.gateway, "method": a.method, "subject": a.subject}
    status, charge, headers = api.call("POST", "/v1/charges", body, key)
    replayed = headers.get("Idempotency-Replayed") == "true"
    print("kiosk: POST /v1/charges -> %d%s" % (status, " (replayed)" if replayed else ""), flush=True)
    if status not in (200, 201, 202):
        # 503 offline_not_allowed / offline_limit_exceeded: not now (the key
        # is free again); 402 declined; 409 order_id_conflict ...
        print("kiosk: charge not taken: %d %s" % (status, json.dumps(charge)), flush=True)
        return 1
    if charge.get("state") in ("FAILED", "CANCELED"):
        print("kiosk: %s is %s: no goods" % (a.order, charge["state"]), flush=True)
        return 1
    for field in ("qr_code", "code_url", "payment_url"):
        if charge.get(field):
            print("SHOW %s" % charge[field], flush=True)

    deadline = time.time() + a.give_up_s
    while time.time() < deadline:
        after = state["after"].get(a.order, 0)
        status, page, _ = api.call("GET", "/v1/events?after=%d&limit=100&wait=25" % after)
        if status != 200:
            print("kiosk: feed: %d %s" % (status, json.dumps(page)), flush=True)
            time.sleep(1)
            continue
        for ev in page["data"]:
            if ev["order_id"] != a.order:
                continue
            if ev["type"] == "charge.succeeded" and a.order not in state["delivered"]:
                state["delivering"] = a.order
                save_state(a.state, state)
                print("DELIVER %s" % a.order, flush=True)  # the goods move here
                state["delivered"].append(a.order)
                state["delivering"] = None
                save_state(a.state, state)
            elif ev["type"] in ("charge.failed", "charge.canceled"):
                print("kiosk: %s %s: no goods" % (a.order, ev["type"]), flush=True)
                return 1
        state["after"][a.order] = page["next"]
        save_state(a.state, state)
        if a.order in state["delivered"]:
            return 0
    # The customer left: withdraw the charge so that a late payment cannot
    # take money for goods nobody got (a paid one cannot be canceled: then
    # it is 409 and the operator refunds it).
    status, c, _ = api.call("POST", "/v1/charges/%s/cancel" % a.order, {}, key + "-cancel")
    print("kiosk: %s not paid within %g s; cancel -> %d %s" % (
        a.order, a.give_up_s, status, (c or {}).get("state") or json.dumps(c)), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
