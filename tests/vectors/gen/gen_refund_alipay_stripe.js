#!/usr/bin/env node
// gen_refund_alipay_stripe.js - the refund vectors of the Alipay and Stripe
// adapters, made with the vendors' official Node SDKs (alipay-sdk, stripe).
//
//   cd tests/vectors/gen && npm ci && node gen_refund_alipay_stripe.js
//
// Writes ../alipay_refund.json and ../stripe_refund.json, which
// tests/unit/test_gw_refund_alipay_stripe.c reads at run time (`make test`
// never needs Node).  Every input is fixed (keys in ../keys, timestamps, ids),
// so running this again gives the same files byte for byte: RSA PKCS#1 v1.5
// and HMAC are deterministic, and nothing here reads the clock.
//
// What comes from the SDKs:
//  - Alipay: the signed parameters of alipay.trade.refund and
//    alipay.trade.fastpay.refund.query (alipay-sdk's own sign(), the one its
//    exec() uses), and whether the SDK accepts each signed answer
//    (checkResponseSign) - `sdk_valid`.
//  - Stripe: the exact request stripe.refunds.create / stripe.refunds.list
//    put on the wire (method, path, form body, Idempotency-Key), captured by a
//    recording HttpClient instead of a network; how the SDK itself classifies
//    each answer (`sdk_result`: "ok" or the error class it throws); webhook
//    headers from stripe.webhooks.generateTestHeaderString and the SDK's
//    verdict from constructEvent.
// What payterm must decide (`outcome`, `code`, `rc`, ...) sits beside it.
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const { AlipaySdk } = require('alipay-sdk');
const alipayUtil = require(path.join(__dirname, 'node_modules/alipay-sdk/dist/commonjs/util.js'));
const Stripe = require('stripe');

const KEYS = path.join(__dirname, '..', 'keys');
const OUT = path.join(__dirname, '..');
const key = (name) => fs.readFileSync(path.join(KEYS, name), 'utf8');
const pkgVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', name, 'package.json'), 'utf8')).version;

const NOW_MS = 1764583200000; // 2025-12-01T10:00:00Z
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
  const config = { appId: '2021000000000001', privateKey: merchantKey, signType: 'RSA2',
                   charset: 'utf-8', version: '1.0' };
  const sdk = new AlipaySdk({ appId: config.appId, privateKey: merchantKey,
                              alipayPublicKey: key('alipay_gateway_public.pem') });
  const ts = alipayTimestamp(NOW_MS);

  const charge = { order_id: 'ORDER-20261130-0001', amount: 8888, currency: 'CNY', method: 'barcode',
                   gateway_trade_no: '2025113022001400001234567890' };
  const usdCharge = { order_id: 'XB-20261130-0002', amount: 2500, currency: 'USD', method: 'barcode',
                      gateway_trade_no: '2025113022001400009876543210' };
  const refund = { refund_id: 'R-20261201-0001', amount: 500, currency: 'CNY', reason: 'returned item' };

  // Requests exactly as the adapter builds them (same biz_content key order),
  // signed by the SDK's own sign().  No notify_url: alipay.trade.refund
  // answers synchronously.
  const requests = [
    { name: 'refund_with_reason', method: 'alipay.trade.refund', op: 'refund', charge, refund,
      biz: { out_trade_no: charge.order_id, refund_amount: '5.00', out_request_no: refund.refund_id,
             refund_reason: refund.reason } },
    { name: 'refund_utf8_reason_reserved_chars', method: 'alipay.trade.refund', op: 'refund', charge,
      refund: { refund_id: 'R-20261201-0002', amount: 8388, currency: 'CNY',
                reason: '退货 & 换货 = 1+1 "破损" 100%' },
      biz: { out_trade_no: charge.order_id, refund_amount: '83.88', out_request_no: 'R-20261201-0002',
             refund_reason: '退货 & 换货 = 1+1 "破损" 100%' } },
    { name: 'refund_cross_border_no_reason', method: 'alipay.trade.refund', op: 'refund',
      charge: usdCharge,
      refund: { refund_id: 'R-20261201-0003', amount: 1000, currency: 'USD', reason: '' },
      biz: { out_trade_no: usdCharge.order_id, refund_amount: '10.00', refund_currency: 'USD',
             out_request_no: 'R-20261201-0003' },
      note: 'reason empty: refund_reason omitted; a non-CNY charge names refund_currency' },
    { name: 'refund_query', method: 'alipay.trade.fastpay.refund.query', op: 'refund_query', charge,
      refund,
      biz: { out_trade_no: charge.order_id, out_request_no: refund.refund_id,
             query_options: ['gmt_refund_pay'] } },
  ].map((c) => {
    const signed = alipayUtil.sign(c.method, { timestamp: ts, bizContent: c.biz }, config);
    const names = Object.keys(signed).filter((k) => k !== 'sign').sort();
    const stringToSign = names.map((k) => `${k}=${signed[k]}`).join('&');
    const ok = crypto.createVerify('RSA-SHA256').update(stringToSign, 'utf8')
      .verify(crypto.createPublicKey(merchantKey), signed.sign, 'base64');
    if (!ok) throw new Error('alipay request string_to_sign reconstruction differs from the SDK');
    if (signed.biz_content !== JSON.stringify(c.biz)) throw new Error('SDK changed biz_content');
    return { name: c.name, op: c.op, charge: c.charge, refund: c.refund, now_ms: NOW_MS,
             params: signed, string_to_sign: stringToSign, sign: signed.sign,
             ...(c.note ? { note: c.note } : {}) };
  });

  // Answers, signed over the raw text of the xxx_response object.
  const resp = (name, op, raw, expect, opts = {}) => {
    const method = op === 'refund' ? 'alipay.trade.refund' : 'alipay.trade.fastpay.refund.query';
    const k = `${method.replaceAll('.', '_')}_response`;
    const sign = crypto.createSign('RSA-SHA256').update(opts.signed || raw, 'utf8')
      .sign(opts.signer || gatewayKey, 'base64');
    const body = opts.unsigned ? `{"${k}":${raw}}` : `{"${k}":${raw},"sign":"${sign}"}`;
    let sdkValid = !opts.unsigned;
    if (sdkValid) {
      try { sdk.checkResponseSign(body, k, sign, 'trace'); } catch (e) { sdkValid = false; }
    }
    return { name, op, charge: opts.charge || charge, refund: opts.refund || refund,
             status: opts.status || 200, body, sdk_valid: sdkValid, ...expect,
             ...(opts.note ? { note: opts.note } : {}) };
  };
  const tn = charge.gateway_trade_no;
  // refund_fee is the trade's cumulative refunded total (alipay-sdk-java-all
  // AlipayTradeRefundResponse: "指该笔交易累计已经退款成功的金额"): 12.00 here
  // after an earlier 7.00 refund, while this refund is 5.00.
  const refundOk = (extra = '', fc = 'Y', fee = '12.00') =>
    `{"code":"10000","msg":"Success","buyer_logon_id":"159****5620","buyer_user_id":"2088101117955611","fund_change":"${fc}","gmt_refund_pay":"2025-12-01 18:00:01","out_trade_no":"${charge.order_id}","refund_fee":"${fee}","send_back_fee":"5.00","trade_no":"${tn}"${extra}}`;
  const refused = (sub, msg) =>
    `{"code":"40004","msg":"Business Failed","sub_code":"${sub}","sub_msg":"${msg}","out_trade_no":"${charge.order_id}","refund_fee":"0.00","send_back_fee":"0.00"}`;
  const queryOk = (over = {}) => {
    const o = { code: '10000', msg: 'Success', gmt_refund_pay: '2025-12-01 18:00:01',
                out_request_no: refund.refund_id, out_trade_no: charge.order_id, refund_amount: '5.00',
                refund_status: 'REFUND_SUCCESS', total_amount: '88.88', trade_no: tn, ...over };
    for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
    return JSON.stringify(o);
  };
  const responses = [
    resp('refund_fund_change_Y', 'refund', refundOk(),
      { outcome: 'SUCCESS', trade_no: tn, amount: 0,
        note: 'refund_fee 12.00 is the cumulative total, not this refund: amount stays 0' }),
    resp('refund_fund_change_N', 'refund', refundOk('', 'N', '5.00'),
      { outcome: 'AMBIGUOUS', code: 'fund_change_N', trade_no: tn,
        note: 'Alipay answers a repeated out_request_no with fund_change N: only a query proves it' }),
    resp('refund_without_fund_change', 'refund',
      `{"code":"10000","msg":"Success","out_trade_no":"${charge.order_id}","refund_fee":"5.00","trade_no":"${tn}"}`,
      { outcome: 'AMBIGUOUS', code: 'missing_fund_change' }),
    resp('refund_other_order', 'refund', refundOk().replace(charge.order_id, 'ORDER-OTHER'),
      { outcome: 'AMBIGUOUS', code: 'out_trade_no_mismatch' }),
    resp('refund_other_trade', 'refund', refundOk().replace(tn, '2025113022001400000000000000'),
      { outcome: 'AMBIGUOUS', code: 'trade_no_mismatch' }),
    resp('refund_fee_below_refund', 'refund', refundOk('', 'Y', '3.00'),
      { outcome: 'AMBIGUOUS', code: 'refund_fee_mismatch',
        note: 'a cumulative total below this refund contradicts fund_change Y' }),
    resp('refund_fee_malformed', 'refund', refundOk('', 'Y', '5.001'),
      { outcome: 'AMBIGUOUS', code: 'malformed_amount' }),
    resp('refund_other_currency', 'refund', refundOk(',"refund_currency":"USD"'),
      { outcome: 'AMBIGUOUS', code: 'currency_mismatch' }),
    resp('refund_trade_not_exist', 'refund', refused('ACQ.TRADE_NOT_EXIST', '交易不存在'),
      { outcome: 'DECLINED', code: 'ACQ.TRADE_NOT_EXIST', message: '交易不存在' }),
    resp('refund_trade_status_error', 'refund', refused('ACQ.TRADE_STATUS_ERROR', '交易状态非法'),
      { outcome: 'DECLINED', code: 'ACQ.TRADE_STATUS_ERROR' }),
    resp('refund_amount_over_total', 'refund', refused('ACQ.REFUND_AMT_NOT_EQUAL_TOTAL', '退款金额超限'),
      { outcome: 'DECLINED', code: 'ACQ.REFUND_AMT_NOT_EQUAL_TOTAL' }),
    resp('refund_fee_invalid', 'refund', refused('ACQ.REASON_TRADE_REFUND_FEE_ERR', '退款金额无效'),
      { outcome: 'DECLINED', code: 'ACQ.REASON_TRADE_REFUND_FEE_ERR' }),
    resp('refund_seller_balance', 'refund', refused('ACQ.SELLER_BALANCE_NOT_ENOUGH', '卖家余额不足'),
      { outcome: 'DECLINED', code: 'ACQ.SELLER_BALANCE_NOT_ENOUGH' }),
    resp('refund_trade_frozen', 'refund', refused('ACQ.REASON_TRADE_BEEN_FREEZEN', '请求退款的交易被冻结'),
      { outcome: 'DECLINED', code: 'ACQ.REASON_TRADE_BEEN_FREEZEN' }),
    resp('refund_trade_finished', 'refund', refused('ACQ.TRADE_HAS_FINISHED', '交易已完结'),
      { outcome: 'DECLINED', code: 'ACQ.TRADE_HAS_FINISHED' }),
    resp('refund_not_allowed', 'refund', refused('ACQ.TRADE_NOT_ALLOW_REFUND', '当前交易不允许退款'),
      { outcome: 'DECLINED', code: 'ACQ.TRADE_NOT_ALLOW_REFUND' }),
    resp('refund_invalid_parameter', 'refund', refused('ACQ.INVALID_PARAMETER', '参数无效'),
      { outcome: 'DECLINED', code: 'ACQ.INVALID_PARAMETER' }),
    resp('refund_system_error', 'refund', refused('ACQ.SYSTEM_ERROR', '系统错误'),
      { outcome: 'AMBIGUOUS', code: 'ACQ.SYSTEM_ERROR' }),
    resp('refund_discordant_repeat', 'refund', refused('ACQ.DISCORDANT_REPEAT_REQUEST', '不一致的请求'),
      { outcome: 'AMBIGUOUS', code: 'ACQ.DISCORDANT_REPEAT_REQUEST', review: 1,
        note: 'the refund number was used with other parameters: an earlier refund under it may have moved money' }),
    resp('refund_unknown_20000', 'refund',
      '{"code":"20000","msg":"Service Currently Unavailable","sub_code":"aop.ACQ.SYSTEM_ERROR","sub_msg":"系统繁忙"}',
      { outcome: 'AMBIGUOUS', code: '20000' }),
    resp('refund_missing_parameter_40001', 'refund',
      '{"code":"40001","msg":"Missing Required Arguments","sub_code":"isv.missing-signature","sub_msg":"缺少签名参数"}',
      { outcome: 'DECLINED', code: 'isv.missing-signature' }),
    resp('refund_unknown_code', 'refund', '{"code":"30000","msg":"?"}',
      { outcome: 'AMBIGUOUS', code: '30000' }),
    resp('refund_tampered', 'refund', refundOk(), { outcome: 'AMBIGUOUS', code: 'invalid_signature' },
      { signed: refundOk('', 'N', '5.00') }),
    resp('refund_signed_by_another_key', 'refund', refundOk(),
      { outcome: 'AMBIGUOUS', code: 'invalid_signature' }, { signer: otherKey }),
    resp('refund_unsigned', 'refund', refundOk(), { outcome: 'AMBIGUOUS', code: 'invalid_signature' },
      { unsigned: true }),
    resp('refund_http_502', 'refund', refundOk(), { outcome: 'AMBIGUOUS', code: 'http_502' },
      { status: 502 }),
    resp('query_refund_success', 'refund_query', queryOk(),
      { outcome: 'SUCCESS', trade_no: tn, amount: 500, currency: 'CNY' }),
    resp('query_refund_not_done', 'refund_query',
      `{"code":"10000","msg":"Success","out_request_no":"${refund.refund_id}","out_trade_no":"${charge.order_id}","trade_no":"${tn}"}`,
      { outcome: 'NOT_FOUND', code: 'no_refund',
        note: 'no refund_status: the refund was not received or failed (AlipayTradeFastpayRefundQueryResponse)' }),
    resp('query_refund_empty', 'refund_query', '{"code":"10000","msg":"Success"}',
      { outcome: 'NOT_FOUND', code: 'no_refund' }),
    resp('query_trade_not_exist', 'refund_query', refused('ACQ.TRADE_NOT_EXIST', '交易不存在'),
      { outcome: 'NOT_FOUND', code: 'ACQ.TRADE_NOT_EXIST' }),
    resp('query_other_refund', 'refund_query', queryOk({ out_request_no: 'R-20261201-0009' }),
      { outcome: 'AMBIGUOUS', code: 'out_request_no_mismatch' }),
    resp('query_without_out_request_no', 'refund_query', queryOk({ out_request_no: undefined }),
      { outcome: 'AMBIGUOUS', code: 'out_request_no_mismatch' }),
    resp('query_other_amount', 'refund_query', queryOk({ refund_amount: '4.00' }),
      { outcome: 'AMBIGUOUS', code: 'refund_amount_mismatch' }),
    resp('query_without_amount', 'refund_query', queryOk({ refund_amount: undefined }),
      { outcome: 'AMBIGUOUS', code: 'refund_amount_mismatch' }),
    resp('query_malformed_amount', 'refund_query', queryOk({ refund_amount: '5.0.0' }),
      { outcome: 'AMBIGUOUS', code: 'malformed_amount' }),
    resp('query_other_order', 'refund_query', queryOk({ out_trade_no: 'ORDER-OTHER' }),
      { outcome: 'AMBIGUOUS', code: 'out_trade_no_mismatch' }),
    resp('query_unknown_status', 'refund_query', queryOk({ refund_status: 'REFUND_PROCESSING' }),
      { outcome: 'AMBIGUOUS', code: 'REFUND_PROCESSING' }),
    resp('query_system_error', 'refund_query', refused('ACQ.SYSTEM_ERROR', '系统错误'),
      { outcome: 'AMBIGUOUS', code: 'ACQ.SYSTEM_ERROR' }),
    resp('query_invalid_parameter', 'refund_query', refused('ACQ.INVALID_PARAMETER', '参数无效'),
      { outcome: 'AMBIGUOUS', code: 'ACQ.INVALID_PARAMETER',
        note: 'a query that fails says nothing about the refund: never a decline' }),
    resp('query_unknown_20000', 'refund_query',
      '{"code":"20000","msg":"Service Currently Unavailable","sub_code":"isp.unknow-error","sub_msg":"系统繁忙"}',
      { outcome: 'AMBIGUOUS', code: '20000' }),
    resp('query_tampered_amount', 'refund_query', queryOk({ refund_amount: '50.00' }),
      { outcome: 'AMBIGUOUS', code: 'invalid_signature' }, { signed: queryOk() }),
    resp('query_unsigned', 'refund_query', queryOk(), { outcome: 'AMBIGUOUS', code: 'invalid_signature' },
      { unsigned: true }),
    resp('query_cross_border_success', 'refund_query',
      JSON.stringify({ code: '10000', msg: 'Success', out_request_no: 'R-20261201-0003',
                       out_trade_no: usdCharge.order_id, refund_amount: '10.00',
                       refund_status: 'REFUND_SUCCESS', total_amount: '25.00',
                       trade_no: usdCharge.gateway_trade_no }),
      { outcome: 'SUCCESS', amount: 1000, currency: 'USD' },
      { charge: usdCharge, refund: { refund_id: 'R-20261201-0003', amount: 1000, currency: 'USD', reason: '' } }),
  ];

  write('alipay_refund.json', {
    generated_by: `tests/vectors/gen/gen_refund_alipay_stripe.js with alipay-sdk@${pkgVersion('alipay-sdk')}`,
    app_id: config.appId, now_ms: NOW_MS, requests, responses });
}

// ---- Stripe --------------------------------------------------------------

// A stand-in for the network: records what the SDK would send and answers
// with a canned response, so the SDK's own encoding is what is recorded.
class RecordingClient extends Stripe.HttpClient {
  constructor() { super(); this.seen = []; this.reply = { status: 200, body: '{}' }; }
  getClientName() { return 'payterm-vectors'; }
  makeRequest(host, port, p, method, headers, requestData) {
    this.seen.push({ host, path: p, method, headers, body: requestData });
    return Promise.resolve(new CannedResponse(this.reply.status, this.reply.body));
  }
}
class CannedResponse extends Stripe.HttpClientResponse {
  constructor(status, body) { super(status, { 'request-id': 'req_payterm' }); this._body = body; }
  getRawResponse() { return { body: this._body }; }
  toStream() { throw new Error('not streamed'); }
  toJSON() { return Promise.resolve(JSON.parse(this._body)); }
}

async function stripeVectors() {
  const rec = new RecordingClient();
  const stripe = new Stripe('sk_test_payterm', { httpClient: rec, maxNetworkRetries: 0, telemetry: false });
  const secret = 'whsec_payterm_test_secret_1234567890';
  const pi = 'pi_3MtwBwLkdIwHu7ix28a3tqPa';
  const charge = { order_id: 'ORDER-20261130-0003', amount: 1200, currency: 'USD', method: 'card_on_file',
                   payment_method: 'pm_card_visa', gateway_trade_no: pi };
  const refund = { refund_id: 'R-20261201-0003', amount: 500, currency: 'USD',
                   reason: 'returned item (box damaged) & 100% "refund"' };

  // The parameters in the order the adapter writes them; free text goes in
  // metadata[reason] because Stripe's own `reason` takes only duplicate,
  // fraudulent or requested_by_customer.
  const capture = async (fn) => {
    rec.seen = [];
    rec.reply = { status: 200, body: '{"object":"list","data":[],"has_more":false}' };
    try { await fn(); } catch (e) { /* the canned answer does not matter here */ }
    if (rec.seen.length !== 1) throw new Error('expected one request');
    const s = rec.seen[0];
    return { method: s.method, path: s.path, body: s.body || '',
             idempotency_key: s.headers['Idempotency-Key'] || null,
             content_type: s.headers['Content-Type'] || null };
  };
  const createParams = (c, r) => {
    const md = { refund_id: r.refund_id, order_id: c.order_id };
    if (r.reason) md.reason = r.reason;
    return { payment_intent: c.gateway_trade_no, amount: r.amount, metadata: md };
  };
  const requests = [];
  for (const [name, r] of [['refund_with_reason', refund],
    ['refund_without_reason', { refund_id: 'R-20261201-0004', amount: 700, currency: 'USD', reason: '' }]]) {
    requests.push({ name, op: 'refund', charge, refund: r,
      ...(await capture(() => stripe.refunds.create(createParams(charge, r), { idempotencyKey: r.refund_id }))) });
  }
  requests.push({ name: 'refund_query', op: 'refund_query', charge, refund,
    ...(await capture(() => stripe.refunds.list({ payment_intent: pi, limit: 100 }))) });
  // Without an explicit key the SDK keys every POST itself
  // (stripe-node-retry-<uuid>): a resend would then be a second refund.
  const unkeyed = await capture(() => stripe.refunds.create(createParams(charge, refund)));
  const sdkDefaultKey = /^stripe-node-retry-/.test(unkeyed.idempotency_key || '');

  // Answers, and what the SDK makes of each (its error class).
  const re = (status, extra = {}) => ({ id: 're_3MtwBwLkdIwHu7ix0Z9sWt5N', object: 'refund', amount: 500,
    charge: 'ch_3MtwBwLkdIwHu7ix28a3tqPa', currency: 'usd', created: NOW_S - 5,
    metadata: { order_id: charge.order_id, refund_id: refund.refund_id, reason: refund.reason },
    payment_intent: pi, reason: null, status, ...extra });
  const err = (type, extra = {}) => JSON.stringify({ error: { type, ...extra } });
  const rcase = async (name, op, status, body, expect, note) => {
    rec.reply = { status, body };
    let sdkResult = 'ok';
    try {
      if (op === 'refund') await stripe.refunds.create(createParams(charge, refund), { idempotencyKey: refund.refund_id });
      else await stripe.refunds.list({ payment_intent: pi, limit: 100 });
    } catch (e) { sdkResult = e.type || e.constructor.name; }
    return { name, op, status, body, sdk_result: sdkResult, ...expect, ...(note ? { note } : {}) };
  };
  const J = JSON.stringify;
  const list = (data, more = false) => J({ object: 'list', data, has_more: more, url: '/v1/refunds' });
  const other = re('succeeded', { id: 're_other', amount: 700,
    metadata: { order_id: charge.order_id, refund_id: 'R-20261201-0004' } });
  const responses = [
    await rcase('succeeded', 'refund', 200, J(re('succeeded')),
      { outcome: 'SUCCESS', code: 'succeeded', trade_no: 're_3MtwBwLkdIwHu7ix0Z9sWt5N', amount: 500, currency: 'USD' }),
    await rcase('pending', 'refund', 200, J(re('pending', { pending_reason: 'processing' })),
      { outcome: 'PENDING', code: 'pending' }),
    await rcase('requires_action', 'refund', 200, J(re('requires_action')),
      { outcome: 'PENDING', code: 'requires_action' }),
    await rcase('failed', 'refund', 200, J(re('failed', { failure_reason: 'expired_or_canceled_card' })),
      { outcome: 'DECLINED', code: 'failed', message: 'expired_or_canceled_card' }),
    await rcase('canceled', 'refund', 200, J(re('canceled')), { outcome: 'DECLINED', code: 'canceled' }),
    await rcase('unknown_status', 'refund', 200, J(re('processing_later')),
      { outcome: 'AMBIGUOUS', code: 'processing_later' }),
    await rcase('other_amount', 'refund', 200, J(re('succeeded', { amount: 50 })),
      { outcome: 'AMBIGUOUS', code: 'amount_mismatch', review: 1 }),
    await rcase('other_currency', 'refund', 200, J(re('succeeded', { currency: 'eur' })),
      { outcome: 'AMBIGUOUS', code: 'currency_mismatch', review: 1 }),
    await rcase('other_refund_id', 'refund', 200,
      J(re('succeeded', { metadata: { order_id: charge.order_id, refund_id: 'R-X' } })),
      { outcome: 'AMBIGUOUS', code: 'refund_id_mismatch' }),
    await rcase('other_payment_intent', 'refund', 200, J(re('succeeded', { payment_intent: 'pi_other' })),
      { outcome: 'AMBIGUOUS', code: 'payment_intent_mismatch' }),
    await rcase('float_amount', 'refund', 200, J(re('succeeded', { amount: 5.5 })),
      { outcome: 'AMBIGUOUS', code: 'malformed_amount' }),
    await rcase('over_refund', 'refund', 400, err('invalid_request_error', { param: 'amount',
      message: 'Refund amount ($5.00) is greater than unrefunded amount on charge ($2.00)' }),
      { outcome: 'DECLINED', code: 'invalid_request_error',
        message: 'Refund amount ($5.00) is greater than unrefunded amount on charge ($2.00)' },
      'Stripe sends this one without a code (param amount): a refusal, nothing was refunded'),
    await rcase('amount_too_large', 'refund', 400, err('invalid_request_error', { code: 'amount_too_large',
      param: 'amount', message: 'Refund amount is greater than the amount available' }),
      { outcome: 'DECLINED', code: 'amount_too_large' }),
    await rcase('charge_already_refunded', 'refund', 400, err('invalid_request_error',
      { code: 'charge_already_refunded', message: 'Charge ch_3MtwBwLkdIwHu7ix28a3tqPa has already been refunded.' }),
      { outcome: 'DECLINED', code: 'charge_already_refunded' }),
    await rcase('payment_intent_missing', 'refund', 400, err('invalid_request_error',
      { code: 'resource_missing', param: 'payment_intent', message: "No such payment_intent: 'pi_x'" }),
      { outcome: 'DECLINED', code: 'resource_missing' }),
    await rcase('idempotency_error', 'refund', 400, err('idempotency_error', { message:
      'Keys for idempotent requests can only be used with the same parameters they were first used with.' }),
      { outcome: 'DECLINED', code: 'idempotency_error', review: 1 },
      'same key, other parameters: this request was not executed; an operator looks at the key'),
    await rcase('idempotency_key_in_use', 'refund', 409, err('invalid_request_error',
      { code: 'idempotency_key_in_use' }), { outcome: 'AMBIGUOUS', code: 'idempotency_key_in_use' }),
    await rcase('rate_limited', 'refund', 429, err('invalid_request_error', { code: 'rate_limit' }),
      { outcome: 'AMBIGUOUS', code: 'rate_limit' }),
    await rcase('api_error_500', 'refund', 500, err('api_error'), { outcome: 'AMBIGUOUS', code: 'http_500' }),
    await rcase('bad_gateway_502', 'refund', 502, '<html>bad gateway</html>', { outcome: 'AMBIGUOUS', code: 'http_502' }),
    await rcase('not_json', 'refund', 200, '<html>', { outcome: 'AMBIGUOUS', code: 'http_200' }),
    await rcase('list_found', 'refund_query', 200, list([other, re('succeeded')]),
      { outcome: 'SUCCESS', code: 'succeeded', trade_no: 're_3MtwBwLkdIwHu7ix0Z9sWt5N', amount: 500, currency: 'USD' }),
    await rcase('list_found_pending', 'refund_query', 200, list([re('pending')]),
      { outcome: 'PENDING', code: 'pending' }),
    await rcase('list_found_failed', 'refund_query', 200, list([re('failed', { failure_reason: 'declined' })]),
      { outcome: 'DECLINED', code: 'failed', message: 'declined' }),
    await rcase('list_none', 'refund_query', 200, list([other]), { outcome: 'NOT_FOUND', code: 'no_refund' }),
    await rcase('list_empty', 'refund_query', 200, list([]), { outcome: 'NOT_FOUND', code: 'no_refund' }),
    await rcase('list_truncated', 'refund_query', 200, list([other], true),
      { outcome: 'AMBIGUOUS', code: 'refund_list_truncated' }),
    await rcase('list_twice', 'refund_query', 200, list([re('succeeded'), re('succeeded', { id: 're_twice' })]),
      { outcome: 'AMBIGUOUS', code: 'duplicate_refund', review: 1 }),
    await rcase('list_other_amount', 'refund_query', 200, list([re('succeeded', { amount: 499 })]),
      { outcome: 'AMBIGUOUS', code: 'amount_mismatch', review: 1 }),
    await rcase('list_without_data', 'refund_query', 200, '{"object":"list"}',
      { outcome: 'AMBIGUOUS', code: 'malformed_response' }),
    await rcase('list_error_404', 'refund_query', 404, err('invalid_request_error', { code: 'resource_missing' }),
      { outcome: 'AMBIGUOUS', code: 'resource_missing' }, 'a failed query says nothing about the refund'),
  ];

  // Webhooks.
  const event = (type, obj, id) => JSON.stringify(
    { id, object: 'event', api_version: '2024-06-20', created: NOW_S - 5, type,
      data: { object: obj }, livemode: false, pending_webhooks: 1 }, null, 2);
  const hdr = (payload, t, s = secret) => stripe.webhooks.generateTestHeaderString({ payload, secret: s, timestamp: t });
  const sdkCheck = (payload, header) => {
    try { stripe.webhooks.constructEvent(payload, header, secret, 300, undefined, NOW_MS); return true; }
    catch (e) { return false; }
  };
  const t = NOW_S - 10;
  const wcase = (name, payload, expect, opts = {}) => {
    const header = opts.header || hdr(opts.signed || payload, t, opts.secret);
    return { name, payload, header, now: NOW_S, tolerance: 300, sdk_valid: sdkCheck(payload, header),
             ...expect, ...(opts.note ? { note: opts.note } : {}) };
  };
  const ch = (refunds, extra = {}) => ({ id: 'ch_3MtwBwLkdIwHu7ix28a3tqPa', object: 'charge', amount: 1200,
    amount_captured: 1200, amount_refunded: 500, currency: 'usd', captured: true,
    metadata: { order_id: charge.order_id }, payment_intent: pi, refunded: false, status: 'succeeded',
    ...(refunds ? { refunds: { object: 'list', data: refunds, has_more: false, total_count: refunds.length,
                                url: '/v1/charges/ch_3MtwBwLkdIwHu7ix28a3tqPa/refunds' } } : {}),
    ...extra });
  const dashboard = re('succeeded', { id: 're_dashboard', amount: 200, metadata: {} });
  const refundEv = (expect) => ({ rc: 'OK', relevant: true, refund: true, refund_id: refund.refund_id,
    refund_no: 're_3MtwBwLkdIwHu7ix0Z9sWt5N', order_id: charge.order_id, trade_no: pi, amount: 500,
    currency: 'USD', ...expect });
  const updated = event('refund.updated', re('succeeded'), 'evt_refund_updated');
  const piOk = event('payment_intent.succeeded', { id: pi, object: 'payment_intent', amount: 1200,
    amount_received: 1200, currency: 'usd', status: 'succeeded', metadata: { order_id: charge.order_id } },
  'evt_payment_succeeded');
  const webhooks = [
    wcase('refund_updated_succeeded', updated, refundEv({ status: 'SUCCESS', dedup_id: 'evt_refund_updated' })),
    wcase('refund_updated_pending', event('refund.updated', re('pending'), 'evt_ru_pending'),
      refundEv({ status: 'PENDING' })),
    wcase('refund_updated_requires_action', event('refund.updated', re('requires_action'), 'evt_ru_ra'),
      refundEv({ status: 'PENDING' })),
    wcase('refund_updated_canceled', event('refund.updated', re('canceled'), 'evt_ru_canceled'),
      refundEv({ status: 'DECLINED' })),
    wcase('refund_failed', event('refund.failed', re('failed', { failure_reason: 'lost_or_stolen_card' }), 'evt_rf'),
      refundEv({ status: 'DECLINED', dedup_id: 'evt_rf' })),
    wcase('charge_refunded', event('charge.refunded', ch([dashboard, re('succeeded')]), 'evt_charge_refunded'),
      refundEv({ status: 'SUCCESS', dedup_id: 'evt_charge_refunded' }),
      { note: 'the first refund whose metadata names a refund_id (a dashboard refund before it has none)' }),
    wcase('charge_refunded_order_from_charge', event('charge.refunded',
      ch([re('succeeded', { metadata: { refund_id: refund.refund_id } })]), 'evt_cr_order'),
      refundEv({ status: 'SUCCESS' }), { note: 'metadata.order_id of the charge when the refund has none' }),
    wcase('charge_refunded_without_refunds', event('charge.refunded', ch(null), 'evt_cr_bare'),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'evt_cr_bare',
        note: 'API versions since 2022-11-15 leave charge.refunds out: confirmed by query' }),
    wcase('charge_refunded_only_dashboard', event('charge.refunded', ch([dashboard]), 'evt_cr_dash'),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'evt_cr_dash' }),
    wcase('refund_updated_not_ours', event('refund.updated', dashboard, 'evt_ru_dash'),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'evt_ru_dash' }),
    wcase('charge_refunded_order_conflict', event('charge.refunded',
      ch([re('succeeded')], { metadata: { order_id: 'ORDER-OTHER' } }), 'evt_cr_conflict'),
      { rc: 'EPARSE', note: 'the refund and its charge name two orders: refused' }),
    wcase('refund_created_other_event', event('refund.created', re('pending'), 'evt_rc'),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'evt_rc' }),
    wcase('refund_updated_float_amount', event('refund.updated', re('succeeded', { amount: 5.5 }), 'evt_ru_float'),
      { rc: 'EPARSE' }),
    wcase('refund_updated_tampered', updated.replace('"amount": 500', '"amount": 1200'),
      { rc: 'ESIG' }, { signed: updated }),
    wcase('refund_updated_wrong_secret', updated, { rc: 'ESIG' }, { secret: 'whsec_someone_else' }),
    wcase('payment_intent_succeeded_unchanged', piOk, { rc: 'OK', relevant: true, refund: false, status: 'SUCCESS',
      order_id: charge.order_id, trade_no: pi, amount: 1200, currency: 'USD', dedup_id: 'evt_payment_succeeded' }),
  ];

  write('stripe_refund.json', {
    generated_by: `tests/vectors/gen/gen_refund_alipay_stripe.js with stripe@${pkgVersion('stripe')}`,
    secret_key: 'sk_test_payterm', webhook_secret: secret, sdk_keys_every_post: sdkDefaultKey,
    requests, responses, webhooks });
}

alipayVectors();
stripeVectors().catch((e) => { console.error(e); process.exit(1); });
