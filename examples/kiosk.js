// kiosk.js - a browser kiosk's side of payterm (SPEC 15), no libraries.
//
// Takes one charge with an Idempotency-Key kept (in localStorage) across
// every retry and reload, shows the QR code the answer carries, and hands
// the goods over from the fulfilment feed exactly once: the order is marked
// delivered in localStorage before the goods move, so a reload never
// delivers twice.  A daemon that restarts meanwhile is waited for.
"use strict";
(function () {
  const q = new URLSearchParams(location.search);
  const api = (q.get("api") || "http://127.0.0.1:8080").replace(/\/$/, "");
  const order = q.get("order");
  const token = q.get("token");
  const el = (id) => document.getElementById(id);
  const say = (text, cls) => { el("status").textContent = text; el("status").className = cls || ""; };
  const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
  if (!order) { say("no order given (?order=...)", "bad"); return; }
  el("order").textContent = order;

  const store = "kiosk." + order;
  const saved = JSON.parse(localStorage.getItem(store) || "{}");
  const keep = () => localStorage.setItem(store, JSON.stringify(saved));

  async function call(method, path, body) {
    for (let delay = 200; ; delay = Math.min(delay * 2, 3000)) {
      const headers = { "Accept": "application/json" };
      if (token) headers["Authorization"] = "Bearer " + token;
      if (body) { headers["Content-Type"] = "application/json"; headers["Idempotency-Key"] = saved.key; }
      let r;
      try {
        r = await fetch(api + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
      } catch (e) {
        // The daemon is down, or this page's origin is not in cors_origins
        // (the browser does not tell which): the same key, later.
        say("cannot reach payterm (or this page's origin is not allowed); retrying", "bad");
        await sleep(delay); continue;
      }
      const data = await r.json().catch(() => null);
      const code = data && data.error ? data.error.code : "";
      // The same key later - but offline_not_allowed / offline_limit_exceeded
      // are answers (not now), returned to the caller.
      if (code === "idempotency_key_in_use" || code === "shutting_down" || code === "storage_unavailable") {
        say("payterm says " + code + "; retrying with the same key", "bad");
        await sleep(1000 * Number(r.headers.get("Retry-After") || 1)); continue;
      }
      return { status: r.status, data, replayed: r.headers.get("Idempotency-Replayed") === "true" };
    }
  }

  async function run() {
    if (saved.delivered) { say("delivered", "done"); return; }
    if (!saved.key) {
      // Chosen once, before the first request: every retry is the same
      // charge.  The feed's end now: this order's events come after it.
      const b = new Uint8Array(16); crypto.getRandomValues(b);
      saved.key = "kiosk-web-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      saved.after = 0;
      for (;;) {
        const f = await call("GET", "/v1/events?after=" + saved.after + "&limit=100");
        if (f.status !== 200 || !f.data.data.length) break;
        saved.after = f.data.next;
      }
      keep();
    }
    const r = await call("POST", "/v1/charges", {
      order_id: order, amount: Number(q.get("amount") || 100), currency: q.get("currency") || "CNY",
      gateway: q.get("gateway") || "alipay", method: q.get("method") || "qr", subject: "Kiosk order",
    });
    if (r.status >= 400) { say("not taken: " + (r.data && r.data.error ? r.data.error.message : r.status), "bad"); return; }
    const c = r.data;
    if (c.state === "FAILED" || c.state === "CANCELED") { say("not paid: " + c.state, "bad"); return; }
    el("qr").textContent = c.qr_code || c.code_url || c.payment_url || "(pay at the terminal)";
    el("qr").dataset.replayed = String(r.replayed);
    say("waiting for the payment");
    for (;;) {
      const f = await call("GET", "/v1/events?after=" + saved.after + "&limit=100&wait=25");
      if (f.status !== 200) { await sleep(1000); continue; }
      for (const e of f.data.data) {
        if (e.order_id !== order) continue;
        if (e.type === "charge.succeeded") {
          // One tab at a time, and the flag read again under the lock: two
          // tabs of this page must not both hand the goods over.
          const deliver = () => {
            const now = JSON.parse(localStorage.getItem(store) || "{}");
            if (now.delivered) { say("delivered", "done"); return; }
            saved.delivered = true; keep();        // before the goods move
            say("delivered", "done");               // the goods move here
          };
          if (navigator.locks) await navigator.locks.request(store, deliver); else deliver();
          return;
        }
        if (e.type === "charge.failed" || e.type === "charge.canceled") { say("not paid: " + e.type, "bad"); return; }
      }
      saved.after = f.data.next; keep();
    }
  }
  run();
})();
