#!/usr/bin/env node
// gen_refund_wechat_2c2p.js - refund vectors for the WeChat Pay APIv3 adapter,
// made with wechatpay-axios-plugin (the SDK gen.js already uses).
//
//   cd tests/vectors/gen && npm ci && node gen_refund_wechat_2c2p.js
//
// Writes ../wechat_refund.json, read by tests/unit/test_gw_refund_wechat_2c2p.c
// at run time (`make test` never needs Node).  Every input is fixed - the keys
// in ../keys, the timestamp, the nonces, the GCM nonce - and RSA PKCS#1 v1.5
// signatures are deterministic, so running it again gives the same file byte
// for byte.
//
// What comes from the SDK: every request's string to sign (Formatter.request),
// its signature (Rsa.sign) and Authorization (Formatter.authorization); every
// answer's and notification's platform signature (Formatter.response +
// Rsa.sign) and the SDK's own verdict on it (Rsa.verify, as its
// responseVerifier does); every notification resource (Aes.AesGcm.encrypt,
// and Aes.AesGcm.decrypt for the verdict).  What does not: the request bodies
// are JSON.stringify of the fields in the order payterm writes them, and the
// 80-byte cut of a long reason is payterm's rule, written again below.
//
// 2C2P: its refunds (Payment Maintenance, JWE inside JWS) have vectors of
// their own, made with the npm `jose` library: gen_2c2p_pm.mjs.
//
// Each case records what the SDK decided (`sdk_valid`) beside what payterm
// must decide (`outcome` / `rc`); where they differ on purpose, `note` says
// why.
'use strict';

const fs = require('fs');
const path = require('path');

const { Rsa, Formatter, Aes } = require('wechatpay-axios-plugin');

const KEYS = path.join(__dirname, '..', 'keys');
const OUT = path.join(__dirname, '..');
const key = (name) => fs.readFileSync(path.join(KEYS, name), 'utf8');

const NOW_MS = 1764554400000; // 2025-12-01T02:00:00Z = 10:00 in Beijing
const NOW_S = Math.floor(NOW_MS / 1000);

function write(name, obj) {
  fs.writeFileSync(path.join(OUT, name), JSON.stringify(obj, null, 2) + '\n');
  console.log('wrote', name);
}

// WeChat shows the reason in the customer's refund message and takes at most
// 80 bytes of it; payterm sends the longest prefix of whole UTF-8 characters
// that fits (the full reason stays in payterm's own record).
function wechatReason(reason) {
  const b = Buffer.from(reason, 'utf8');
  if (b.length <= 80) return reason;
  let n = 80;
  while (n > 0 && (b[n] & 0xc0) === 0x80) n--;
  return b.subarray(0, n).toString('utf8');
}

function wechatRefundVectors() {
  const merchantKey = Rsa.from(key('merchant_wechat_pkcs8.pem'));
  const platformKey = Rsa.from(key('wechat_platform_private.pem'));
  const platformPub = Rsa.from(key('wechat_platform_public.pem'), Rsa.KEY_TYPE_PUBLIC);
  const otherKey = Rsa.from(key('other_private.pem'));
  // The same merchant as tests/vectors/wechat.json.
  const mchid = '1900000001';
  const appid = 'wxd678efh567hg6787';
  const serial = '408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB';
  const platformSerial = '5157F09EFDC096DE15EBE81A47057A7232F1B8E1';
  const apiv3 = 'payterm-test-apiv3-key-32-bytes!';
  if (Buffer.byteLength(apiv3) !== 32) throw new Error('apiv3 key must be 32 bytes');
  const nonce = 'R7fK2mQ9xWb4NcV8pLs3Hd6Tj5Yg1Ze0';
  const ts = String(NOW_S);
  const base = 'https://api.mch.weixin.qq.com';
  const notifyUrl = 'https://pos.example.com/notify/wechat';
  const transactionId = '4200001234202511301234567890';

  const charge = { order_id: 'ORDER-20261130-0002', amount: 8888, currency: 'CNY', method: 'qr',
                   subject: 'Large latte 大杯', gateway_trade_no: transactionId };
  const refund = (refundId, amount, reason) => ({ refund_id: refundId, order_id: charge.order_id,
    amount, currency: 'CNY', reason });
  const longReason = `A${'退'.repeat(30)}`; // 91 bytes: cut to 79 (80 would split a character)

  // ---- requests ----------------------------------------------------------
  const req = (name, op, r, cfgNotifyUrl, method, pathq, data) => {
    const body = data === undefined ? '' : JSON.stringify(data);
    const message = Formatter.request(method, pathq, ts, nonce, body);
    const signature = Rsa.sign(message, merchantKey);
    const authorization = Formatter.authorization(mchid, nonce, signature, ts, serial);
    return { name, op, refund: r, notify_url: cfgNotifyUrl, method, url: base + pathq, body,
             message, signature, authorization };
  };
  const refundBody = (r, cfgNotifyUrl) => {
    const o = { out_trade_no: charge.order_id, out_refund_no: r.refund_id };
    const reason = wechatReason(r.reason);
    if (reason) o.reason = reason;
    if (cfgNotifyUrl) o.notify_url = cfgNotifyUrl;
    o.amount = { refund: r.amount, total: charge.amount, currency: charge.currency };
    return o;
  };
  const r1 = refund('R-20261201-0001', 500, 'returned item 退货');
  const r2 = refund('R-20261201-0002', 8388, '');
  const r3 = refund('R_20261201-0003', 100, longReason);
  const requests = [
    req('refund', 'refund', r1, notifyUrl, 'POST', '/v3/refund/domestic/refunds',
      refundBody(r1, notifyUrl)),
    req('refund_rest_no_reason_no_notify_url', 'refund', r2, '', 'POST',
      '/v3/refund/domestic/refunds', refundBody(r2, '')),
    req('refund_long_reason_cut', 'refund', r3, notifyUrl, 'POST', '/v3/refund/domestic/refunds',
      refundBody(r3, notifyUrl)),
    req('refund_query', 'refund_query', r1, notifyUrl, 'GET',
      `/v3/refund/domestic/refunds/${r1.refund_id}`),
  ];
  if (Buffer.byteLength(JSON.parse(requests[2].body).reason) !== 79) {
    throw new Error('the long reason should be cut to 79 bytes');
  }

  // ---- answers -----------------------------------------------------------
  // The SDK's responseVerifier checks only 2xx answers ("no need verification
  // anymore while the HTTP status is not 20X"); sdk_valid is what Rsa.verify
  // says of the signature, whatever the status.
  const signed = (body, opts = {}) => {
    const t = opts.ts || ts;
    const n = opts.nonce || 'w3Jq8LmN5c';
    const sig = Rsa.sign(Formatter.response(t, n, opts.signedBody !== undefined ? opts.signedBody : body),
      opts.key || platformKey);
    const headers = { 'Wechatpay-Timestamp': t, 'Wechatpay-Nonce': n, 'Wechatpay-Signature': sig,
                      'Wechatpay-Serial': opts.serial || platformSerial };
    const sdkValid = headers['Wechatpay-Serial'] === platformSerial &&
      Rsa.verify(Formatter.response(t, n, body), sig, platformPub);
    return { headers, body, sdk_valid: sdkValid };
  };
  const answer = (status, over = {}) => {
    const amount = { total: 8888, refund: 500, from: [], payer_total: 8888, payer_refund: 500,
                     settlement_refund: 500, settlement_total: 8888, discount_refund: 0,
                     currency: 'CNY', refund_fee: 0, ...(over.amount || {}) };
    const o = { refund_id: '50000000382019052709732678859', out_refund_no: r1.refund_id,
                transaction_id: transactionId, out_trade_no: charge.order_id, channel: 'ORIGINAL',
                user_received_account: '支付用户零钱' };
    if (status === 'SUCCESS') o.success_time = '2025-12-01T10:00:05+08:00';
    Object.assign(o, { create_time: '2025-12-01T10:00:00+08:00', status, funds_account: 'AVAILABLE',
                       amount, promotion_detail: [] });
    for (const [k, v] of Object.entries(over)) if (k !== 'amount') o[k] = v;
    for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
    return JSON.stringify(o);
  };
  const err = (code, message) => JSON.stringify({ code, message });
  const ok = { trade_no: '50000000382019052709732678859', amount: 500, currency: 'CNY' };
  const responses = [
    { name: 'refund_success', op: 'refund', status: 200, ...signed(answer('SUCCESS')),
      outcome: 'SUCCESS', code: 'SUCCESS', ...ok },
    { name: 'refund_processing', op: 'refund', status: 200, ...signed(answer('PROCESSING')),
      outcome: 'PENDING', code: 'PROCESSING', ...ok },
    { name: 'refund_abnormal', op: 'refund', status: 200, ...signed(answer('ABNORMAL')),
      outcome: 'PENDING', code: 'ABNORMAL', review: true, ...ok,
      note: 'the original route failed (a cancelled card); the money did not go back yet: the merchant may send it elsewhere by hand, so the refund is not final and an operator is asked' },
    { name: 'refund_closed', op: 'refund', status: 200, ...signed(answer('CLOSED')),
      outcome: 'DECLINED', code: 'CLOSED', ...ok },
    { name: 'query_success', op: 'refund_query', status: 200, ...signed(answer('SUCCESS')),
      outcome: 'SUCCESS', ...ok },
    { name: 'query_processing', op: 'refund_query', status: 200, ...signed(answer('PROCESSING')),
      outcome: 'PENDING', ...ok },
    { name: 'query_abnormal', op: 'refund_query', status: 200, ...signed(answer('ABNORMAL')),
      outcome: 'PENDING', code: 'ABNORMAL', review: true, ...ok },
    { name: 'query_closed', op: 'refund_query', status: 200, ...signed(answer('CLOSED')),
      outcome: 'DECLINED', ...ok },
    { name: 'query_not_exists', op: 'refund_query', status: 404,
      ...signed(err('RESOURCE_NOT_EXISTS', '退款单不存在')), outcome: 'NOT_FOUND',
      code: 'RESOURCE_NOT_EXISTS',
      note: 'never executed under this out_refund_no: the same refund_id may be sent again' },
    { name: 'query_param_error', op: 'refund_query', status: 400,
      ...signed(err('PARAM_ERROR', '参数错误')), outcome: 'AMBIGUOUS', code: 'PARAM_ERROR',
      note: 'a query that failed says nothing about the refund' },
    { name: 'query_frequency_limited', op: 'refund_query', status: 429,
      ...signed(err('FREQUENCY_LIMITED', '频率超限')), outcome: 'AMBIGUOUS', code: 'FREQUENCY_LIMITED' },
    // Refused for good (WeChat's table: "此状态代表退款申请失败").
    { name: 'refund_over_refund', op: 'refund', status: 400,
      ...signed(err('INVALID_REQUEST', '申请退款金额超过订单可退金额')), outcome: 'DECLINED',
      code: 'INVALID_REQUEST', message: '申请退款金额超过订单可退金额' },
    { name: 'refund_param_error', op: 'refund', status: 400,
      ...signed(err('PARAM_ERROR', '参数错误')), outcome: 'DECLINED', code: 'PARAM_ERROR' },
    { name: 'refund_not_enough', op: 'refund', status: 403,
      ...signed(err('NOT_ENOUGH', '基本账户余额不足，请充值后重新发起')), outcome: 'DECLINED',
      code: 'NOT_ENOUGH', message: '基本账户余额不足，请充值后重新发起' },
    { name: 'refund_user_account_abnormal', op: 'refund', status: 403,
      ...signed(err('USER_ACCOUNT_ABNORMAL', '退款请求失败')), outcome: 'DECLINED',
      code: 'USER_ACCOUNT_ABNORMAL' },
    { name: 'refund_no_auth', op: 'refund', status: 403,
      ...signed(err('NO_AUTH', '没有退款权限')), outcome: 'DECLINED', code: 'NO_AUTH' },
    { name: 'refund_order_not_exists', op: 'refund', status: 404,
      ...signed(err('RESOURCE_NOT_EXISTS', '订单不存在')), outcome: 'DECLINED',
      code: 'RESOURCE_NOT_EXISTS', note: 'refund: the order is unknown or unpaid, nothing to refund' },
    { name: 'refund_mch_not_exists', op: 'refund', status: 404,
      ...signed(err('MCH_NOT_EXISTS', '商户号不存在')), outcome: 'DECLINED', code: 'MCH_NOT_EXISTS' },
    { name: 'refund_sign_error', op: 'refund', status: 401,
      ...signed(err('SIGN_ERROR', '签名错误')), outcome: 'DECLINED', code: 'SIGN_ERROR' },
    // Not decided: resolved by query, never by a new refund id.
    { name: 'refund_frequency_limited', op: 'refund', status: 429,
      ...signed(err('FREQUENCY_LIMITED', '频率超限')), outcome: 'AMBIGUOUS', code: 'FREQUENCY_LIMITED' },
    { name: 'refund_system_error_4xx', op: 'refund', status: 400,
      ...signed(err('SYSTEM_ERROR', '系统错误')), outcome: 'AMBIGUOUS', code: 'SYSTEM_ERROR' },
    { name: 'refund_unknown_code', op: 'refund', status: 403,
      ...signed(err('SOMETHING_NEW', '?')), outcome: 'AMBIGUOUS', code: 'SOMETHING_NEW',
      note: 'a code payterm does not know is never taken for a decline' },
    { name: 'refund_system_error_500', op: 'refund', status: 500, headers: {},
      body: err('SYSTEM_ERROR', '系统超时'), sdk_valid: false, outcome: 'AMBIGUOUS', code: 'http_500' },
    { name: 'refund_bad_gateway_502', op: 'refund', status: 502, headers: {}, body: 'Bad Gateway',
      sdk_valid: false, outcome: 'AMBIGUOUS', code: 'http_502' },
    // Signatures.
    { name: 'refund_success_tampered_amount', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { amount: { refund: 5000, payer_refund: 5000 } }),
        { signedBody: answer('SUCCESS') }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'refund_success_other_key', op: 'refund', status: 200,
      ...signed(answer('SUCCESS'), { key: otherKey }), outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'refund_success_other_serial', op: 'refund', status: 200,
      ...signed(answer('SUCCESS'), { serial: '1DB6A1B2C3D4E5F60718293A4B5C6D7E8F901234' }),
      outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'refund_success_unsigned', op: 'refund', status: 200, headers: {}, body: answer('SUCCESS'),
      sdk_valid: false, outcome: 'AMBIGUOUS', code: 'invalid_signature' },
    { name: 'refund_not_enough_forged', op: 'refund', status: 403,
      ...signed(err('NOT_ENOUGH', '余额不足'), { key: otherKey }), outcome: 'AMBIGUOUS',
      code: 'invalid_signature',
      note: 'the SDK does not verify non-2xx answers; payterm does: a forged decline would free the amount for a second refund' },
    { name: 'query_not_exists_forged', op: 'refund_query', status: 404,
      ...signed(err('RESOURCE_NOT_EXISTS', '退款单不存在'), { key: otherKey }), outcome: 'AMBIGUOUS',
      code: 'invalid_signature' },
    // Signed, but not about this refund, or not readable.
    { name: 'refund_other_out_refund_no', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { out_refund_no: 'R-20261201-9999' })), outcome: 'AMBIGUOUS',
      code: 'refund_id_mismatch' },
    { name: 'refund_other_out_trade_no', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { out_trade_no: 'ORDER-20261130-0009' })), outcome: 'AMBIGUOUS',
      code: 'order_id_mismatch' },
    { name: 'refund_without_out_refund_no', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { out_refund_no: undefined })), outcome: 'AMBIGUOUS',
      code: 'refund_id_mismatch' },
    { name: 'refund_other_amount', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { amount: { refund: 501, payer_refund: 501 } })), outcome: 'AMBIGUOUS',
      code: 'amount_mismatch', review: true, trade_no: ok.trade_no, amount: 501, currency: 'CNY' },
    { name: 'refund_other_currency', op: 'refund', status: 200,
      ...signed(answer('SUCCESS', { amount: { currency: 'HKD' } })), outcome: 'AMBIGUOUS',
      code: 'currency_mismatch', review: true },
    { name: 'query_processing_other_amount', op: 'refund_query', status: 200,
      ...signed(answer('PROCESSING', { amount: { refund: 400 } })), outcome: 'AMBIGUOUS',
      code: 'amount_mismatch', review: true },
    { name: 'refund_success_malformed_amount', op: 'refund', status: 200,
      ...signed(answer('SUCCESS').replace('"refund":500', '"refund":500.0')), outcome: 'AMBIGUOUS',
      code: 'malformed_amount' },
    { name: 'refund_unknown_status', op: 'refund', status: 200, ...signed(answer('REFUNDING')),
      outcome: 'AMBIGUOUS', code: 'REFUNDING' },
    { name: 'refund_not_json', op: 'refund', status: 200, ...signed('<html>ok</html>'),
      outcome: 'AMBIGUOUS', code: 'malformed_response' },
  ];

  // ---- notifications -----------------------------------------------------
  const gcmNonce = 'b1Yx7Qm2Lk9d';
  const notifyBody = (event, plain, opts = {}) => {
    const aad = opts.aad !== undefined ? opts.aad : 'refund';
    let ct = Aes.AesGcm.encrypt(plain, apiv3, gcmNonce, aad);
    if (opts.flip !== undefined) {
      const b = Buffer.from(ct, 'base64');
      b[opts.flip < 0 ? b.length + opts.flip : opts.flip] ^= 0x01;
      ct = b.toString('base64');
    }
    return JSON.stringify({
      id: opts.id || 'EV-2025120110000500001', create_time: '2025-12-01T10:00:05+08:00',
      resource_type: 'encrypt-resource', event_type: event, summary: opts.summary || '退款成功',
      resource: { original_type: opts.originalType || 'refund', algorithm: 'AEAD_AES_256_GCM',
                  ciphertext: ct, associated_data: aad, nonce: gcmNonce },
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
  const refundPlain = (status, over = {}) => {
    const o = { mchid, transaction_id: transactionId, out_trade_no: charge.order_id,
                refund_id: '50000000382019052709732678859', out_refund_no: r1.refund_id,
                refund_status: status, success_time: '2025-12-01T10:00:05+08:00',
                user_received_account: '支付用户零钱',
                amount: { total: 8888, refund: 500, payer_total: 8888, payer_refund: 500,
                          ...(over.amount || {}) } };
    if (status !== 'SUCCESS') delete o.success_time;
    for (const [k, v] of Object.entries(over)) if (k !== 'amount') o[k] = v;
    for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
    return JSON.stringify(o);
  };
  const bound = { rc: 'OK', relevant: true, refund: true, refund_id: r1.refund_id,
                  refund_no: '50000000382019052709732678859', order_id: charge.order_id,
                  trade_no: transactionId, amount: 500, merchant_id: mchid, merchant_ok: true };
  const success = notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS'));
  const txnPlain = JSON.stringify({
    appid, mchid, out_trade_no: charge.order_id, transaction_id: transactionId, trade_type: 'NATIVE',
    trade_state: 'SUCCESS', trade_state_desc: '支付成功', bank_type: 'OTHERS',
    success_time: '2025-11-30T13:00:04+08:00', payer: { openid: 'oUpF8uMuAJO_M2pxb1Q9zNjWeS6o' },
    amount: { total: 8888, payer_total: 8888, currency: 'CNY', payer_currency: 'CNY' } });
  const notify = [
    ncase('refund_success', success, { ...bound, status: 'SUCCESS', currency: '',
      dedup_id: 'EV-2025120110000500001', plaintext: refundPlain('SUCCESS'),
      note: 'WeChat documents no currency in a refund notification: currency stays empty' }),
    ncase('refund_success_with_currency',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { amount: { currency: 'CNY' } }),
        { id: 'EV-2025120110000500002' }),
      { ...bound, status: 'SUCCESS', currency: 'CNY', dedup_id: 'EV-2025120110000500002' }),
    ncase('refund_abnormal',
      notifyBody('REFUND.ABNORMAL', refundPlain('ABNORMAL'), { id: 'EV-2025120110000500003', summary: '退款异常' }),
      { ...bound, status: 'PENDING', currency: '', dedup_id: 'EV-2025120110000500003' }),
    ncase('refund_closed',
      notifyBody('REFUND.CLOSED', refundPlain('CLOSED'), { id: 'EV-2025120110000500004', summary: '退款关闭' }),
      { ...bound, status: 'DECLINED', currency: '', dedup_id: 'EV-2025120110000500004' }),
    ncase('refund_other_mchid',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { mchid: '1900000002' }), { id: 'EV-2025120110000500005' }),
      { ...bound, status: 'SUCCESS', currency: '', merchant_id: '1900000002', merchant_ok: false,
        dedup_id: 'EV-2025120110000500005' }),
    ncase('refund_without_mchid',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { mchid: undefined }), { id: 'EV-2025120110000500006' }),
      { ...bound, status: 'SUCCESS', currency: '', merchant_id: '', merchant_ok: false,
        dedup_id: 'EV-2025120110000500006', note: 'a refund notification has no appid; without mchid it cannot bind' }),
    ncase('refund_status_disagrees_with_event',
      notifyBody('REFUND.SUCCESS', refundPlain('CLOSED'), { id: 'EV-2025120110000500007' }),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'EV-2025120110000500007',
        note: 'event_type and refund_status contradict each other: acknowledged, applied nowhere; the query decides' }),
    ncase('refund_processing_status_in_success_event',
      notifyBody('REFUND.SUCCESS', refundPlain('PROCESSING'), { id: 'EV-2025120110000500008' }),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'EV-2025120110000500008' }),
    ncase('refund_tampered_ciphertext', notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS'), { flip: 5 }),
      { rc: 'ESIG' }),
    ncase('refund_tampered_tag', notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS'), { flip: -1 }),
      { rc: 'ESIG' }),
    ncase('refund_other_associated_data',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS'), { aad: 'transaction' }).replace(
        '"associated_data":"transaction"', '"associated_data":"refund"'),
      { rc: 'ESIG' }),
    ncase('refund_body_changed_after_signing',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { amount: { refund: 8888 } })), { rc: 'ESIG' },
      { signedBody: success }),
    ncase('refund_signed_by_another_key', success, { rc: 'ESIG' }, { key: otherKey }),
    ncase('refund_too_old', success, { rc: 'ESIG', note: 'signature fine, 301 s old: a replay' },
      { ts: String(NOW_S - 301) }),
    ncase('refund_malformed_amount',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { amount: { refund: 5.5 } })), { rc: 'EPARSE' }),
    ncase('refund_without_out_refund_no',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { out_refund_no: undefined })), { rc: 'EPARSE' }),
    ncase('refund_without_refund_id',
      notifyBody('REFUND.SUCCESS', refundPlain('SUCCESS', { refund_id: undefined })), { rc: 'EPARSE' }),
    ncase('refund_event_with_transaction_resource',
      notifyBody('REFUND.SUCCESS', txnPlain, { aad: 'transaction', originalType: 'transaction',
        id: 'EV-2025120110000500009' }),
      { rc: 'OK', relevant: false, refund: false, dedup_id: 'EV-2025120110000500009',
        note: 'no refund_status: not a refund resource, nothing to apply (as before refunds existed)' }),
    ncase('payment_transaction_success',
      notifyBody('TRANSACTION.SUCCESS', txnPlain, { aad: 'transaction', originalType: 'transaction',
        summary: '支付成功', id: 'EV-2025113013000500001' }),
      { rc: 'OK', relevant: true, refund: false, status: 'SUCCESS', order_id: charge.order_id,
        trade_no: transactionId, amount: 8888, currency: 'CNY', merchant_id: mchid, merchant_ok: true,
        dedup_id: transactionId, note: 'payment notifications are unchanged: dedup by transaction_id' }),
  ];

  write('wechat_refund.json', {
    generated_by: 'tests/vectors/gen/gen_refund_wechat_2c2p.js with wechatpay-axios-plugin@0.9.6',
    mchid, appid, serial_no: serial, platform_serial: platformSerial, apiv3_key: apiv3,
    timestamp: ts, nonce, now_ms: NOW_MS,
    keys: { merchant_private: 'merchant_wechat_pkcs8.pem', platform_public: 'wechat_platform_public.pem',
            platform_cert: 'wechat_platform_cert.pem' },
    charge, requests, responses, notify });
}

wechatRefundVectors();
