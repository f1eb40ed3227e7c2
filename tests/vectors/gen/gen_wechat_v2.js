#!/usr/bin/env node
// gen_wechat_v2.js - vectors for WeChat Pay APIv2 payment code (付款码:
// micropay, orderquery, reverse) and `payterm sign/verify --gateway
// wechat-v2`, made with wechatpay-axios-plugin (already in package.json).
//
//   cd tests/vectors/gen && npm ci && node gen_wechat_v2.js
//
// Writes ../wechat_v2.json, read by tests/unit/test_gw_wechat_v2.c and
// tests/unit/test_cli_sign.c at run time.  Every input is fixed (merchant,
// APIv2 key, nonces, answers) and HMAC/MD5 are deterministic, so running it
// again gives the same file byte for byte.
//
// What comes from the SDK: every sign (Hash.sign over Formatter.ksort, as
// its Transformer signer does), every string to sign
// (Formatter.queryStringLike(Formatter.ksort(...))), the request XML
// (Transformer.toXml, which is what the SDK puts on the wire), and the SDK's
// own verdict on each answer (`sdk_result`: Transformer.toObject and then
// its response verifier - "ok", or the code of the error it returns).
// What does not: the answers are written the way WeChat writes them, every
// value in CDATA (xmlCdata below), and a few are hostile on purpose.
//
// Where payterm and the SDK decide differently, `note` says why.  The big
// one: the SDK's verifier gives up with EV2_RES_STATUS_CODE_NOT_SUCESS as
// soon as return_code or result_code is not SUCCESS - before it checks the
// sign - and hands the answer's fields over with the error, so a forged
// USERPAYING or NOTENOUGH is read as WeChat's word.  payterm verifies first.
'use strict';

const fs = require('fs');
const path = require('path');

const { Hash, Formatter, Transformer } = require('wechatpay-axios-plugin');

const OUT = path.join(__dirname, '..');

const appid = 'wxd678efh567hg6787';
const mchid = '1900000001';
const key = 'payterm-test-apiv2-key-32-chars!';
const otherKey = 'another-merchants-apiv2-key-32c!';
if (Buffer.byteLength(key) !== 32 || Buffer.byteLength(otherKey) !== 32) {
  throw new Error('APIv2 keys are 32 characters');
}
const nonce = 'R7fK2mQ9xWb4NcV8pLs3Hd6Tj5Yg1Ze0';
const answerNonce = 'Qx7Lp2Mv9Rt4Wz8Kc3Nb6Hd1Fs5Gj0Ya';

const charge = {
  order_id: 'WXV2-20251201-0001',
  method: 'barcode',
  amount: 8888,
  currency: 'CNY',
  subject: 'Large latte',
  payment_code: '134567890123456789',
};
const transactionId = '4200002025120112345678901234';

// ---- requests ---------------------------------------------------------------

const HMAC = 'HMAC-SHA256';

// payterm's cut of a long subject: 127 bytes, whole UTF-8 characters.
function cutBody(s) {
  const b = Buffer.from(s);
  if (b.length <= 127) return s;
  let n = 127;
  while (n > 0 && (b[n] & 0xc0) === 0x80) n -= 1;
  return b.subarray(0, n).toString();
}

// The fields in name order (payterm writes them sorted), the sign last:
// exactly what the SDK's signer appends to the object it was given.
function signedRequest(fields) {
  const data = Formatter.ksort(fields);
  const stringToSign = Formatter.queryStringLike(Formatter.ksort(data));
  const sign = Hash.sign(HMAC, data, key);
  return { data: { ...data, sign }, stringToSign, sign };
}

function common(c) {
  return { appid, mch_id: mchid, nonce_str: nonce, sign_type: HMAC, out_trade_no: c.order_id };
}

function request(name, op, c, extra = {}) {
  let fields = common(c);
  let urlPath = op === 'query' ? '/pay/orderquery' : '/secapi/pay/reverse';
  if (op === 'pay') {
    urlPath = '/pay/micropay';
    fields = {
      ...fields,
      body: cutBody(c.subject || c.order_id),
      total_fee: String(c.amount),
      fee_type: c.currency,
      spbill_create_ip: extra.spbill_create_ip || '127.0.0.1',
      auth_code: c.payment_code,
    };
  }
  const { data, stringToSign, sign } = signedRequest(fields);
  const r = {
    name,
    op,
    charge: c,
    method: 'POST',
    url: `https://api.mch.weixin.qq.com${urlPath}`,
    string_to_sign: stringToSign,
    sign,
    body: Transformer.toXml(data),
    mtls: op === 'cancel',
  };
  if (extra.spbill_create_ip) r.client_ip = extra.spbill_create_ip;
  return r;
}

// A value holding "]]>": the SDK writes it into one CDATA section, which
// the "]]>" closes early; payterm splits it.  The sign is the SDK's (it is
// over the value, not the XML); the body is payterm's.
function cdataRequest() {
  const c = { ...charge, order_id: 'WXV2-20251201-0006', subject: 'a]]><total_fee>1</total_fee>' };
  const r = request('pay_cdata_breakout_subject', 'pay', c);
  r.sdk_body = r.body;
  const sdkParsed = Transformer.toObject(r.sdk_body);
  r.sdk_body_reads_total_fee = sdkParsed.total_fee;
  r.body = r.body.replace(
    '<body><![CDATA[a]]><total_fee>1</total_fee>]]></body>',
    '<body><![CDATA[a]]]]><![CDATA[><total_fee>1</total_fee>]]></body>',
  );
  if (r.body === r.sdk_body) throw new Error('cdata case did not change');
  r.note = 'the SDK puts the value in one CDATA section, which its "]]>" closes: the rest of the '
    + 'value would be read as XML (sdk_body); payterm splits the section, so the value stays one '
    + 'value and the sign (the SDK\'s, over the value) still holds';
  return r;
}

const requests = [
  request('pay_cny', 'pay', charge),
  request('pay_special_characters', 'pay',
    { ...charge, order_id: 'WXV2-20251201-0002', subject: '拿铁 <大杯> & "热" \'双份\'' }),
  request('pay_long_subject_cut', 'pay',
    { ...charge, order_id: 'WXV2-20251201-0003', subject: '超大杯拿铁咖啡'.repeat(7) }),
  request('pay_usd_client_ip', 'pay',
    { ...charge, order_id: 'WXV2-20251201-0004', amount: 1250, currency: 'USD', subject: '' },
    { spbill_create_ip: '192.168.10.23' }),
  request('query', 'query', charge),
  request('cancel', 'cancel', charge),
  cdataRequest(),
];

// ---- answers ------------------------------------------------------------------

// Drops the fields a case leaves out ({ fee_type: undefined }).
function clean(o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

// WeChat's own style: every value in CDATA.
function xmlCdata(o) {
  return `<xml>${Object.entries(clean(o)).map(([k, v]) => `<${k}><![CDATA[${v}]]></${k}>`).join('')}</xml>`;
}

function signAnswer(o, k = key, type = HMAC) {
  const c = clean(o);
  return { ...c, sign: Hash.sign(type, c, k) };
}

// What the SDK makes of an answer body: parse, then its response verifier.
function sdkResult(body, urlPath) {
  let data;
  try {
    data = Transformer.toObject.call({ url: urlPath }, body);
  } catch (e) {
    return 'parse_error';
  }
  if (!data || typeof data !== 'object') return 'parse_error';
  const v = new Transformer(mchid, key).verifier.call({ url: urlPath }, data, {}, 200);
  return v instanceof Error ? v.code : 'ok';
}

const base = () => ({
  return_code: 'SUCCESS', return_msg: 'OK', appid, mch_id: mchid, nonce_str: answerNonce,
});

function payPaid(extra = {}) {
  return {
    ...base(),
    result_code: 'SUCCESS',
    openid: 'oUpF8uMuAJO_M2pxb1Q9zNjWeS6o',
    is_subscribe: 'N',
    trade_type: 'MICROPAY',
    bank_type: 'OTHERS',
    total_fee: '8888',
    fee_type: 'CNY',
    cash_fee: '8888',
    cash_fee_type: 'CNY',
    transaction_id: transactionId,
    out_trade_no: charge.order_id,
    attach: '',
    time_end: '20251201100005',
    ...extra,
  };
}

function payFail(errCode, des, extra = {}) {
  return { ...base(), result_code: 'FAIL', err_code: errCode, err_code_des: des, ...extra };
}

function queryState(state, extra = {}) {
  return {
    ...base(),
    result_code: 'SUCCESS',
    trade_state: state,
    trade_state_desc: extra.trade_state_desc || state,
    out_trade_no: charge.order_id,
    ...(state === 'SUCCESS' || state === 'REFUND'
      ? { transaction_id: transactionId, total_fee: '8888', fee_type: 'CNY', cash_fee: '8888',
        trade_type: 'MICROPAY', time_end: '20251201100005' }
      : {}),
    ...extra,
  };
}

const PATHS = { pay: '/pay/micropay', query: '/pay/orderquery', cancel: '/secapi/pay/reverse' };

const responses = [];
function resp(name, op, body, want, opts = {}) {
  const r = {
    name,
    op,
    status: opts.status || 200,
    body,
    outcome: want.outcome,
    code: want.code,
    sdk_result: opts.sdk === undefined ? sdkResult(body, PATHS[op]) : opts.sdk,
  };
  for (const k of ['trade_no', 'amount', 'currency', 'review', 'note']) {
    if (want[k] !== undefined) r[k] = want[k];
  }
  if (opts.charge) r.charge = opts.charge;
  responses.push(r);
}

const signed = (o) => xmlCdata(signAnswer(o));

// micropay
resp('pay_success', 'pay', signed(payPaid()),
  { outcome: 'SUCCESS', code: 'SUCCESS', trade_no: transactionId, amount: 8888, currency: 'CNY' });
resp('pay_success_sdk_style', 'pay', Transformer.toXml(signAnswer(payPaid())),
  { outcome: 'SUCCESS', code: 'SUCCESS', trade_no: transactionId, amount: 8888, currency: 'CNY',
    note: 'plain text values, as the SDK writes XML; attach is empty: <attach/>, not signed' });
resp('pay_success_without_fee_type', 'pay', signed(payPaid({ fee_type: undefined })),
  { outcome: 'SUCCESS', code: 'SUCCESS', amount: 8888, currency: 'CNY',
    note: 'fee_type absent means CNY (默认人民币)' });
resp('pay_success_with_coupons', 'pay',
  signed(payPaid({ coupon_fee: '100', coupon_count: '1', coupon_id_0: '10000', coupon_fee_0: '100',
    settlement_total_fee: '8888', promotion_detail: '{"promotion_detail":[{"promotion_id":"1"}]}' })),
  { outcome: 'SUCCESS', code: 'SUCCESS', amount: 8888, currency: 'CNY',
    note: 'fields payterm does not keep are still covered by the sign' });
resp('pay_success_amount_mismatch', 'pay', signed(payPaid({ total_fee: '8000', cash_fee: '8000' })),
  { outcome: 'AMBIGUOUS', code: 'amount_mismatch', review: true, amount: 8000, currency: 'CNY' });
resp('pay_success_currency_mismatch', 'pay', signed(payPaid({ fee_type: 'HKD' })),
  { outcome: 'AMBIGUOUS', code: 'currency_mismatch', review: true });
resp('pay_success_other_order', 'pay', signed(payPaid({ out_trade_no: 'WXV2-20251201-0099' })),
  { outcome: 'AMBIGUOUS', code: 'order_id_mismatch' });
resp('pay_success_bad_total_fee', 'pay', signed(payPaid({ total_fee: '88.88' })),
  { outcome: 'AMBIGUOUS', code: 'malformed_amount' });
resp('pay_success_other_merchant', 'pay', signed(payPaid({ mch_id: '1900000002' })),
  { outcome: 'AMBIGUOUS', code: 'merchant_mismatch' });
resp('pay_success_forged', 'pay', xmlCdata(signAnswer(payPaid(), otherKey)),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature' });
resp('pay_success_tampered', 'pay',
  xmlCdata({ ...signAnswer(payPaid({ total_fee: '1', cash_fee: '1' })), total_fee: '8888', cash_fee: '8888' }),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature' });
resp('pay_success_unsigned', 'pay', xmlCdata(payPaid()),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature' });
resp('pay_success_md5', 'pay', xmlCdata(signAnswer(payPaid(), key, 'MD5')),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'the SDK verifies a 32-digit sign as MD5; payterm sent sign_type=HMAC-SHA256 and takes nothing weaker back' });
resp('pay_success_lower_case_sign', 'pay',
  (() => { const o = signAnswer(payPaid()); return xmlCdata({ ...o, sign: o.sign.toLowerCase() }); })(),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'signs are upper-case hex; compared exactly, as the SDK compares them' });
resp('pay_userpaying', 'pay', signed(payFail('USERPAYING', '需要用户输入支付密码')),
  { outcome: 'PENDING', code: 'USERPAYING' });
resp('pay_userpaying_forged', 'pay', xmlCdata(signAnswer(payFail('USERPAYING', '需要用户输入支付密码'), otherKey)),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'the SDK never checks this sign (result_code FAIL) and reports USERPAYING as WeChat\'s' });
resp('pay_userpaying_unsigned', 'pay', xmlCdata(payFail('USERPAYING', '需要用户输入支付密码')),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'same: the SDK reports it without a sign' });
resp('pay_notenough_forged', 'pay', xmlCdata(signAnswer(payFail('NOTENOUGH', '余额不足'), otherKey)),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'a forged decline would fail a charge that may have been paid; the SDK believes it' });
resp('pay_systemerror', 'pay', signed(payFail('SYSTEMERROR', '系统超时')),
  { outcome: 'AMBIGUOUS', code: 'SYSTEMERROR' });
resp('pay_bankerror', 'pay', signed(payFail('BANKERROR', '银行系统异常')),
  { outcome: 'AMBIGUOUS', code: 'BANKERROR' });
resp('pay_orderpaid', 'pay', signed(payFail('ORDERPAID', '订单已支付')),
  { outcome: 'AMBIGUOUS', code: 'ORDERPAID',
    note: 'a resend after a lost answer gets ORDERPAID when the first send was paid: the query decides (and its amount check catches other parameters)' });
resp('pay_out_trade_no_used', 'pay', signed(payFail('OUT_TRADE_NO_USED', '商户订单号重复')),
  { outcome: 'AMBIGUOUS', code: 'OUT_TRADE_NO_USED', review: true });
resp('pay_invalid_request', 'pay', signed(payFail('INVALID_REQUEST', '重复请求支付')),
  { outcome: 'AMBIGUOUS', code: 'INVALID_REQUEST' });
for (const [code, des] of [
  ['AUTHCODEEXPIRE', '二维码已过期，请用户在微信上刷新后再试'],
  ['AUTH_CODE_ERROR', '授权码参数错误'],
  ['AUTH_CODE_INVALID', '授权码检验错误'],
  ['NOTENOUGH', '余额不足'],
  ['NOTSUPORTCARD', '不支持卡类型'],
  ['ORDERCLOSED', '订单已关闭'],
  ['ORDERREVERSED', '订单已撤销'],
  ['BUYER_MISMATCH', '支付帐号错误'],
  ['TRADE_ERROR', '交易错误'],
  ['PARAM_ERROR', '参数错误'],
  ['SIGNERROR', '签名错误'],
  ['NOAUTH', '商户无权限'],
]) {
  resp(`pay_declined_${code.toLowerCase()}`, 'pay', signed(payFail(code, des)),
    { outcome: 'DECLINED', code });
}
resp('pay_unknown_err_code', 'pay', signed(payFail('SOMETHING_NEW', '新错误')),
  { outcome: 'AMBIGUOUS', code: 'SOMETHING_NEW', note: 'a code payterm does not know is never a decline' });
resp('pay_return_fail_unsigned', 'pay', xmlCdata({ return_code: 'FAIL', return_msg: '签名错误' }),
  { outcome: 'AMBIGUOUS', code: 'invalid_signature',
    note: 'WeChat answers a refused request with an unsigned return_code FAIL; nothing in it is believed' });
resp('pay_return_fail_signed', 'pay', signed({ return_code: 'FAIL', return_msg: '参数格式校验错误' }),
  { outcome: 'AMBIGUOUS', code: 'return_code_fail' });
resp('pay_http_500', 'pay', '', { outcome: 'AMBIGUOUS', code: 'http_500' }, { status: 500, sdk: 'http_error' });
resp('pay_empty_body', 'pay', '', { outcome: 'AMBIGUOUS', code: 'malformed_response' }, { sdk: 'parse_error' });
resp('pay_json_body', 'pay', '{"return_code":"SUCCESS"}', { outcome: 'AMBIGUOUS', code: 'malformed_response' });
{
  const o = signAnswer(payPaid());
  const inner = xmlCdata(o).slice('<xml>'.length);
  resp('pay_doctype_entity', 'pay',
    `<!DOCTYPE xml [<!ENTITY t "8888">]><xml>${inner}`,
    { outcome: 'AMBIGUOUS', code: 'malformed_response',
      note: 'DOCTYPE and entities are refused, whatever the sign; the SDK (fast-xml-parser, processEntities) reads past the DOCTYPE and accepts it' });
  resp('pay_duplicate_field', 'pay',
    xmlCdata(o).replace('</xml>', '<total_fee><![CDATA[1]]></total_fee></xml>'),
    { outcome: 'AMBIGUOUS', code: 'malformed_response',
      note: 'a field given twice is refused: the SDK keeps one of the two (sdk_result)' });
  resp('pay_nested_field', 'pay',
    xmlCdata(o).replace('</xml>', '<detail><x>1</x></detail></xml>'),
    { outcome: 'AMBIGUOUS', code: 'malformed_response' });
}

// orderquery
const qpaid = { outcome: 'SUCCESS', trade_no: transactionId, amount: 8888, currency: 'CNY' };
resp('query_success', 'query', signed(queryState('SUCCESS', { trade_state_desc: '支付成功' })), { ...qpaid, code: 'SUCCESS' });
resp('query_refund', 'query', signed(queryState('REFUND', { trade_state_desc: '转入退款' })),
  { ...qpaid, code: 'REFUND', note: 'paid, then refunded: refunds are separate' });
resp('query_notpay', 'query', signed(queryState('NOTPAY', { trade_state_desc: '未支付' })), { outcome: 'PENDING', code: 'NOTPAY' });
resp('query_userpaying', 'query', signed(queryState('USERPAYING', { trade_state_desc: '用户支付中' })), { outcome: 'PENDING', code: 'USERPAYING' });
resp('query_accept', 'query', signed(queryState('ACCEPT', { trade_state_desc: '已接收，等待扣款' })), { outcome: 'PENDING', code: 'ACCEPT' });
resp('query_closed', 'query', signed(queryState('CLOSED', { trade_state_desc: '已关闭' })), { outcome: 'CANCELED', code: 'CLOSED' });
resp('query_revoked', 'query', signed(queryState('REVOKED', { trade_state_desc: '已撤销(付款码支付)' })), { outcome: 'CANCELED', code: 'REVOKED' });
resp('query_payerror', 'query', signed(queryState('PAYERROR', { trade_state_desc: '支付失败' })), { outcome: 'DECLINED', code: 'PAYERROR' });
resp('query_unknown_state', 'query', signed(queryState('SOMETHING', {})), { outcome: 'AMBIGUOUS', code: 'SOMETHING' });
resp('query_ordernotexist', 'query', signed(payFail('ORDERNOTEXIST', '此交易订单号不存在')), { outcome: 'NOT_FOUND', code: 'ORDERNOTEXIST' });
resp('query_systemerror', 'query', signed(payFail('SYSTEMERROR', '系统错误')), { outcome: 'AMBIGUOUS', code: 'SYSTEMERROR' });
resp('query_success_forged', 'query', xmlCdata(signAnswer(queryState('SUCCESS'), otherKey)), { outcome: 'AMBIGUOUS', code: 'invalid_signature' });
resp('query_success_other_order', 'query', signed(queryState('SUCCESS', { out_trade_no: 'WXV2-20251201-0099' })), { outcome: 'AMBIGUOUS', code: 'order_id_mismatch' });
resp('query_success_amount_mismatch', 'query', signed(queryState('SUCCESS', { total_fee: '1' })),
  { outcome: 'AMBIGUOUS', code: 'amount_mismatch', review: true, amount: 1, currency: 'CNY' });

// reverse
resp('reverse_success', 'cancel', signed({ ...base(), result_code: 'SUCCESS', recall: 'N' }), { outcome: 'CANCELED', code: 'REVERSED' });
resp('reverse_recall', 'cancel', signed({ ...base(), result_code: 'SUCCESS', recall: 'Y' }),
  { outcome: 'AMBIGUOUS', code: 'recall', note: 'recall=Y: WeChat wants the reverse called again' });
resp('reverse_systemerror', 'cancel', signed(payFail('SYSTEMERROR', '系统错误', { recall: 'Y' })), { outcome: 'AMBIGUOUS', code: 'SYSTEMERROR' });
resp('reverse_userpaying', 'cancel', signed(payFail('USERPAYING', '支付中不能撤销', { recall: 'Y' })), { outcome: 'AMBIGUOUS', code: 'USERPAYING' });
resp('reverse_ordernotexist', 'cancel', signed(payFail('ORDERNOTEXIST', '订单不存在', { recall: 'N' })), { outcome: 'NOT_FOUND', code: 'ORDERNOTEXIST' });
resp('reverse_expired', 'cancel', signed(payFail('REVERSE_EXPIRE', '订单已经超过撤销时限', { recall: 'N' })), { outcome: 'AMBIGUOUS', code: 'REVERSE_EXPIRE' });
resp('reverse_forged', 'cancel', xmlCdata(signAnswer({ ...base(), result_code: 'SUCCESS', recall: 'N' }, otherKey)), { outcome: 'AMBIGUOUS', code: 'invalid_signature' });

// ---- the CLI ---------------------------------------------------------------------

function cliSign(name, params) {
  const type = [Hash.ALGO_MD5, Hash.ALGO_HMAC_SHA256].includes(params.sign_type) ? params.sign_type : Hash.ALGO_MD5;
  const sign = Hash.sign(type, params, key);
  return {
    name,
    params,
    string_to_sign: Formatter.queryStringLike(Formatter.ksort(params)),
    sign,
    xml: Transformer.toXml({ ...params, sign }),
  };
}

const cli = {
  sign: [
    cliSign('hmac_sha256', { appid, mch_id: mchid, nonce_str: nonce, sign_type: 'HMAC-SHA256',
      body: 'Large latte', out_trade_no: charge.order_id, total_fee: '8888', fee_type: 'CNY',
      spbill_create_ip: '127.0.0.1', auth_code: charge.payment_code }),
    cliSign('md5', { appid, mch_id: mchid, nonce_str: nonce, sign_type: 'MD5', out_trade_no: charge.order_id }),
    cliSign('no_sign_type_is_md5', { appid, mch_id: mchid, nonce_str: nonce, out_trade_no: charge.order_id }),
    cliSign('empty_and_special_values', { appid, mch_id: mchid, nonce_str: nonce, sign_type: 'HMAC-SHA256',
      attach: '', body: '拿铁 <大杯> & "热"', out_trade_no: charge.order_id }),
  ],
  verify: [
    { name: 'valid', body: signed(payPaid()), valid: true, exit: 0 },
    { name: 'forged', body: xmlCdata(signAnswer(payPaid(), otherKey)), valid: false, exit: 3 },
    { name: 'forged_userpaying', body: xmlCdata(signAnswer(payFail('USERPAYING', '需要用户输入支付密码'), otherKey)), valid: false, exit: 3 },
    { name: 'unsigned', body: xmlCdata(payPaid()), valid: false, exit: 3 },
    { name: 'doctype', body: '<!DOCTYPE xml [<!ENTITY a "b">]><xml><a>&a;</a></xml>', valid: false, exit: 3 },
  ],
};

const out = {
  comment: 'generated by gen/gen_wechat_v2.js with wechatpay-axios-plugin; do not edit',
  sdk: 'wechatpay-axios-plugin@0.9.6',
  appid,
  mch_id: mchid,
  apiv2_key: key,
  other_apiv2_key: otherKey,
  nonce,
  charge,
  requests,
  responses,
  cli,
};
fs.writeFileSync(path.join(OUT, 'wechat_v2.json'), `${JSON.stringify(out, null, 2)}\n`);
console.log(`wechat_v2.json: ${requests.length} requests, ${responses.length} responses, `
  + `${cli.sign.length + cli.verify.length} CLI cases`);
