#!/usr/bin/env python3
"""browser.py - a real browser for the suites: Debian's headless Chromium,
driven over the DevTools protocol (python3-websocket, no Node).

usage: browser.py SCRIPT
  SCRIPT holds one step per line (blank lines and # comments skipped):
    open URL                  load URL in a fresh tab
    wait JS [SECONDS]         until the expression is true (default 15 s)
    eval JS                   run JS (a promise is awaited); failing is fatal
    expect JS VALUE           the expression's value, as JSON, must be VALUE
    screenshot FILE [W H]     a PNG of the page (default 1280 x 900)
    print JS                  the expression's value (JSON) on stdout
    touch FILE                create FILE (tells the driving script a step is done)
    waitfile FILE [SECONDS]   until FILE exists (the script's turn; default 120 s)
Each step is printed as it runs; the first that fails ends the run with
exit 1 and says why, with the page's console messages so far.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Page:
    def __init__(self, ws_url):
        # No Origin header: Chromium refuses a DevTools connection that
        # names an origin it was not started to allow (--remote-allow-origins),
        # and websocket-client sends one by default.
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.console = []

    def call(self, method, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.consoleAPICalled":
                args = msg["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif msg.get("method") == "Runtime.exceptionThrown":
                d = msg["params"]["exceptionDetails"]
                self.console.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"].get("message")))
                return msg.get("result", {})

    def value(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError("%s: %s" % (expr, d.get("exception", {}).get("description", d.get("text"))))
        return r.get("result", {}).get("value")


def start_chromium(profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise SystemExit("browser.py: chromium is needed (apt-get install chromium)")
    args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage",
            "--remote-debugging-port=0", "--user-data-dir=" + profile, "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    port = None
    while time.time() < deadline and port is None:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                raise SystemExit("browser.py: chromium exited (%s)" % proc.returncode)
            continue
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
    if port is None:
        proc.kill()
        raise SystemExit("browser.py: chromium did not open its DevTools port within 60 s")
    # Keep draining stderr so chromium never blocks on a full pipe.
    import threading
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, port


def page_socket(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
        for t in json.load(r):
            if t.get("type") == "page":
                return t["webSocketDebuggerUrl"]
    raise SystemExit("browser.py: no page target")


def run(script, page):
    for n, raw in enumerate(open(script), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        verb, _, rest = line.partition(" ")
        print("browser: %s" % line[:160], flush=True)
        if verb == "open":
            page.call("Page.navigate", url=rest)
            deadline = time.time() + 30
            while page.value("document.readyState") != "complete":
                if time.time() > deadline:
                    raise RuntimeError("the page did not load: " + rest)
                time.sleep(0.05)
        elif verb == "wait":
            m = re.match(r"^(.*?)(?:\s+(\d+(?:\.\d+)?))?$", rest)
            expr, secs = m.group(1), float(m.group(2) or 15)
            deadline = time.time() + secs
            while not page.value("!!(" + expr + ")"):
                if time.time() > deadline:
                    raise RuntimeError("line %d: still false after %g s: %s" % (n, secs, expr))
                time.sleep(0.1)
        elif verb == "eval":
            page.value(rest)
        elif verb == "expect":
            expr, _, want = rest.rpartition(" ")
            got = json.dumps(page.value(expr))
            if got != want:
                raise RuntimeError("line %d: %s is %s, expected %s" % (n, expr, got, want))
        elif verb == "print":
            print(json.dumps(page.value(rest)), flush=True)
        elif verb == "touch":
            open(rest, "a").close()
        elif verb == "waitfile":
            parts = rest.split()
            deadline = time.time() + (float(parts[1]) if len(parts) > 1 else 120)
            while not os.path.exists(parts[0]):
                if time.time() > deadline:
                    raise RuntimeError("line %d: %s did not appear" % (n, parts[0]))
                time.sleep(0.1)
        elif verb == "screenshot":
            parts = rest.split()
            w, h = (int(parts[1]), int(parts[2])) if len(parts) == 3 else (1280, 900)
            page.call("Emulation.setDeviceMetricsOverride", width=w, height=h,
                      deviceScaleFactor=1, mobile=False)
            time.sleep(0.3)
            png = base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"])
            with open(parts[0], "wb") as f:
                f.write(png)
        else:
            raise RuntimeError("line %d: unknown step %r" % (n, verb))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    profile = tempfile.mkdtemp(prefix="payterm-chromium.")
    proc = None
    page = None
    try:
        proc, port = start_chromium(profile)
        page = Page(page_socket(port))
        page.call("Runtime.enable")
        page.call("Page.enable")
        run(sys.argv[1], page)
        return 0
    except (RuntimeError, OSError, websocket.WebSocketException) as e:
        print("browser: FAILED: %s" % e, flush=True)
        if page and page.console:
            print("browser: the page's console:\n  " + "\n  ".join(page.console[-20:]), flush=True)
        return 1
    finally:
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
