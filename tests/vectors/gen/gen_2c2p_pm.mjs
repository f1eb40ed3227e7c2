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

const doc = {
  about: 'gen/gen_2c2p_pm.mjs: 2C2P Payment Maintenance JOSE, made and opened with jose ' +
    JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', 'jose', 'package.json'))).version,
  jose_made: await joseMade(),
  payterm_made: await paytermMade(),
};
fs.writeFileSync(path.join(HERE, '..', '2c2p_pm.json'), JSON.stringify(doc, null, 2) + '\n');
console.log(`wrote 2c2p_pm.json: ${doc.jose_made.length} jose-made, ${doc.payterm_made.length} payterm-made`);
