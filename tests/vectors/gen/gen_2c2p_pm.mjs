#!/usr/bin/env node
// gen_2c2p_pm.mjs - JOSE vectors for 2C2P's Payment Maintenance envelope
// (a compact JWS, PS256, whose payload is a compact JWE, RSA-OAEP +
// A256GCM), made and opened with the npm `jose` library, an implementation
// independent of payterm's.
//
//   cmake --build --preset dev --target pt_jose_tool
//   cd tests/vectors/gen && npm ci && node gen_2c2p_pm.mjs
//
// Writes ../2c2p_pm.json, read by tests/unit/test_jose.c at run time (`make
// test` never needs Node).  Two directions:
//
//   jose_made     tokens `jose` made (CompactEncrypt, CompactSign) that
//                 payterm must open - and tokens it must refuse: other
//                 algorithms, "zip", "crit", an unencoded payload, a
//                 tampered JWE under a good signature, the wrong keys, a PSS
//                 salt that is not 32 bytes (made with node:crypto, since
//                 `jose` always uses 32).  `rc` is what payterm must answer.
//   payterm_made  tokens payterm made (tests/unit/pt_jose_tool, with a
//                 reproducible random stream named by `seed`) that `jose`
//                 opened here (compactVerify, compactDecrypt): `jose_text`
//                 is what it read.  test_jose.c makes each token again from
//                 the same seed and requires the same bytes.
//   requests      the XML payterm's adapter must write for R, RS and I on
//                 `charge`, sealed by pt_jose_tool (seeded) and opened by
//                 `jose` the way 2C2P opens a request.
//   answers       2C2P's answers to R, RS and I (the fields of 2C2P's
//                 examples, one changed at a time), sealed by `jose` as
//                 2C2P seals them, with what payterm must make of each
//                 (SPEC 5a's mapping; docs/2c2p-refunds.md's defensive
//                 readings) - read by tests/unit/test_gw_2c2p_pm.c.
//
// RSA-OAEP and PSS are randomised, so the jose_made tokens differ on every
// run; the file is the record of one run.  The keys are in ../keys
// (c2p_merchant_*: the merchant's pair; c2p_gateway_*: a stand-in for
// 2C2P's, with its certificate as PEM and as the DER .cer 2C2P hands out;
// other_*: a key nobody uses), made once with openssl for these tests only.
import { createPrivateKey, createPublicKey, sign as nodeSign, constants } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CompactEncrypt, CompactSign, FlattenedSign, compactDecrypt, compactVerify } from 'jose';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const KEYS = path.join(HERE, '..', 'keys');
const TOOL = process.env.PT_JOSE_TOOL ||
  path.join(HERE, '..', '..', '..', 'build', 'dev', 'tests', 'unit', 'pt_jose_tool');
const pem = (name) => fs.readFileSync(path.join(KEYS, name), 'utf8');
const priv = (name) => createPrivateKey(pem(name));
const pub = (name) => createPublicKey(pem(name));

const K = {
  merchant: priv('c2p_merchant_private.pem'),
  merchantPub: pub('c2p_merchant_public.pem'),
  gateway: priv('c2p_gateway_private.pem'),
  gatewayPub: pub('c2p_gateway_public.pem'),
  otherPub: pub('other_public.pem'),
};

const enc = new TextEncoder();
const dec = new TextDecoder();
const b64u = (buf) => Buffer.from(buf).toString('base64url');

// What payterm's adapter sends for a refund of 25.00 THB of invoice INV-1.
const REFUND_XML = '<PaymentProcessRequest><version>4.3</version><merchantID>JT01</merchantID>' +
  '<invoiceNo>INV-1</invoiceNo><actionAmount>25.00</actionAmount><processType>R</processType>' +
  '</PaymentProcessRequest>';
// 2C2P's own refund status answer (agent-skills steering/payment-maintenance.md).
const RS_XML = `<PaymentProcessResponse>
  <version>4.3</version>
  <timeStamp>250221160113</timeStamp>
  <respCode>00</respCode>
  <respDesc>Success</respDesc>
  <processType>RS</processType>
  <invoiceNo>260121085327</invoiceNo>
  <amount>25.00</amount>
  <status>S</status>
  <approvalCode>621529</approvalCode>
  <referenceNo>3528643</referenceNo>
  <transactionDateTime>20210126085854</transactionDateTime>
  <maskedPan>411111XXXXXX1111</maskedPan>
  <eci>05</eci>
  <refundList>
    <refund amount="25.00" status="RF" referenceNo="3598743" dateTime="20210225155130" />
  </refundList>
  <paymentScheme>VI</paymentScheme>
  <processBy>VI</processBy>
</PaymentProcessResponse>`;
const UTF8_TEXT = '<PaymentProcessResponse><respDesc>退款成功 – ¡sí! ✓</respDesc></PaymentProcessResponse>';

const JWE_HDR = { alg: 'RSA-OAEP', enc: 'A256GCM' };
const JWS_HDR = { alg: 'PS256', typ: 'JWT' };

async function jwe(text, to, hdr = JWE_HDR) {
  return new CompactEncrypt(enc.encode(text)).setProtectedHeader(hdr).encrypt(to);
}
async function jws(payload, key, hdr = JWS_HDR, options) {
  return new CompactSign(typeof payload === 'string' ? enc.encode(payload) : payload)
    .setProtectedHeader(hdr).sign(key, options);
}

// A PS256 JWS whose PSS salt is saltLength bytes (jose always uses 32).
function jwsSalt(payload, key, saltLength) {
  const input = `${b64u(JSON.stringify(JWS_HDR))}.${b64u(payload)}`;
  const sig = nodeSign('sha256', Buffer.from(input), {
    key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength,
  });
  return `${input}.${b64u(sig)}`;
}

// Flips one base64url character in the middle of part i of a compact token.
function tamper(token, i) {
  const parts = token.split('.');
  const p = parts[i];
  const at = Math.floor(p.length / 2);
  parts[i] = p.slice(0, at) + (p[at] === 'A' ? 'B' : 'A') + p.slice(at + 1);
  return parts.join('.');
}

// Opening conventions (test_jose.c): "request" tokens are opened the way
// 2C2P (the simulator) opens a request - verified with the merchant's public
// key, decrypted with the gateway's key; "answer" tokens the way payterm
// opens 2C2P's answer - verified with 2C2P's certificate (the DER .cer),
// decrypted with the merchant's key.
async function joseMade() {
  const cases = [];
  const add = (c) => cases.push(c);
  const req = await jws(await jwe(REFUND_XML, K.gatewayPub), K.merchant);
  add({ name: 'request_refund', kind: 'nested', side: 'request', token: req, rc: 'ok', text: REFUND_XML });
  const ans = await jws(await jwe(RS_XML, K.merchantPub), K.gateway);
  add({ name: 'answer_refund_status', kind: 'nested', side: 'answer', token: ans, rc: 'ok', text: RS_XML });
  add({ name: 'answer_utf8', kind: 'nested', side: 'answer',
        token: await jws(await jwe(UTF8_TEXT, K.merchantPub), K.gateway), rc: 'ok', text: UTF8_TEXT });
  add({ name: 'answer_jws_without_typ', kind: 'nested', side: 'answer',
        token: await jws(await jwe(RS_XML, K.merchantPub), K.gateway, { alg: 'PS256' }), rc: 'ok', text: RS_XML,
        note: 'typ is informational (RFC 7515 4.1.9)' });
  add({ name: 'answer_jwe_with_kid', kind: 'nested', side: 'answer',
        token: await jws(await jwe(RS_XML, K.merchantPub, { ...JWE_HDR, kid: 'merchant-2025' }), K.gateway),
        rc: 'ok', text: RS_XML, note: 'members payterm does not use are ignored' });
  add({ name: 'jwe_alone', kind: 'jwe', side: 'answer', token: await jwe(RS_XML, K.merchantPub), rc: 'ok', text: RS_XML });
  add({ name: 'jws_alone', kind: 'jws', side: 'answer', token: await jws(REFUND_XML, K.gateway), rc: 'ok', text: REFUND_XML });
  add({ name: 'jws_empty_payload', kind: 'jws', side: 'answer', token: await jws('', K.gateway), rc: 'ok', text: '' });

  // Refused: the algorithm is never the sender's choice.
  const inner = await jwe(RS_XML, K.merchantPub);
  add({ name: 'jws_rs256', kind: 'nested', side: 'answer', token: await jws(inner, K.gateway, { alg: 'RS256' }), rc: 'unsupported' });
  add({ name: 'jws_ps384', kind: 'nested', side: 'answer', token: await jws(inner, K.gateway, { alg: 'PS384' }), rc: 'unsupported' });
  add({ name: 'jwe_rsa_oaep_256', kind: 'nested', side: 'answer',
        token: await jws(await jwe(RS_XML, K.merchantPub, { alg: 'RSA-OAEP-256', enc: 'A256GCM' }), K.gateway), rc: 'unsupported' });
  add({ name: 'jwe_a128gcm', kind: 'nested', side: 'answer',
        token: await jws(await jwe(RS_XML, K.merchantPub, { alg: 'RSA-OAEP', enc: 'A128GCM' }), K.gateway), rc: 'unsupported' });
  add({ name: 'jws_crit', kind: 'nested', side: 'answer',
        token: await jws(inner, K.gateway, { alg: 'PS256', crit: ['exp'], exp: 1 }, { crit: { exp: true } }),
        rc: 'unsupported', note: 'an extension payterm would have to understand' });
  const flat = await new FlattenedSign(enc.encode('payload'))
    .setProtectedHeader({ alg: 'PS256', b64: false, crit: ['b64'] }).sign(K.gateway);
  add({ name: 'jws_unencoded_payload', kind: 'jws', side: 'answer',
        token: `${flat.protected}.${flat.payload}.${flat.signature}`, rc: 'unsupported',
        note: 'RFC 7797, made with FlattenedSign (CompactSign refuses b64: false)' });
  let zip = null;
  try {
    zip = await jws(await jwe(RS_XML, K.merchantPub, { ...JWE_HDR, zip: 'DEF' }), K.gateway);
  } catch (e) {
    zip = null; // jose 6 no longer compresses; the case is then absent
  }
  if (zip) add({ name: 'jwe_zip', kind: 'nested', side: 'answer', token: zip, rc: 'unsupported' });

  // Refused: keys and integrity.
  add({ name: 'jws_by_the_merchant', kind: 'nested', side: 'answer', token: await jws(inner, K.merchant), rc: 'signature',
        note: 'an answer must be signed by 2C2P, not by the merchant key' });
  add({ name: 'jwe_to_another_key', kind: 'nested', side: 'answer',
        token: await jws(await jwe(RS_XML, K.otherPub), K.gateway), rc: 'signature',
        note: 'the content key does not decrypt: a random one fails the tag instead' });
  add({ name: 'jwe_tampered_under_good_signature', kind: 'nested', side: 'answer',
        token: await jws(tamper(inner, 3), K.gateway), rc: 'signature' });
  add({ name: 'jwe_tag_tampered_under_good_signature', kind: 'nested', side: 'answer',
        token: await jws(tamper(inner, 4), K.gateway), rc: 'signature' });
  add({ name: 'jws_signature_tampered', kind: 'nested', side: 'answer', token: tamper(ans, 2), rc: 'signature' });
  add({ name: 'jws_payload_tampered', kind: 'nested', side: 'answer', token: tamper(ans, 1), rc: 'signature' });
  add({ name: 'jws_salt_20', kind: 'jws', side: 'answer', token: jwsSalt(Buffer.from(REFUND_XML), K.gateway, 20),
        rc: 'signature', note: 'made with node:crypto: RFC 7518 3.5 fixes the PS256 salt at 32 bytes' });
  add({ name: 'jws_salt_max', kind: 'jws', side: 'answer',
        token: jwsSalt(Buffer.from(REFUND_XML), K.gateway, constants.RSA_PSS_SALTLEN_MAX_SIGN),
        rc: 'signature', note: 'made with node:crypto' });
  add({ name: 'jws_salt_32_node', kind: 'jws', side: 'answer', token: jwsSalt(Buffer.from(REFUND_XML), K.gateway, 32),
        rc: 'ok', text: REFUND_XML, note: 'made with node:crypto, as RFC 7518 says' });
  add({ name: 'not_nested', kind: 'nested', side: 'answer', token: await jws('<PaymentProcessResponse/>', K.gateway),
        rc: 'parse', note: 'a JWS whose payload is not a JWE' });
  add({ name: 'five_parts_where_three_belong', kind: 'nested', side: 'answer', token: inner, rc: 'parse' });
  add({ name: 'blanks_around', kind: 'nested', side: 'answer', token: `\n ${ans}\r\n`, rc: 'ok', text: RS_XML,
        note: 'a body read from HTTP or a file may end in a line break' });
  return cases;
}

// Tokens payterm makes, opened by jose.
const PAYTERM = [
  { name: 'request_refund', kind: 'nested', seed: 'pm-request-1', key: 'c2p_merchant_private.pem',
    peer: 'c2p_gateway_cert.cer', text: REFUND_XML },
  { name: 'answer_refund_status', kind: 'nested', seed: 'pm-answer-1', key: 'c2p_gateway_private.pem',
    peer: 'c2p_merchant_public.pem', text: RS_XML },
  { name: 'answer_utf8', kind: 'nested', seed: 'pm-utf8', key: 'c2p_gateway_private.pem',
    peer: 'c2p_merchant_public.pem', text: UTF8_TEXT },
  { name: 'jwe_empty', kind: 'jwe', seed: 'pm-empty', key: 'c2p_merchant_public.pem', text: '' },
  { name: 'jws_request', kind: 'jws', seed: 'pm-jws', key: 'c2p_merchant_private.pem', text: REFUND_XML },
];

async function joseOpens(c, token) {
  const verifyKey = (name) => name.startsWith('c2p_merchant') ? K.merchantPub : K.gatewayPub;
  const decryptKey = (name) => name.startsWith('c2p_merchant') ? K.merchant : K.gateway;
  if (c.kind === 'jwe') {
    const { plaintext, protectedHeader } = await compactDecrypt(token, decryptKey(c.key));
    return { text: dec.decode(plaintext), headers: [protectedHeader] };
  }
  const v = await compactVerify(token, verifyKey(c.key), { algorithms: ['PS256'] });
  if (c.kind === 'jws') return { text: dec.decode(v.payload), headers: [v.protectedHeader] };
  const d = await compactDecrypt(dec.decode(v.payload), decryptKey(c.peer),
    { keyManagementAlgorithms: ['RSA-OAEP'], contentEncryptionAlgorithms: ['A256GCM'] });
  return { text: dec.decode(d.plaintext), headers: [v.protectedHeader, d.protectedHeader] };
}

async function paytermMade() {
  const out = [];
  for (const c of PAYTERM) {
    const args = [c.kind, c.seed, path.join(KEYS, c.key)];
    if (c.peer) args.push(path.join(KEYS, c.peer));
    const token = execFileSync(TOOL, args, { input: c.text }).toString().trim();
    const opened = await joseOpens(c, token);
    if (opened.text !== c.text) throw new Error(`${c.name}: jose read something else`);
    out.push({ ...c, token, jose_text: opened.text, jose_headers: opened.headers });
  }
  return out;
}

// ---- the adapter: requests payterm writes, answers 2C2P sends ----------------

// The charge and refund of every adapter case: 100.00 THB, a refund of 25.00.
const CHARGE = { order_id: 'INV-1', amount: 10000, currency: 'THB', refund: 2500 };
const request = (pt, amount) => '<PaymentProcessRequest><version>4.3</version>' +
  `<merchantID>JT01</merchantID><invoiceNo>${CHARGE.order_id}</invoiceNo>` +
  `<actionAmount>${amount}</actionAmount><processType>${pt}</processType></PaymentProcessRequest>`;
// The XML payterm's adapter must write (the structure of 2C2P's samples:
// version, merchantID, invoiceNo, actionAmount, processType).
const REQUESTS = {
  R: request('R', '25.00'),
  RS: request('RS', '100.00'), // RS names the original transaction's amount
  I: request('I', '100.00'),
};

// An answer with 2C2P's fields (agent-skills examples), some changed.
function answer(pt, fields, list) {
  const base = {
    version: '4.3', timeStamp: '250221155131', respCode: '00', respDesc: 'Success',
    processType: pt, invoiceNo: CHARGE.order_id, amount: pt === 'R' ? '25.00' : '100.00',
    status: pt === 'R' ? 'RF' : 'S', approvalCode: '2508513089', referenceNo: '3528643',
    refundReferenceNo: pt === 'R' ? '3598743' : undefined,
    transactionDateTime: '20210126085854', maskedPan: '411111XXXXXX1111', eci: '05',
  };
  const f = { ...base, ...fields };
  let xml = '<PaymentProcessResponse>';
  for (const [k, v] of Object.entries(f)) if (v !== undefined) xml += `<${k}>${v}</${k}>`;
  if (list !== undefined) {
    xml += '<refundList>';
    for (const r of list) {
      xml += '<refund';
      for (const [k, v] of Object.entries(r)) xml += ` ${k}="${v}"`;
      xml += ' />';
    }
    xml += '</refundList>';
  }
  return xml + '<paymentScheme>VI</paymentScheme><processBy>VI</processBy></PaymentProcessResponse>';
}
const RF1 = { amount: '25.00', status: 'RF', referenceNo: '3598743', dateTime: '20210225155130' };

// Each answer and what payterm must make of it (SPEC 5a's mapping; the
// defensive readings are docs/2c2p-refunds.md's).  `list` is the entries
// of an RS answer payterm must read: [amount, outcome, referenceNo].
const ANSWERS = [
  ['r_rf', 'R', answer('R', {}), { outcome: 'SUCCESS', code: 'RF', trade_no: '3598743', amount: 2500 }],
  ['r_rp', 'R', answer('R', { status: 'RP' }), { outcome: 'PENDING', code: 'RP', trade_no: '3598743' }],
  ['r_refund_pending', 'R', answer('R', { status: 'REFUND_PENDING' }), { outcome: 'PENDING', trade_no: '3598743' }],
  ['r_42', 'R', answer('R', { respCode: '42', status: undefined }), { outcome: 'PENDING', code: '42', trade_no: '3598743' }],
  ['r_42_no_refund_reference', 'R', answer('R', { respCode: '42', status: undefined, refundReferenceNo: undefined }),
    { outcome: 'AMBIGUOUS', code: 'no_refund_reference' }],
  ['r_rf_no_refund_reference', 'R', answer('R', { refundReferenceNo: undefined }),
    { outcome: 'AMBIGUOUS', code: 'no_refund_reference', note: 'a refund without its number cannot be told apart later' }],
  ['r_rff', 'R', answer('R', { status: 'RFF' }), { outcome: 'DECLINED', code: 'RFF' }],
  ['r_rr', 'R', answer('R', { status: 'RR' }), { outcome: 'DECLINED', code: 'RR' }],
  ['r_rr2', 'R', answer('R', { status: 'RR2' }), { outcome: 'DECLINED', code: 'RR2' }],
  ['r_40_exceeds', 'R', answer('R', { respCode: '40', respDesc: 'Amount exceeds', status: undefined, refundReferenceNo: undefined }),
    { outcome: 'DECLINED', code: '40' }],
  ['r_30', 'R', answer('R', { respCode: '30', status: undefined, refundReferenceNo: undefined }), { outcome: 'DECLINED', code: '30' }],
  ['r_16_no_transaction', 'R', answer('R', { respCode: '16', status: undefined, refundReferenceNo: undefined }),
    { outcome: 'DECLINED', code: '16' }],
  ['r_49_already_refunded', 'R', answer('R', { respCode: '49', status: undefined, refundReferenceNo: undefined }),
    { outcome: 'AMBIGUOUS', code: '49', note: 'which refund? the status query decides' }],
  ['r_95', 'R', answer('R', { respCode: '95', status: undefined }), { outcome: 'AMBIGUOUS', code: '95' }],
  ['r_99', 'R', answer('R', { respCode: '99', status: undefined }), { outcome: 'AMBIGUOUS', code: '99' }],
  ['r_unlisted_code', 'R', answer('R', { respCode: '77' }), { outcome: 'AMBIGUOUS', code: '77' }],
  ['r_unlisted_status', 'R', answer('R', { status: 'XX' }), { outcome: 'AMBIGUOUS', code: 'XX' }],
  ['r_transaction_status_rs', 'R', answer('R', { status: 'RS' }),
    { outcome: 'AMBIGUOUS', code: 'RS', note: 'RS as a status is a transaction\'s (ready for settlement), not a refund\'s' }],
  ['r_other_invoice', 'R', answer('R', { invoiceNo: 'INV-2' }), { outcome: 'AMBIGUOUS', code: 'foreign_answer' }],
  ['r_other_process_type', 'R', answer('R', { processType: 'V' }), { outcome: 'AMBIGUOUS', code: 'foreign_answer' }],
  ['r_without_invoice_and_type', 'R', answer('R', { invoiceNo: undefined, processType: undefined }),
    { outcome: 'SUCCESS', code: 'RF', trade_no: '3598743', amount: 2500, note: 'the answer to our own request, on our own connection' }],
  ['r_amount_finer_than_thb', 'R', answer('R', { amount: '25.001' }), { outcome: 'AMBIGUOUS', code: 'malformed_amount' }],
  ['r_amount_other', 'R', answer('R', { amount: '20.00' }),
    { outcome: 'SUCCESS', code: 'RF', trade_no: '3598743', amount: 2000, note: 'the engine raises review on the difference' }],
  ['r_rs_list_in_a_refund_answer', 'R', answer('R', {}, [RF1]), { outcome: 'SUCCESS', code: 'RF', trade_no: '3598743', amount: 2500 }],
  ['rs_one_refund', 'RS', answer('RS', {}, [RF1]), { outcome: 'SUCCESS', code: '00', list: [[2500, 'SUCCESS', '3598743']] }],
  ['rs_empty_list', 'RS', answer('RS', {}, []), { outcome: 'SUCCESS', code: '00', list: [] }],
  ['rs_no_list', 'RS', answer('RS', {}), { outcome: 'SUCCESS', code: '00', list: [] }],
  ['rs_every_status', 'RS', answer('RS', {}, [RF1,
    { amount: '10.00', status: 'RP', referenceNo: '3598744', dateTime: '20210225155131' },
    { amount: '5.00', status: 'REFUND_PENDING', referenceNo: '3598745' },
    { amount: '5.00', status: 'RFF', referenceNo: '3598746' },
    { amount: '1.00', status: 'RR3', referenceNo: '3598747' },
    { amount: '1.50', status: 'ZZ', referenceNo: '3598748' }]),
  { outcome: 'SUCCESS', code: '00', list: [[2500, 'SUCCESS', '3598743'], [1000, 'PENDING', '3598744'],
    [500, 'PENDING', '3598745'], [500, 'DECLINED', '3598746'], [100, 'DECLINED', '3598747'], [150, 'AMBIGUOUS', '3598748']] }],
  ['rs_transaction_status_rs', 'RS', answer('RS', { status: 'RS' }, [RF1]),
    { outcome: 'SUCCESS', code: '00', list: [[2500, 'SUCCESS', '3598743']], note: 'the transaction status is not the process type' }],
  ['rs_other_transaction_amount', 'RS', answer('RS', { amount: '90.00' }, [RF1]), { outcome: 'AMBIGUOUS', code: 'amount_mismatch' }],
  ['rs_reference_twice', 'RS', answer('RS', {}, [RF1, RF1]), { outcome: 'AMBIGUOUS', code: 'malformed_response' }],
  ['rs_refund_without_reference', 'RS', answer('RS', {}, [{ amount: '25.00', status: 'RF' }]),
    { outcome: 'AMBIGUOUS', code: 'malformed_response' }],
  ['rs_refund_amount_unreadable', 'RS', answer('RS', {}, [{ ...RF1, amount: '25,00' }]), { outcome: 'AMBIGUOUS', code: 'malformed_amount' }],
  ['rs_16', 'RS', answer('RS', { respCode: '16', respDesc: 'Transaction not found' }), { outcome: 'AMBIGUOUS', code: '16' }],
  ['rs_other_invoice', 'RS', answer('RS', { invoiceNo: 'INV-2' }, []), { outcome: 'AMBIGUOUS', code: 'foreign_answer' }],
  ['rs_answer_to_r', 'RS', answer('R', {}), { outcome: 'AMBIGUOUS', code: 'foreign_answer' }],
  ['i_settled', 'I', answer('I', { status: 'S', amount: '100.00' }), { outcome: 'SUCCESS', code: 'S', trade_no: '3528643', amount: 10000 }],
  ['i_authorised', 'I', answer('I', { status: 'A' }), { outcome: 'SUCCESS', code: 'A', trade_no: '3528643', amount: 10000 }],
  ['i_ready_for_settlement', 'I', answer('I', { status: 'RS' }),
    { outcome: 'SUCCESS', code: 'RS', trade_no: '3528643', amount: 10000, note: 'RS, read as the transaction status it is here' }],
  ['i_voided', 'I', answer('I', { status: 'V' }), { outcome: 'CANCELED', code: 'V', trade_no: '3528643', amount: 10000 }],
  ['i_16', 'I', answer('I', { respCode: '16', status: undefined }), { outcome: 'NOT_FOUND', code: '16' }],
  ['i_unlisted_status', 'I', answer('I', { status: 'Q' }), { outcome: 'AMBIGUOUS', code: 'Q' }],
];

async function answers() {
  const out = [];
  for (const [name, op, xml, want] of ANSWERS)
    out.push({ name, op, xml, body: await jws(await jwe(xml, K.merchantPub), K.gateway), http_status: 200, ...want });
  // Answers that do not open.
  const rf = answer('R', {});
  out.push({ name: 'r_signed_by_the_merchant', op: 'R', xml: rf, http_status: 200,
             body: await jws(await jwe(rf, K.merchantPub), K.merchant), outcome: 'AMBIGUOUS', code: 'invalid_signature' });
  out.push({ name: 'r_plain_xml', op: 'R', xml: rf, http_status: 200, body: rf,
             outcome: 'AMBIGUOUS', code: 'malformed_response', note: 'never believed unsigned' });
  out.push({ name: 'r_not_xml', op: 'R', xml: 'Success', http_status: 200,
             body: await jws(await jwe('Success', K.merchantPub), K.gateway), outcome: 'AMBIGUOUS', code: 'malformed_response' });
  out.push({ name: 'r_http_500', op: 'R', xml: '', http_status: 500, body: '<html>500</html>',
             outcome: 'AMBIGUOUS', code: 'http_500' });
  out.push({ name: 'rs_http_502', op: 'RS', xml: '', http_status: 502, body: '', outcome: 'AMBIGUOUS', code: 'http_502' });
  return out;
}

// Requests as the adapter seals them (pt_jose_tool, seeded), opened by jose
// the way 2C2P opens them.
async function adapterRequests() {
  const out = [];
  for (const [pt, xml] of Object.entries(REQUESTS)) {
    const c = { kind: 'nested', seed: `pm-${pt}`, key: 'c2p_merchant_private.pem', peer: 'c2p_gateway_cert.cer', text: xml };
    const token = execFileSync(TOOL, [c.kind, c.seed, path.join(KEYS, c.key), path.join(KEYS, c.peer)],
      { input: xml }).toString().trim();
    const opened = await joseOpens(c, token);
    if (opened.text !== xml) throw new Error(`${pt}: jose read something else`);
    out.push({ process_type: pt, xml, seed: c.seed, body: token, jose_xml: opened.text });
  }
  return out;
}

const doc = {
  about: 'gen/gen_2c2p_pm.mjs: 2C2P Payment Maintenance JOSE, made and opened with jose ' +
    JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', 'jose', 'package.json'))).version,
  jose_made: await joseMade(),
  payterm_made: await paytermMade(),
  charge: CHARGE,
  requests: await adapterRequests(),
  answers: await answers(),
};
fs.writeFileSync(path.join(HERE, '..', '2c2p_pm.json'), JSON.stringify(doc, null, 2) + '\n');
console.log(`wrote 2c2p_pm.json: ${doc.jose_made.length} jose-made, ${doc.payterm_made.length} payterm-made`);
