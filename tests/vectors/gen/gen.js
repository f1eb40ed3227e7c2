#!/usr/bin/env node
// gen.js - produces payterm's gateway test vectors with the vendors' official
// Node SDKs (alipay-sdk, wechatpay-axios-plugin, stripe, jsonwebtoken).
//
//   cd tests/vectors/gen && npm ci && node gen.js
//
// Writes ../alipay.json, ../wechat.json, ../stripe.json and ../2c2p.json,
// which the C tests (tests/unit/test_gw_*.c) read at run time: `make test`
// never needs Node.  Every input is fixed (keys in ../keys, timestamps,
// nonces), so running this again gives the same files byte for byte - RSA
// PKCS#1 v1.5 and HMAC are deterministic, and the GCM nonces are fixed.
//
// Each vector records what the SDK itself decided (`sdk_valid`) next to what
// payterm must decide (`valid`/`rc`); where they differ on purpose the case
// says why in `note`.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const { AlipaySdk } = require('alipay-sdk');
const alipayUtil = require(path.join(__dirname, 'node_modules/alipay-sdk/dist/commonjs/util.js'));
const { Rsa, Formatter, Aes } = require('wechatpay-axios-plugin');
const Stripe = require('stripe');
const stripeUtils = require(path.join(__dirname, 'node_modules/stripe/cjs/utils.js'));
const jwt = require('jsonwebtoken');

const KEYS = path.join(__dirname, '..', 'keys');
const OUT = path.join(__dirname, '..');
const key = (name) => fs.readFileSync(path.join(KEYS, name), 'utf8');

const NOW_MS = 1764478800000; // 2025-11-30T05:00:00Z
const NOW_S = Math.floor(NOW_MS / 1000);

function write(name, obj) {
  fs.writeFileSync(path.join(OUT, name), JSON.stringify(obj, null, 2) + '\n');
  console.log('wrote', name);
}

// ---- Alipay -------------------------------------------------------------

function alipayTimestamp(ms) {
  // China Standard Time (UTC+8), yyyy-MM-dd HH:mm:ss
  return new Date(ms + 8 * 3600 * 1000).toISOString().replace('T', ' ').slice(0, 19);
}

function alipayVectors() {
  const merchantKey = key('merchant_alipay_pkcs1.pem');
  const gatewayKey = key('alipay_gateway_private.pem');
  const otherKey = key('other_private.pem');
  const config = {
    appId: '2021000000000001', privateKey: merchantKey, signType: 'RSA2',
    charset: 'utf-8', version: '1.0',
  };
  const sdk = new AlipaySdk({
    appId: config.appId, privateKey: merchantKey,
    alipayPublicKey: key('alipay_gateway_public.pem'),
  });
  const ts = alipayTimestamp(NOW_MS);
  const notifyUrl = 'https://pos.example.com/notify/alipay';

  // Requests exactly as the adapter builds them (same parameter and
  // biz_content key order), signed by the SDK's own sign().
  const requests = [
    { name: 'pay_barcode', method: 'alipay.trade.pay', op: 'pay',
      charge: { order_id: 'ORDER-20261130-0001', amount: 8888, currency: 'CNY', method: 'barcode',
                payment_code: '287634438256643941', subject: 'Large latte' },
      notify_url: notifyUrl,
      biz: { out_trade_no: 'ORDER-20261130-0001', scene: 'bar_code', auth_code: '287634438256643941',
             subject: 'Large latte', total_amount: '88.88' } },
    // A QR code's expiry (qr_timeout_s 90): timeout_express in whole
    // minutes, rounded up (AlipayTradePrecreateModel: 1m~15d, no decimals).
    { name: 'precreate_utf8_and_reserved_chars', method: 'alipay.trade.precreate', op: 'pay',
      charge: { order_id: 'ORDER-2', amount: 100000, currency: 'CNY', method: 'qr',
                subject: '大杯拿铁 & cake = 2+1 "quoted" 100%' },
      notify_url: notifyUrl, expire_in_s: 90,
      biz: { out_trade_no: 'ORDER-2', subject: '大杯拿铁 & cake = 2+1 "quoted" 100%', total_amount: '1000.00',
             timeout_express: '2m' } },
    { name: 'close', method: 'alipay.trade.close', op: 'close',
      charge: { order_id: 'ORDER-2', amount: 100000, currency: 'CNY', method: 'qr' },
      biz: { out_trade_no: 'ORDER-2' } },
    { name: 'query', method: 'alipay.trade.query', op: 'query',
      charge: { order_id: 'ORDER-3', amount: 1, currency: 'CNY', method: 'barcode', payment_code: '1' },
      biz: { out_trade_no: 'ORDER-3' } },
    { name: 'cancel', method: 'alipay.trade.cancel', op: 'cancel',
      charge: { order_id: 'ORDER-4', amount: 1, currency: 'CNY', method: 'barcode', payment_code: '1' },
      biz: { out_trade_no: 'ORDER-4' } },
  ].map((c) => {
    const params = { timestamp: ts, bizContent: c.biz };
    if (c.notify_url) params.notify_url = c.notify_url;
    const signed = alipayUtil.sign(c.method, params, config);
    const names = Object.keys(signed).filter((k) => k !== 'sign').sort();
    const stringToSign = names.map((k) => `${k}=${signed[k]}`).join('&');
    const ok = crypto.createVerify('RSA-SHA256').update(stringToSign, 'utf8')
      .verify(crypto.createPublicKey(merchantKey), signed.sign, 'base64');
    if (!ok) throw new Error('alipay request string_to_sign reconstruction differs from the SDK');
    return { name: c.name, op: c.op, charge: c.charge, app_id: config.appId,
             notify_url: c.notify_url || '', now_ms: NOW_MS, expire_in_s: c.expire_in_s || 0,
             params: signed, string_to_sign: stringToSign, sign: signed.sign };
  });

  // `payterm sign --gateway alipay` input: a flat object of strings.  Values
  // keep their blanks (the SDK neither trims nor URL-encodes).
  const cliParams = { method: 'alipay.trade.query', app_id: config.appId, charset: 'utf-8',
    sign_type: 'RSA2', timestamp: ts, version: '1.0',
    biz_content: '{"out_trade_no":"ORDER 5 "}', zz_note: '  spaced value  ' };
  // biz_content goes in as an object: the SDK JSON.stringify()s it (a string
  // would come out double-encoded, quoted).
  const { biz_content: _biz, ...flat } = cliParams;
  const cliSigned = alipayUtil.sign('alipay.trade.query',
    { ...flat, bizContent: JSON.parse(_biz) }, config, { bizContentAutoSnakeCase: false });
  for (const k of Object.keys(cliParams)) {
    if (cliSigned[k] !== cliParams[k]) throw new Error(`cli vector: SDK changed ${k}`);
  }
  const cli = {
    params: cliParams,
    string_to_sign: Object.keys(cliSigned).filter((k) => k !== 'sign').sort()
      .map((k) => `${k}=${cliSigned[k]}`).join('&'),
    sign: cliSigned.sign,
  };

  // Notifications: Alipay signs every parameter but sign and sign_type.
  const notifyBase = {
    notify_time: '2025-11-30 13:00:05', notify_type: 'trade_status_sync',
    notify_id: '2025113000222130005000001111', app_id: config.appId, charset: 'utf-8',
    version: '1.0', sign_type: 'RSA2', trade_no: '2025113022001400001234567890',
    out_trade_no: 'ORDER-20261130-0001', trade_status: 'TRADE_SUCCESS',
    total_amount: '88.88', receipt_amount: '88.88', buyer_pay_amount: '88.88',
    subject: '大杯拿铁 & 1+1=2 100%', gmt_payment: '2025-11-30 13:00:04', body: '',
  };
  const signNotify = (p, k) => {
    const s = Object.keys(p).filter((n) => n !== 'sign' && n !== 'sign_type').sort()
      .map((n) => `${n}=${p[n]}`).join('&');
    return crypto.createSign('RSA-SHA256').update(s, 'utf8').sign(k, 'base64');
  };
  const notifyCase = (name, params, expect, note) => {
    const body = new URLSearchParams(params).toString();
    const sdkValid = sdk.checkNotifySignV2({ ...params });
    return { name, body, sdk_valid: sdkValid, ...expect, ...(note ? { note } : {}) };
  };
  const good = { ...notifyBase, sign: signNotify(notifyBase, gatewayKey) };
  const closed = { ...notifyBase, trade_status: 'TRADE_CLOSED', notify_id: 'N-closed' };
  closed.sign = signNotify(closed, gatewayKey);
  const badAmount = { ...notifyBase, total_amount: '88.8.8', notify_id: 'N-bad-amount' };
  badAmount.sign = signNotify(badAmount, gatewayKey);
  const noSignType = { ...good };
  delete noSignType.sign_type;
  const notify = [
    notifyCase('valid_trade_success', good,
      { rc: 'OK', status: 'SUCCESS', relevant: true, order_id: good.out_trade_no,
        trade_no: good.trade_no, amount: 8888, currency: 'CNY', merchant_id: config.appId,
        dedup_id: `${good.out_trade_no}:${good.notify_id}` }),
    notifyCase('valid_without_sign_type', noSignType,
      { rc: 'OK', status: 'SUCCESS', relevant: true, amount: 8888 }),
    notifyCase('valid_trade_closed', closed,
      { rc: 'OK', status: 'CANCELED', relevant: true, amount: 8888 }),
    notifyCase('tampered_amount', { ...good, total_amount: '0.01' }, { rc: 'ESIG' }),
    notifyCase('signed_by_another_key', { ...notifyBase, sign: signNotify(notifyBase, otherKey) },
      { rc: 'ESIG' }),
    notifyCase('extra_parameter', { ...good, refund_fee: '88.88' }, { rc: 'ESIG' }),
    notifyCase('missing_sign', { ...notifyBase }, { rc: 'ESIG' }),
    notifyCase('malformed_amount_validly_signed', badAmount, { rc: 'EPARSE' },
      'the signature is fine but 88.8.8 is not an amount: refused, never guessed'),
  ];

  // Responses: signed over the raw text of the xxx_response object.
  const resp = (name, method, charge, raw, expect, opts = {}) => {
    const signer = opts.signer || gatewayKey;
    const sign = crypto.createSign('RSA-SHA256').update(opts.signed || raw, 'utf8').sign(signer, 'base64');
    const k = `${method.replaceAll('.', '_')}_response`;
    const body = opts.signFirst ? `{"sign":"${sign}","${k}":${raw}}`
      : `{"${k}":${raw},"sign":"${sign}"}`;
    let sdkValid = true;
    try { sdk.checkResponseSign(body, k, sign, 'trace'); } catch (e) { sdkValid = false; }
    return { name, method, charge, status: 200, body, sdk_valid: sdkValid, ...expect,
             ...(opts.note ? { note: opts.note } : {}) };
  };
  const bar = { order_id: 'ORDER-20261130-0001', amount: 8888, currency: 'CNY', method: 'barcode' };
  const qr = { order_id: 'ORDER-2', amount: 100000, currency: 'CNY', method: 'qr' };
  const payOk = '{"code":"10000","msg":"Success","buyer_logon_id":"159****5620","buyer_pay_amount":"88.88","gmt_payment":"2025-11-30 13:00:04","out_trade_no":"ORDER-20261130-0001","total_amount":"88.88","trade_no":"2025113022001400001234567890"}';
  const responses = [
    resp('pay_success', 'alipay.trade.pay', bar, payOk,
      { op: 'pay', outcome: 'SUCCESS', trade_no: '2025113022001400001234567890', amount: 8888 }),
    resp('pay_success_sign_before_response', 'alipay.trade.pay', bar, payOk,
      { op: 'pay', outcome: 'SUCCESS', amount: 8888 },
      { signFirst: true, note: 'the SDK cuts the text at the last "sign" and fails; payterm reads the member itself' }),
    resp('pay_wait_buyer_pay', 'alipay.trade.pay', bar,
      '{"code":"10003","msg":"order success pay inprocess","out_trade_no":"ORDER-20261130-0001","trade_no":"2025113022001400001234567890"}',
      { op: 'pay', outcome: 'PENDING', code: '10003' }),
    resp('pay_unknown_20000', 'alipay.trade.pay', bar,
      '{"code":"20000","msg":"Service Currently Unavailable","sub_code":"aop.unknow-error","sub_msg":"系统繁忙"}',
      { op: 'pay', outcome: 'AMBIGUOUS', code: '20000' }),
    resp('pay_declined_40004', 'alipay.trade.pay', bar,
      '{"code":"40004","msg":"Business Failed","sub_code":"ACQ.PAYMENT_AUTH_CODE_INVALID","sub_msg":"支付失败，获取顾客账户信息失败"}',
      { op: 'pay', outcome: 'DECLINED', code: 'ACQ.PAYMENT_AUTH_CODE_INVALID' }),
    resp('pay_system_error_40004', 'alipay.trade.pay', bar,
      '{"code":"40004","msg":"Business Failed","sub_code":"ACQ.SYSTEM_ERROR","sub_msg":"系统错误"}',
      { op: 'pay', outcome: 'AMBIGUOUS', code: 'ACQ.SYSTEM_ERROR' }),
    resp('precreate_qr', 'alipay.trade.precreate', qr,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-2","qr_code":"https:\\/\\/qr.alipay.com\\/bax03431ljhokirwl38f00a7"}',
      { op: 'pay', outcome: 'PENDING', action_url: 'https://qr.alipay.com/bax03431ljhokirwl38f00a7' }),
    resp('query_trade_success', 'alipay.trade.query', bar,
      '{"code":"10000","msg":"Success","buyer_logon_id":"159****5620","out_trade_no":"ORDER-20261130-0001","total_amount":"88.88","trade_no":"2025113022001400001234567890","trade_status":"TRADE_SUCCESS"}',
      { op: 'query', outcome: 'SUCCESS', amount: 8888, trade_no: '2025113022001400001234567890' }),
    resp('query_trade_finished', 'alipay.trade.query', bar,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-20261130-0001","total_amount":"88.88","trade_no":"T1","trade_status":"TRADE_FINISHED"}',
      { op: 'query', outcome: 'SUCCESS', amount: 8888 }),
    resp('query_wait_buyer_pay', 'alipay.trade.query', bar,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-20261130-0001","total_amount":"88.88","trade_no":"T1","trade_status":"WAIT_BUYER_PAY"}',
      { op: 'query', outcome: 'PENDING' }),
    resp('query_trade_closed', 'alipay.trade.query', bar,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-20261130-0001","total_amount":"88.88","trade_no":"T1","trade_status":"TRADE_CLOSED"}',
      { op: 'query', outcome: 'CANCELED' }),
    resp('query_not_exist', 'alipay.trade.query', bar,
      '{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"}',
      { op: 'query', outcome: 'NOT_FOUND', code: 'ACQ.TRADE_NOT_EXIST' }),
    resp('query_success_malformed_amount', 'alipay.trade.query', bar,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-20261130-0001","total_amount":"88.881","trade_no":"T1","trade_status":"TRADE_SUCCESS"}',
      { op: 'query', outcome: 'AMBIGUOUS', code: 'malformed_amount' }),
    resp('cancel_ok', 'alipay.trade.cancel', bar,
      '{"code":"10000","msg":"Success","action":"close","out_trade_no":"ORDER-20261130-0001","retry_flag":"N","trade_no":"T1"}',
      { op: 'cancel', outcome: 'CANCELED' }),
    resp('cancel_retry', 'alipay.trade.cancel', bar,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-20261130-0001","retry_flag":"Y"}',
      { op: 'cancel', outcome: 'AMBIGUOUS' }),
    // alipay.trade.close of an expired QR code (SPEC 18).
    resp('close_ok', 'alipay.trade.close', qr,
      '{"code":"10000","msg":"Success","out_trade_no":"ORDER-2","trade_no":"2025113022001400001234567891"}',
      { op: 'close', outcome: 'CANCELED', trade_no: '2025113022001400001234567891' }),
    resp('close_never_scanned', 'alipay.trade.close', qr,
      '{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_NOT_EXIST","sub_msg":"交易不存在"}',
      { op: 'close', outcome: 'NOT_FOUND', code: 'ACQ.TRADE_NOT_EXIST' },
      { note: 'nobody scanned the code, so Alipay has no trade: nothing can be paid, counted as closed' }),
    resp('close_paid_meanwhile', 'alipay.trade.close', qr,
      '{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR","sub_msg":"交易状态不合法"}',
      { op: 'close', outcome: 'AMBIGUOUS', code: 'ACQ.TRADE_STATUS_ERROR' },
      { note: 'only a trade waiting for payment closes: paid, or closed already - a query tells which' }),
    resp('tampered_amount', 'alipay.trade.pay', bar,
      payOk.replace('"total_amount":"88.88"', '"total_amount":"0.01"'),
      { op: 'pay', outcome: 'AMBIGUOUS', code: 'invalid_signature' }, { signed: payOk }),
    resp('signed_by_another_key', 'alipay.trade.pay', bar, payOk,
      { op: 'pay', outcome: 'AMBIGUOUS', code: 'invalid_signature' }, { signer: otherKey }),
    resp('reformatted_json', 'alipay.trade.pay', bar, payOk.replace(/,/g, ', '),
      { op: 'pay', outcome: 'AMBIGUOUS', code: 'invalid_signature' },
      { signed: payOk, note: 'same data, other whitespace: the signature covers the raw text' }),
  ];
  // An unsigned error (Alipay leaves some gateway errors unsigned).
  responses.push({ name: 'unsigned_error', method: 'alipay.trade.pay', charge: bar, status: 200,
    body: '{"alipay_trade_pay_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature","sub_msg":"验签出错"}}',
    sdk_valid: false, op: 'pay', outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'no sign: never believed, not even as a decline' });
  responses.push({ name: 'http_502', method: 'alipay.trade.pay', charge: bar, status: 502,
    body: 'Bad Gateway', sdk_valid: false, op: 'pay', outcome: 'AMBIGUOUS', code: 'http_502' });

  write('alipay.json', { generated_by: 'tests/vectors/gen/gen.js with alipay-sdk@4.14.0',
    keys: { merchant_private: 'merchant_alipay_pkcs1.pem', alipay_public: 'alipay_gateway_public.pem' },
    requests, cli, notify, responses });
}

// ---- WeChat Pay ----------------------------------------------------------

function wechatVectors() {
  const merchantKey = Rsa.from(key('merchant_wechat_pkcs8.pem'));
  const platformKey = Rsa.from(key('wechat_platform_private.pem'));
  const platformPub = Rsa.from(key('wechat_platform_public.pem'), Rsa.KEY_TYPE_PUBLIC);
  const otherKey = Rsa.from(key('other_private.pem'));
  const mchid = '1900000001';
  const appid = 'wxd678efh567hg6787';
  const serial = '408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB';
  const platformSerial = '5157F09EFDC096DE15EBE81A47057A7232F1B8E1';
  const apiv3 = 'payterm-test-apiv3-key-32-bytes!';
  if (Buffer.byteLength(apiv3) !== 32) throw new Error('apiv3 key must be 32 bytes');
  const nonce = 'Q5A8JeRd3KzVbmuCfH2yXw7LtNs4Gp9U';
  const ts = String(NOW_S);
  const base = 'https://api.mch.weixin.qq.com';

  const req = (name, op, charge, method, pathq, data) => {
    const body = data === undefined ? '' : JSON.stringify(data);
    const message = Formatter.request(method, pathq, ts, nonce, body);
    const signature = Rsa.sign(message, merchantKey);
    const authorization = Formatter.authorization(mchid, nonce, signature, ts, serial);
    return { name, op, charge, method, url: base + pathq, body, message, signature, authorization };
  };
  const charge = { order_id: 'ORDER-20261130-0002', amount: 8888, currency: 'CNY', method: 'qr',
                   subject: 'Large latte 大杯' };
  // The code's expiry (qr_timeout_s 90 after NOW_MS), as the Native create
  // page writes time_expire: RFC 3339 in China time.
  const expireAt = NOW_MS + 90 * 1000;
  const timeExpire = new Date(expireAt + 8 * 3600 * 1000).toISOString().slice(0, 19) + '+08:00';
  const requests = [
    { ...req('native', 'pay', charge, 'POST', '/v3/pay/transactions/native',
      { appid, mchid, description: charge.subject, out_trade_no: charge.order_id,
        time_expire: timeExpire, notify_url: 'https://pos.example.com/notify/wechat',
        amount: { total: 8888, currency: 'CNY' } }), expire_at_ms: expireAt },
    req('query', 'query', charge, 'GET',
      `/v3/pay/transactions/out-trade-no/${charge.order_id}?mchid=${mchid}`),
    req('close', 'cancel', charge, 'POST',
      `/v3/pay/transactions/out-trade-no/${charge.order_id}/close`, { mchid }),
    req('close_expired', 'close', charge, 'POST',
      `/v3/pay/transactions/out-trade-no/${charge.order_id}/close`, { mchid }),
  ];

  const signed = (body, opts = {}) => {
    const t = opts.ts || ts;
    const n = opts.nonce || 'p1Xq9RmKz2';
    const sig = Rsa.sign(Formatter.response(t, n, opts.signedBody !== undefined ? opts.signedBody : body),
      opts.key || platformKey);
    const headers = { 'Wechatpay-Timestamp': t, 'Wechatpay-Nonce': n, 'Wechatpay-Signature': sig,
                      'Wechatpay-Serial': opts.serial || platformSerial };
    const sdkValid = headers['Wechatpay-Serial'] === platformSerial &&
      Rsa.verify(Formatter.response(t, n, body), sig, platformPub);
    return { headers, body, sdk_valid: sdkValid };
  };
  const txn = (state, extra = {}) => JSON.stringify({
    appid, mchid, out_trade_no: charge.order_id, transaction_id: '4200001234202511301234567890',
    trade_type: 'NATIVE', trade_state: state, trade_state_desc: state, bank_type: 'OTHERS',
    success_time: '2025-11-30T13:00:04+08:00', payer: { openid: 'oUpF8uMuAJO_M2pxb1Q9zNjWeS6o' },
    amount: { total: 8888, payer_total: 8888, currency: 'CNY', payer_currency: 'CNY' }, ...extra });
  const responses = [
    { name: 'native_code_url', op: 'pay', status: 200,
      ...signed('{"code_url":"weixin://wxpay/bizpayurl?pr=p4lpSuKzz"}'),
      outcome: 'PENDING', action_url: 'weixin://wxpay/bizpayurl?pr=p4lpSuKzz' },
    { name: 'native_param_error', op: 'pay', status: 400,
      ...signed('{"code":"PARAM_ERROR","message":"参数错误"}'), outcome: 'DECLINED', code: 'PARAM_ERROR' },
    { name: 'native_system_error', op: 'pay', status: 500, headers: {}, body: '{"code":"SYSTEM_ERROR","message":"系统错误"}',
      sdk_valid: false, outcome: 'AMBIGUOUS' },
    { name: 'query_success', op: 'query', status: 200, ...signed(txn('SUCCESS')),
      outcome: 'SUCCESS', amount: 8888, currency: 'CNY', trade_no: '4200001234202511301234567890' },
    { name: 'query_notpay', op: 'query', status: 200, ...signed(txn('NOTPAY')), outcome: 'PENDING' },
    { name: 'query_userpaying', op: 'query', status: 200, ...signed(txn('USERPAYING')), outcome: 'PENDING',
      paying: true },
    { name: 'query_closed', op: 'query', status: 200, ...signed(txn('CLOSED')), outcome: 'CANCELED' },
    { name: 'query_revoked', op: 'query', status: 200, ...signed(txn('REVOKED')), outcome: 'CANCELED' },
    { name: 'query_payerror', op: 'query', status: 200, ...signed(txn('PAYERROR')), outcome: 'DECLINED' },
    { name: 'query_not_exist', op: 'query', status: 404,
      ...signed('{"code":"ORDER_NOT_EXIST","message":"订单不存在"}'), outcome: 'NOT_FOUND', code: 'ORDER_NOT_EXIST' },
    { name: 'close_204', op: 'cancel', status: 204, ...signed(''), outcome: 'CANCELED' },
    { name: 'close_expired_204', op: 'close', status: 204, ...signed(''), outcome: 'CANCELED' },
    { name: 'close_orderpaid', op: 'close', status: 400,
      ...signed('{"code":"ORDERPAID","message":"订单已支付"}'), outcome: 'AMBIGUOUS', code: 'ORDERPAID',
      note: 'paid while it expired: the query that follows finds the payment' },
    { name: 'close_too_early', op: 'close', status: 400,
      ...signed('{"code":"INVALID_REQUEST","message":"订单生成后不能马上调用关单接口，最短调用时间间隔为5分钟"}'),
      outcome: 'AMBIGUOUS', code: 'INVALID_REQUEST' },
    { name: 'serial_lower_case', op: 'query', status: 200,
      ...signed(txn('SUCCESS'), { serial: platformSerial.toLowerCase() }), outcome: 'SUCCESS',
      note: 'the serial is hex: compared case-insensitively (the SDK looks it up case-sensitively)' },
    { name: 'tampered_amount', op: 'query', status: 200,
      ...signed(txn('SUCCESS', { amount: { total: 1, currency: 'CNY' } }), { signedBody: txn('SUCCESS') }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'signed_by_another_key', op: 'query', status: 200, ...signed(txn('SUCCESS'), { key: otherKey }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'serial_of_another_key', op: 'query', status: 200,
      ...signed(txn('SUCCESS'), { serial: '1DB6A1B2C3D4E5F60718293A4B5C6D7E8F901234' }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
  ];
  for (const r of responses) if (r.name === 'serial_lower_case') r.sdk_valid = false;

  // Notifications: signed body whose resource is AES-256-GCM with the APIv3 key.
  const gcmNonce = 'fdasflkja484';
  const notifyBody = (plain, opts = {}) => {
    const aad = opts.aad !== undefined ? opts.aad : 'transaction';
    let ct = Aes.AesGcm.encrypt(plain, apiv3, gcmNonce, aad);
    if (opts.flip !== undefined) {
      const b = Buffer.from(ct, 'base64');
      b[opts.flip < 0 ? b.length + opts.flip : opts.flip] ^= 0x01;
      ct = b.toString('base64');
    }
    return JSON.stringify({
      id: 'EV-2018022511223320873', create_time: '2025-11-30T13:00:05+08:00',
      resource_type: 'encrypt-resource', event_type: opts.event || 'TRANSACTION.SUCCESS',
      summary: '支付成功',
      resource: { original_type: 'transaction', algorithm: 'AEAD_AES_256_GCM', ciphertext: ct,
                  associated_data: opts.aadSent !== undefined ? opts.aadSent : aad, nonce: gcmNonce },
    });
  };
  const sdkDecrypts = (body) => {
    try {
      const r = JSON.parse(body).resource;
      Aes.AesGcm.decrypt(r.ciphertext, apiv3, r.nonce, r.associated_data);
      return true;
    } catch (e) { return false; }
  };
  const ncase = (name, body, expect, opts = {}) => {
    const s = signed(body, opts);
    return { name, ...s, sdk_valid: s.sdk_valid && sdkDecrypts(body), now_ms: NOW_MS, ...expect };
  };
  const plain = txn('SUCCESS');
  const good = notifyBody(plain);
  const notify = [
    ncase('valid', good, { rc: 'OK', relevant: true, status: 'SUCCESS', order_id: charge.order_id,
      trade_no: '4200001234202511301234567890', dedup_id: '4200001234202511301234567890',
      amount: 8888, currency: 'CNY', merchant_id: mchid, plaintext: plain }),
    ncase('amount_changed', notifyBody(txn('SUCCESS', { amount: { total: 1, currency: 'CNY' } })),
      { rc: 'ESIG' }, { signedBody: good }),
    ncase('signed_by_another_key', good, { rc: 'ESIG' }, { key: otherKey }),
    ncase('serial_of_another_key', good, { rc: 'ESIG' }, { serial: 'ABCDEF0123456789ABCDEF0123456789ABCDEF01' }),
    ncase('flipped_gcm_tag', notifyBody(plain, { flip: -1 }), { rc: 'ESIG' }),
    ncase('flipped_ciphertext', notifyBody(plain, { flip: 3 }), { rc: 'ESIG' }),
    ncase('changed_associated_data', notifyBody(plain, { aadSent: 'transaction2' }), { rc: 'ESIG' }),
    ncase('too_old', good, { rc: 'ESIG' }, { ts: String(NOW_S - 301) }),
    ncase('malformed_amount', notifyBody(txn('SUCCESS', { amount: { total: 88.88, currency: 'CNY' } })),
      { rc: 'EPARSE' }),
    ncase('refund_event', notifyBody(plain, { event: 'REFUND.SUCCESS' }),
      { rc: 'OK', relevant: false, dedup_id: 'EV-2018022511223320873' }),
  ];

  write('wechat.json', { generated_by: 'tests/vectors/gen/gen.js with wechatpay-axios-plugin@0.9.6',
    mchid, appid, serial_no: serial, platform_serial: platformSerial, apiv3_key: apiv3,
    notify_url: 'https://pos.example.com/notify/wechat', timestamp: ts, nonce, now_ms: NOW_MS,
    keys: { merchant_private: 'merchant_wechat_pkcs8.pem', platform_public: 'wechat_platform_public.pem',
            platform_cert: 'wechat_platform_cert.pem' },
    requests, responses, notify });
}

// ---- Stripe --------------------------------------------------------------

function stripeVectors() {
  const stripe = new Stripe('sk_test_payterm');
  const secret = 'whsec_payterm_test_secret_1234567890';
  const charge = { order_id: 'ORDER-20261130-0003', amount: 1200, currency: 'USD',
                   method: 'card_on_file', payment_method: 'pm_card_visa', customer: 'cus_NffrFeUfNV2Hib' };
  const create = stripeUtils.queryStringifyRequestData({
    amount: charge.amount, currency: 'usd', confirm: true, payment_method: charge.payment_method,
    customer: charge.customer, metadata: { order_id: charge.order_id },
    payment_method_types: ['card'] });
  const search = stripeUtils.queryStringifyRequestData({ query: `metadata['order_id']:'${charge.order_id}'` });

  const pi = (status, extra = {}) => ({ id: 'pi_3MtwBwLkdIwHu7ix28a3tqPa', object: 'payment_intent',
    amount: 1200, currency: 'usd', status, metadata: { order_id: charge.order_id }, ...extra });
  const event = (type, obj, id = 'evt_1NG8Du2eZvKYlo2CUI79vXWy') => JSON.stringify(
    { id, object: 'event', api_version: '2024-06-20', created: NOW_S - 5, type,
      data: { object: obj }, livemode: false, pending_webhooks: 1 }, null, 2);
  const hdr = (payload, t, s = secret) => stripe.webhooks.generateTestHeaderString({ payload, secret: s, timestamp: t });
  const sdkCheck = (payload, header, now) => {
    try { stripe.webhooks.constructEvent(payload, header, secret, 300, undefined, now * 1000); return true; }
    catch (e) { return false; }
  };
  const wcase = (name, payload, header, now, expect, note) => ({ name, payload, header, now, tolerance: 300,
    sdk_valid: sdkCheck(payload, header, now), ...expect, ...(note ? { note } : {}) });
  const succeeded = event('payment_intent.succeeded', pi('succeeded'));
  const t = NOW_S - 10;
  const goodHdr = hdr(succeeded, t);
  const webhooks = [
    wcase('succeeded', succeeded, goodHdr, NOW_S, { rc: 'OK', relevant: true, status: 'SUCCESS',
      order_id: charge.order_id, trade_no: 'pi_3MtwBwLkdIwHu7ix28a3tqPa', amount: 1200,
      currency: 'USD', dedup_id: 'evt_1NG8Du2eZvKYlo2CUI79vXWy' }),
    wcase('amount_changed', succeeded.replace('"amount": 1200', '"amount": 1'), goodHdr, NOW_S, { rc: 'ESIG' }),
    wcase('wrong_secret', succeeded, hdr(succeeded, t, 'whsec_someone_else'), NOW_S, { rc: 'ESIG' }),
    wcase('outside_tolerance', succeeded, hdr(succeeded, NOW_S - 301), NOW_S, { rc: 'ESIG' }),
    wcase('edge_of_tolerance', succeeded, hdr(succeeded, NOW_S - 300), NOW_S, { rc: 'OK', status: 'SUCCESS' }),
    wcase('future_timestamp', succeeded, hdr(succeeded, NOW_S + 3600), NOW_S, { rc: 'OK', status: 'SUCCESS' },
      'the SDKs only refuse old timestamps; payterm does the same'),
    wcase('second_v1_matches', succeeded,
      `t=${t},v1=${'0'.repeat(64)},${goodHdr.split(',')[1]}`, NOW_S, { rc: 'OK', status: 'SUCCESS' }),
    wcase('v0_only', succeeded, goodHdr.replace('v1=', 'v0='), NOW_S, { rc: 'ESIG' }),
    wcase('no_timestamp', succeeded, goodHdr.split(',')[1], NOW_S, { rc: 'ESIG' }),
    wcase('payment_failed', event('payment_intent.payment_failed', pi('requires_payment_method',
      { last_payment_error: { code: 'card_declined', decline_code: 'insufficient_funds' } }), 'evt_2'),
      hdr(event('payment_intent.payment_failed', pi('requires_payment_method',
        { last_payment_error: { code: 'card_declined', decline_code: 'insufficient_funds' } }), 'evt_2'), t),
      NOW_S, { rc: 'OK', relevant: true, status: 'DECLINED', dedup_id: 'evt_2' }),
    wcase('canceled', event('payment_intent.canceled', pi('canceled'), 'evt_3'),
      hdr(event('payment_intent.canceled', pi('canceled'), 'evt_3'), t), NOW_S,
      { rc: 'OK', relevant: true, status: 'CANCELED' }),
    wcase('other_event', event('charge.updated', { id: 'ch_1', object: 'charge' }, 'evt_4'),
      hdr(event('charge.updated', { id: 'ch_1', object: 'charge' }, 'evt_4'), t), NOW_S,
      { rc: 'OK', relevant: false, dedup_id: 'evt_4' }),
    wcase('malformed_amount', event('payment_intent.succeeded', pi('succeeded', { amount: 12.5 }), 'evt_5'),
      hdr(event('payment_intent.succeeded', pi('succeeded', { amount: 12.5 }), 'evt_5'), t), NOW_S,
      { rc: 'EPARSE' }),
  ];

  write('stripe.json', { generated_by: 'tests/vectors/gen/gen.js with stripe@23.1.0',
    secret_key: 'sk_test_payterm', webhook_secret: secret, charge,
    create_body: create, search_query: search, webhooks });
}

// ---- 2C2P ----------------------------------------------------------------

function c2pVectors() {
  const secret = 'CD229682D3297390B9F66FF4020B758F4A5E625AF4992E5D75D311D6458B38E2';
  const merchantID = 'JT04';
  const sign = (obj, s = secret) => jwt.sign(obj, s, { algorithm: 'HS256', noTimestamp: true });
  const sdkVerify = (token, s = secret) => {
    try { jwt.verify(token, s); return true; } catch (e) { return false; }
  };
  const charges = [
    { order_id: 'ORDER-20261130-0004', amount: 100000, currency: 'THB', method: 'redirect', subject: 'Kiosk order 4' },
    { order_id: 'ORDER-5', amount: 8880, currency: 'SGD', method: 'redirect', subject: 'Café "5"' },
    { order_id: 'ORDER-6', amount: 1500, currency: 'JPY', method: 'redirect', subject: '' },
  ];
  const notifyUrl = 'https://pos.example.com/notify/2c2p';
  // A payment page's expiry (qr_timeout_s 90 after NOW_MS): paymentExpiry,
  // "yyyy-MM-dd HH:mm:ss" without a zone, written in gateways.2c2p.utc_offset
  // (+07:00 by default; the SGD charge's merchant keeps +08:00).
  const expireAt = NOW_MS + 90 * 1000;
  const localTime = (ms, offsetMin) =>
    new Date(ms + offsetMin * 60 * 1000).toISOString().replace('T', ' ').slice(0, 19);
  const requests = charges.map((c, i) => {
    const major = { THB: 1000, SGD: 88.8, JPY: 1500 }[c.currency];
    const offset = c.currency === 'SGD' ? 480 : 420;
    const payload = { merchantID, invoiceNo: c.order_id, description: c.subject || c.order_id,
                      amount: major, currencyCode: c.currency };
    if (i < 2) payload.paymentExpiry = localTime(expireAt, offset);
    payload.backendReturnUrl = notifyUrl;
    const token = sign(payload);
    return { op: 'pay', charge: c, expire_at_ms: i < 2 ? expireAt : 0, utc_offset_min: offset,
             payload_text: JSON.stringify(payload), token, body: JSON.stringify({ payload: token }) };
  });
  const inquiry = { merchantID, invoiceNo: charges[0].order_id, locale: 'en' };
  requests.push({ op: 'query', charge: charges[0], payload_text: JSON.stringify(inquiry),
                  token: sign(inquiry), body: JSON.stringify({ payload: sign(inquiry) }) });

  // Raw payload text keeps 2C2P's own number spelling (1000.00).
  const rawToken = (text, s = secret) => jwt.sign(text, s, { algorithm: 'HS256' });
  const result = (code, amount = '1000.00', extra = '') =>
    `{"merchantID":"${merchantID}","invoiceNo":"ORDER-20261130-0004","cardNo":"411111XXXXXX1111","amount":${amount},"currencyCode":"THB","tranRef":"2876543","referenceNo":"2792000","approvalCode":"123456","transactionDateTime":"20251130130004","agentCode":"KTB","channelCode":"VI","respCode":"${code}","respDesc":"${code === '0000' ? 'Success' : 'x'}"${extra}}`;
  const noneToken = jwt.sign(JSON.parse(result('0000')), null, { algorithm: 'none', noTimestamp: true });
  const hs512 = jwt.sign(JSON.parse(result('0000')), secret, { algorithm: 'HS512', noTimestamp: true });
  const good = rawToken(result('0000'));
  const parts = good.split('.');
  const swapped = [parts[0], Buffer.from(result('0000', '1.00')).toString('base64url'), parts[2]].join('.');
  const vcase = (name, token, expect, note) => ({ name, token, sdk_valid: sdkVerify(token), ...expect,
    ...(note ? { note } : {}) });
  const verify = [
    vcase('valid', good, { rc: 'OK', payload_text: result('0000') }),
    vcase('wrong_secret', rawToken(result('0000'), 'ABCDEF'), { rc: 'ESIG' }),
    vcase('alg_none', noneToken, { rc: 'ESIG' }),
    vcase('alg_hs512', hs512, { rc: 'ESIG' },
      'jsonwebtoken accepts HS384/HS512 by default for a secret; payterm accepts HS256 only'),
    vcase('amount_changed', swapped, { rc: 'ESIG' }),
  ];
  const ncase = (name, token, expect) => ({ name, body: JSON.stringify({ payload: token }), ...expect });
  const notify = [
    ncase('success', good, { rc: 'OK', relevant: true, status: 'SUCCESS', order_id: 'ORDER-20261130-0004',
      trade_no: '2876543', amount: 100000, currency: 'THB', merchant_id: merchantID,
      dedup_id: 'ORDER-20261130-0004:2876543' }),
    ncase('declined', rawToken(result('4005')), { rc: 'OK', relevant: true, status: 'DECLINED' }),
    ncase('pending', rawToken(result('0001')), { rc: 'OK', relevant: true, status: 'PENDING' }),
    ncase('wrong_secret', rawToken(result('0000'), 'ABCDEF'), { rc: 'ESIG' }),
    ncase('alg_none', noneToken, { rc: 'ESIG' }),
    ncase('amount_changed', swapped, { rc: 'ESIG' }),
    ncase('malformed_amount_exponent', rawToken(result('0000', '1e3')), { rc: 'EPARSE' }),
    ncase('malformed_amount_precision', rawToken(result('0000', '1000.001')), { rc: 'EPARSE' }),
  ];
  const tokenResp = (obj) => JSON.stringify({ payload: sign(obj) });
  const responses = [
    { name: 'token_issued', op: 'pay', status: 200, body: tokenResp({
      webPaymentUrl: 'https://sandbox-pgw-ui.2c2p.com/payment/4.1/#/token/kSAops9Zwhos8hSTSeLTUcCnKfJkxhu',
      paymentToken: 'kSAops9Zwhos8hSTSeLTUcCnKfJkxhu', respCode: '0000', respDesc: 'Success' }),
      outcome: 'PENDING', action_url: 'https://sandbox-pgw-ui.2c2p.com/payment/4.1/#/token/kSAops9Zwhos8hSTSeLTUcCnKfJkxhu' },
    { name: 'token_existing_invoice', op: 'pay', status: 200,
      body: '{"respCode":"9015","respDesc":"Existing invoice number."}', outcome: 'AMBIGUOUS', code: '9015' },
    { name: 'token_invalid_merchant', op: 'pay', status: 200,
      body: '{"respCode":"9042","respDesc":"Invalid merchant."}', outcome: 'DECLINED', code: '9042' },
    { name: 'token_wrong_secret', op: 'pay', status: 200, body: JSON.stringify({ payload: jwt.sign({
      webPaymentUrl: 'https://evil.example/', respCode: '0000' }, 'ABCDEF', { noTimestamp: true }) }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'inquiry_success', op: 'query', status: 200, body: JSON.stringify({ payload: good }),
      outcome: 'SUCCESS', amount: 100000, currency: 'THB', trade_no: '2876543' },
    { name: 'inquiry_pending', op: 'query', status: 200, body: JSON.stringify({ payload: rawToken(result('0001')) }),
      outcome: 'PENDING', paying: false },
    { name: 'inquiry_in_progress', op: 'query', status: 200, body: JSON.stringify({ payload: rawToken(result('2001')) }),
      outcome: 'PENDING', paying: true },
    { name: 'inquiry_declined', op: 'query', status: 200, body: JSON.stringify({ payload: rawToken(result('4005')) }),
      outcome: 'DECLINED', code: '4005' },
    { name: 'inquiry_cancelled', op: 'query', status: 200, body: JSON.stringify({ payload: rawToken(result('0003')) }),
      outcome: 'CANCELED' },
    { name: 'inquiry_not_found', op: 'query', status: 200,
      body: '{"respCode":"2002","respDesc":"Transaction not found."}', outcome: 'NOT_FOUND' },
    { name: 'inquiry_unsigned_success', op: 'query', status: 200, body: result('0000'),
      outcome: 'AMBIGUOUS', code: '0000' },
    { name: 'inquiry_malformed_amount', op: 'query', status: 200,
      body: JSON.stringify({ payload: rawToken(result('0000', '1000.005')) }), outcome: 'AMBIGUOUS', code: 'malformed_amount' },
    { name: 'inquiry_alg_none', op: 'query', status: 200, body: JSON.stringify({ payload: noneToken }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
  ];
  write('2c2p.json', { generated_by: 'tests/vectors/gen/gen.js with jsonwebtoken@9.0.3',
    secret, merchant_id: merchantID, notify_url: notifyUrl, requests, verify, notify, responses });
}

alipayVectors();
wechatVectors();
stripeVectors();
c2pVectors();
