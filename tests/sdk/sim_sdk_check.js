#!/usr/bin/env node
// sim_sdk_check.js - do the vendors' official Node SDKs accept the simulator?
//
//   scripts/sim-sdk-check.sh            (starts a simulator, runs this, stops it)
//
// Drives a running `payterm sim` with alipay-sdk, wechatpay-axios-plugin,
// stripe and jsonwebtoken (installed by `npm ci` in tests/vectors/gen) the way
// a merchant's server would: each SDK signs its requests and verifies the
// simulator's answers with its own code, and a local HTTP server receives the
// simulator's notifications and verifies them with the SDKs' own checks.
// Prints one line per check and exits 0 only when every check passed.  Not
// part of `make test` (payterm needs no Node); NODE_EXTRA_CA_CERTS must name
// the simulator's ca.pem.
'use strict';

const fs = require('fs');
const path = require('path');
const http = require('http');
const https = require('https');
const querystring = require('querystring');

const MODULES = path.join(__dirname, '..', 'vectors', 'gen', 'node_modules');
const { AlipaySdk } = require(path.join(MODULES, 'alipay-sdk'));
const { Wechatpay, Rsa, Aes, Formatter } = require(path.join(MODULES, 'wechatpay-axios-plugin'));
const Stripe = require(path.join(MODULES, 'stripe'));
const jwt = require(path.join(MODULES, 'jsonwebtoken'));

const [dir, port, notifyPort] = process.argv.slice(2);
if (!dir || !port || !notifyPort) {
  console.error('usage: sim_sdk_check.js SIM_DIR SIM_PORT NOTIFY_PORT');
  process.exit(2);
}
const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8').trim();
const cfg = JSON.parse(read('gateways.json')).gateways;
// glibc does not resolve *.localhost, libcurl does: Node uses plain localhost
// (the certificate names it too; the gateways are told apart by path).
const base = `https://localhost:${port}`;
const notifyBase = `http://127.0.0.1:${notifyPort}`;
const run = `${process.pid}${Date.now() % 100000}`;

let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` - ${detail}` : ''}`);
  if (!ok) failures++;
}
async function attempt(name, fn) {
  try {
    await fn();
  } catch (e) {
    check(name, false, e && (e.message || e.code || String(e)));
  }
}

// ---- notification receiver: verifies with the SDKs, counts per gateway ----
const received = { alipay: [], wechat: [], stripe: [], '2c2p': [] };
const alipaySdk = new AlipaySdk({
  appId: cfg.alipay.app_id,
  privateKey: read('alipay_app_private_key.pem'),
  alipayPublicKey: read('alipay_public_key.pem'),
  gateway: `${base}/gateway.do`,
  keyType: 'PKCS1',
});
const stripe = new Stripe(read('stripe_secret_key'), {
  host: 'localhost', port: Number(port), protocol: 'https', maxNetworkRetries: 0,
});
const platformKey = read('wechat_platform_public_key.pem');
const apiv3 = read('wechat_apiv3_key');

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    let ok = false, note = '';
    try {
      if (req.url === '/notify/alipay') {
        const form = querystring.parse(raw);
        ok = alipaySdk.checkNotifySignV2(form);
        note = `${form.out_trade_no} ${form.trade_status}`;
        res.end(ok ? 'success' : 'fail');
      } else if (req.url === '/notify/wechat') {
        const h = req.headers;
        ok = Rsa.verify(Formatter.response(h['wechatpay-timestamp'], h['wechatpay-nonce'], raw),
                        h['wechatpay-signature'], platformKey) &&
             h['wechatpay-serial'] === cfg.wechat.platform_serial;
        const r = JSON.parse(raw).resource;
        const tx = JSON.parse(Aes.AesGcm.decrypt(r.ciphertext, apiv3, r.nonce, r.associated_data));
        note = `${tx.out_trade_no} ${tx.trade_state}`;
        res.statusCode = ok ? 204 : 400;
        res.end();
      } else if (req.url === '/webhooks/stripe') {
        const ev = stripe.webhooks.constructEvent(raw, req.headers['stripe-signature'],
                                                  read('stripe_webhook_secret'));
        ok = true;
        note = `${ev.data.object.metadata.order_id} ${ev.type}`;
        res.end('{"received":true}');
      } else if (req.url === '/notify/2c2p') {
        const p = jwt.verify(JSON.parse(raw).payload, read('2c2p_secret_key'),
                             { algorithms: ['HS256'] });
        ok = true;
        note = `${p.invoiceNo} ${p.respCode}`;
        res.end();
      } else {
        res.statusCode = 404;
        res.end();
        return;
      }
    } catch (e) {
      note = e.message;
      res.statusCode = 400;
      res.end();
    }
    const gw = req.url.includes('stripe') ? 'stripe' : req.url.split('/').pop();
    received[gw].push({ ok, note });
  });
});

// ---- 2C2P: plain HTTPS + jsonwebtoken ------------------------------------
function post2c2p(pathname, payload) {
  const secret = read('2c2p_secret_key');
  const body = JSON.stringify({ payload: jwt.sign(payload, secret, { algorithm: 'HS256', noTimestamp: true }) });
  return new Promise((resolve, reject) => {
    const req = https.request(`${base}${pathname}`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const j = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(j.payload ? jwt.verify(j.payload, secret, { algorithms: ['HS256'] }) : j);
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  await new Promise((r) => server.listen(Number(notifyPort), '127.0.0.1', r));

  // Alipay: the SDK signs (common parameters in the query string, biz_content
  // in the body) and verifies each answer's sign over the raw response text.
  await attempt('alipay', async () => {
    const otn = `SDK-A-${run}`;
    const pay = await alipaySdk.exec('alipay.trade.pay', {
      notify_url: `${notifyBase}/notify/alipay`,
      bizContent: { out_trade_no: otn, scene: 'bar_code', auth_code: '287634438256643941',
                    subject: 'Large latte', total_amount: '88.88' },
    }, { validateSign: true });
    check('alipay trade.pay: SDK verified the response sign', pay.code === '10000', pay.tradeNo);
    const q = await alipaySdk.exec('alipay.trade.query', { bizContent: { out_trade_no: otn } },
                                   { validateSign: true });
    check('alipay trade.query', q.code === '10000' && q.tradeStatus === 'TRADE_SUCCESS', q.tradeStatus);
    const qr = await alipaySdk.exec('alipay.trade.precreate', {
      notify_url: `${notifyBase}/notify/alipay`,
      bizContent: { out_trade_no: `${otn}-QR`, subject: '大杯拿铁', total_amount: '12.00' },
    }, { validateSign: true });
    check('alipay trade.precreate', qr.code === '10000' && qr.qrCode.startsWith('https://'), qr.qrCode);
    const c = await alipaySdk.exec('alipay.trade.cancel', { bizContent: { out_trade_no: otn } },
                                   { validateSign: true });
    check('alipay trade.cancel', c.code === '10000' && c.action === 'refund', c.action);
    const bad = new AlipaySdk({ appId: cfg.alipay.app_id, privateKey: read('wechat_apiclient_key.pem'),
                                alipayPublicKey: read('alipay_public_key.pem'),
                                gateway: `${base}/gateway.do`, keyType: 'PKCS1' });
    const r = await bad.exec('alipay.trade.query', { bizContent: { out_trade_no: otn } },
                             { validateSign: true });
    check('alipay wrong app key -> isv.invalid-signature', r.subCode === 'isv.invalid-signature', r.subCode);
  });

  // WeChat Pay APIv3: the plugin signs Authorization and verifies every
  // answer's Wechatpay-* headers with the platform key named by its serial.
  await attempt('wechat', async () => {
    const wxpay = new Wechatpay({
      mchid: cfg.wechat.mchid, serial: cfg.wechat.serial_no,
      privateKey: read('wechat_apiclient_key.pem'),
      certs: { [cfg.wechat.platform_serial]: platformKey },
      baseURL: `${base}/`,
    });
    const otn = `SDKW${run}`;
    const res = await wxpay.v3.pay.transactions.native.post({
      appid: cfg.wechat.appid, mchid: cfg.wechat.mchid, description: 'Large latte',
      out_trade_no: otn, notify_url: `${notifyBase}/notify/wechat`,
      amount: { total: 1200, currency: 'CNY' },
    });
    check('wechat native: plugin verified the response', res.status === 200 &&
          res.data.code_url.startsWith('weixin://'), res.data.code_url);
    await sleep(1500); // the simulated customer scans and pays
    const q = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({
      params: { mchid: cfg.wechat.mchid }, out_trade_no: otn,
    });
    check('wechat query', q.data.trade_state === 'SUCCESS', q.data.trade_state);
    const otn2 = `SDKW2${run}`;
    await wxpay.v3.pay.transactions.native.post({
      appid: cfg.wechat.appid, mchid: cfg.wechat.mchid, description: 'never paid',
      out_trade_no: otn2, notify_url: `${notifyBase}/notify/wechat`,
      amount: { total: 1252, currency: 'CNY' },
    });
    const cl = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.close.post(
      { mchid: cfg.wechat.mchid }, { out_trade_no: otn2 });
    check('wechat close (204, signed empty body)', cl.status === 204, String(cl.status));
  });

  // Stripe: the SDK's idempotency keys, search and cancel.
  await attempt('stripe', async () => {
    const order = `SDK-S-${run}`;
    const params = { amount: 1200, currency: 'usd', confirm: true, payment_method: 'pm_card_visa',
                     payment_method_types: ['card'], metadata: { order_id: order } };
    const pi = await stripe.paymentIntents.create(params, { idempotencyKey: order });
    check('stripe create', pi.status === 'succeeded', pi.id);
    const again = await stripe.paymentIntents.create(params, { idempotencyKey: order });
    check('stripe replay (Idempotent-Replayed)', again.id === pi.id &&
          again.lastResponse.headers['idempotent-replayed'] === 'true', again.id);
    try {
      await stripe.paymentIntents.create({ ...params, amount: 1300 }, { idempotencyKey: order });
      check('stripe other parameters -> idempotency_error', false, 'no error');
    } catch (e) {
      check('stripe other parameters -> idempotency_error', e.type === 'StripeIdempotencyError', e.type);
    }
    const found = await stripe.paymentIntents.search({ query: `metadata['order_id']:'${order}'` });
    check('stripe search by metadata', found.data.length === 1 && found.data[0].id === pi.id);
    const p52 = await stripe.paymentIntents.create({ ...params, amount: 1252, metadata: { order_id: `${order}-52` } },
                                                   { idempotencyKey: `${order}-52` });
    const cx = await stripe.paymentIntents.cancel(p52.id);
    check('stripe cancel', p52.status === 'requires_action' && cx.status === 'canceled', cx.status);
    try {
      await stripe.paymentIntents.create({ ...params, amount: 1251, metadata: { order_id: `${order}-51` } },
                                         { idempotencyKey: `${order}-51` });
      check('stripe decline', false, 'no error');
    } catch (e) {
      check('stripe decline (card_error)', e.type === 'StripeCardError' && e.decline_code === 'insufficient_funds',
            e.decline_code);
    }
  });

  // 2C2P: JWT in, JWT out.
  await attempt('2c2p', async () => {
    const inv = `SDK-T-${run}`;
    const t = await post2c2p('/payment/4.3/paymentToken', {
      merchantID: cfg['2c2p'].merchant_id, invoiceNo: inv, description: 'Large latte',
      amount: 1000, currencyCode: 'THB', backendReturnUrl: `${notifyBase}/notify/2c2p`,
    });
    check('2c2p paymentToken: jsonwebtoken verified the answer', t.respCode === '0000' && !!t.paymentToken);
    await sleep(1500);
    const q = await post2c2p('/payment/4.3/paymentInquiry',
                             { merchantID: cfg['2c2p'].merchant_id, invoiceNo: inv, locale: 'en' });
    check('2c2p paymentInquiry', q.respCode === '0000' && q.amount === 1000, `${q.respCode} ${q.amount}`);
  });

  // Notifications, verified above by the SDKs' own checks.
  await sleep(4000);
  for (const gw of Object.keys(received)) {
    const n = received[gw];
    check(`${gw} notifications verified by the SDK`, n.length >= 2 && n.every((x) => x.ok),
          `${n.length} received: ${[...new Set(n.map((x) => x.note))].join('; ')}`);
  }
  server.close();
  console.log(failures ? `${failures} check(s) failed` : 'all SDK checks passed');
  process.exit(failures ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
