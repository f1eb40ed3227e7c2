#!/usr/bin/env node
// gen_wechat_certs.js - vectors for WeChat Pay platform certificate rotation
// (GET /v3/certificates, SPEC 8), made with wechatpay-axios-plugin (already
// in package.json).
//
//   cd tests/vectors/gen && npm ci && node gen_wechat_certs.js
//
// Writes ../wechat_certs.json, read by tests/unit/test_gw_wechat_certs.c at
// run time.  The merchant, keys and APIv3 key are those of wechat.json; the
// clock, the request nonce, the answer nonces and the GCM nonces are fixed,
// and RSA PKCS#1 v1.5 is deterministic, so running it again gives the same
// file byte for byte.
//
// What comes from the SDK: the request's string to sign
// (Formatter.request), its signature (Rsa.sign) and header
// (Formatter.authorization); every encrypt_certificate (Aes.AesGcm.encrypt
// with the APIv3 key, associated_data "certificate", as WeChat Pay encrypts
// them); every answer's string to sign (Formatter.response) and signature
// (Rsa.sign).  `sdk_decrypts` is what Aes.AesGcm.decrypt makes of each
// entry (the SDK's own `wechatpay cert` command downloads this way) and
// `sdk_valid` what Rsa.verify says of the answer's signature with the key
// that really signed it.  What payterm must decide is `rc` (and `serials`).
//
// The rotated platform certificate: the throw-away key ../keys/other_private.pem
// in a self-signed certificate made once with
//   openssl req -new -x509 -key other_private.pem -sha256 -days 36500 \
//     -subj "/CN=payterm test WeChat platform (rotated)" \
//     -set_serial 0x6A1D2C3B4E5F60718293A4B5C6D7E8F901234567
// and kept below as text (openssl would put today's date in a new one).
'use strict';

const fs = require('fs');
const path = require('path');

const { Rsa, Formatter, Aes } = require('wechatpay-axios-plugin');

const KEYS = path.join(__dirname, '..', 'keys');
const OUT = path.join(__dirname, '..');
const key = (name) => fs.readFileSync(path.join(KEYS, name), 'utf8');

const NOW_MS = 1796090400000; // 2026-12-01T02:00:00Z = 10:00 in Beijing
const NOW_S = Math.floor(NOW_MS / 1000);

const ROTATED_CERT = [
  '-----BEGIN CERTIFICATE-----',
  'MIIDRTCCAi2gAwIBAgIUah0sO05fYHGCk6S1xtfo+QEjRWcwDQYJKoZIhvcNAQEL',
  'BQAwMTEvMC0GA1UEAwwmcGF5dGVybSB0ZXN0IFdlQ2hhdCBwbGF0Zm9ybSAocm90',
  'YXRlZCkwIBcNMjYxMjAxMTczNDE3WhgPMjEyNjExMDcxNzM0MTdaMDExLzAtBgNV',
  'BAMMJnBheXRlcm0gdGVzdCBXZUNoYXQgcGxhdGZvcm0gKHJvdGF0ZWQpMIIBIjAN',
  'BgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAxysMMWdbnKXYnhyxlJ6CuO0ZilHn',
  'KM/06dfJdMXQQgFA/3X9m8TEDDJLQOJS+rYOarwhPwDJPbaUB1hUvNugXgNyRCEu',
  'Z3babfo/3SpxXgsQ/9nKFVxSklMlQgJ4RqCfsWCZsSi3ZJD4X02iu7rBQTTofTaI',
  'NLm5+Jk3zOA96htPKMi7KNGbY9T7yoZWR7msI5YcympDr4zqcW2TwP+YDBBsabOA',
  'hx2qyt1tgHfEG2tOicBEEbnRAV0pEdX73ymh908G/6FCsOQ99ifa+INPUAxy9Nre',
  'Pq6IzIYCcw4cdqvnLCfR0eESdXU+M6qjvnSrpd6rQAH+J2X23gOXZfduqwIDAQAB',
  'o1MwUTAdBgNVHQ4EFgQURhxPBO10sSmbLNggYByncRZP4FkwHwYDVR0jBBgwFoAU',
  'RhxPBO10sSmbLNggYByncRZP4FkwDwYDVR0TAQH/BAUwAwEB/zANBgkqhkiG9w0B',
  'AQsFAAOCAQEAeVgC4YiZYYIpkD1OyN172kH0pssOB4i5oK7Qm0uewK57GCKdfwc2',
  'Vb97kbbwyEDBfPhYPdG2IeNbpxj7sQ5KJNgRreJiC8tJqMgPGr/oZJKnvTD0IHaN',
  '0MDduKnBs5b7RBD+IMTELLOZrZPFhIlZbNadgSLK3C+sxpMzclAK3OVlkfCJAk9w',
  'xCFcURqOSzoAnOMSd/kqPXQkIg25nZeU1pKu8IlRQtOc0pfP2VLE67H+MSOoxEiV',
  'auoINY2mRkbORQNFZ9koxFivdIbEpt7e3dAWM3T1Gkm2gGOwhDJgdYHDfWcuKIQb',
  'gcwYmUA8+xN2Qqr7ZyzAvnyBLkC+IQY/vA==',
  '-----END CERTIFICATE-----',
].join('\n') + '\n';
const ROTATED_SERIAL = '6A1D2C3B4E5F60718293A4B5C6D7E8F901234567';

function write(name, obj) {
  fs.writeFileSync(path.join(OUT, name), JSON.stringify(obj, null, 2) + '\n');
  console.log('wrote', name);
}

function certVectors() {
  const merchantKey = Rsa.from(key('merchant_wechat_pkcs8.pem'));
  const platformKey = Rsa.from(key('wechat_platform_private.pem'));
  const platformPub = Rsa.from(key('wechat_platform_public.pem'), Rsa.KEY_TYPE_PUBLIC);
  const rotatedKey = Rsa.from(key('other_private.pem'));
  const rotatedPub = Rsa.from(key('other_public.pem'), Rsa.KEY_TYPE_PUBLIC);
  const firstCert = key('wechat_platform_cert.pem');
  // The same merchant as tests/vectors/wechat.json.
  const mchid = '1900000001';
  const serial = '408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB';
  const platformSerial = '5157F09EFDC096DE15EBE81A47057A7232F1B8E1';
  const apiv3 = 'payterm-test-apiv3-key-32-bytes!';
  const otherApiv3 = 'another-merchants-apiv3-key-32b!';
  if (Buffer.byteLength(apiv3) !== 32 || Buffer.byteLength(otherApiv3) !== 32) {
    throw new Error('APIv3 keys are 32 bytes');
  }
  const nonce = 'R7fK2mQ9xWb4NcV8pLs3Hd6Tj5Yg1Ze0';
  const ts = String(NOW_S);
  const base = 'https://api.mch.weixin.qq.com';

  // ---- the request ---------------------------------------------------------
  const message = Formatter.request('GET', '/v3/certificates', ts, nonce, '');
  const signature = Rsa.sign(message, merchantKey);
  const request = {
    method: 'GET', url: `${base}/v3/certificates`, body: '', message, signature,
    authorization: Formatter.authorization(mchid, nonce, signature, ts, serial),
  };

  // ---- entries -------------------------------------------------------------
  let gcm = 0;
  const gcmNonce = () => `certnonce${String(gcm++).padStart(3, '0')}`; // 12 characters
  const entry = (pem, serialNo, o = {}) => {
    const n = gcmNonce();
    const aad = o.aad === undefined ? 'certificate' : o.aad;
    let ciphertext = Aes.AesGcm.encrypt(pem, o.apiv3 || apiv3, n, aad);
    if (o.tamper) {
      const b = Buffer.from(ciphertext, 'base64');
      b[40] ^= 0x01;
      ciphertext = b.toString('base64');
    }
    if (o.aadSent !== undefined) {
      // encrypted under one associated data, sent with another
      return { effective_time: o.effective || '2026-11-30T12:00:00+08:00',
        encrypt_certificate: { algorithm: 'AEAD_AES_256_GCM', associated_data: o.aadSent,
          ciphertext, nonce: n },
        expire_time: o.expire || '2031-11-29T12:00:00+08:00', serial_no: serialNo };
    }
    return { effective_time: o.effective || '2026-11-30T12:00:00+08:00',
      encrypt_certificate: { algorithm: 'AEAD_AES_256_GCM', associated_data: aad, ciphertext,
        nonce: n },
      expire_time: o.expire || '2031-11-29T12:00:00+08:00', serial_no: serialNo };
  };
  const sdkDecrypts = (e) => {
    const c = e.encrypt_certificate;
    try {
      return Aes.AesGcm.decrypt(c.ciphertext, apiv3, c.nonce, c.associated_data).length > 0;
    } catch (err) {
      return false;
    }
  };

  // ---- answers -------------------------------------------------------------
  let answerNo = 0;
  const answer = (name, data, o = {}) => {
    const body = JSON.stringify({ data });
    const answerNonce = `AnswerNonce${String(answerNo++).padStart(21, '0')}`;
    const signer = o.signer || platformKey;
    const msg = Formatter.response(ts, answerNonce, body);
    const sig = Rsa.sign(msg, signer);
    return {
      name, note: o.note, status: o.status || 200, body,
      headers: {
        'Wechatpay-Timestamp': ts, 'Wechatpay-Nonce': answerNonce, 'Wechatpay-Signature': sig,
        'Wechatpay-Serial': o.serial || platformSerial,
      },
      sdk_valid: Rsa.verify(msg, sig, o.signerPub || platformPub),
      sdk_decrypts: data.map(sdkDecrypts),
      rc: o.rc || 'PT_OK',
      serials: o.serials || [],
    };
  };
  const first = () => entry(firstCert, platformSerial);
  const rotated = (o) => entry(ROTATED_CERT, ROTATED_SERIAL, o);

  const answers = [
    answer('rotation_window', [first(), rotated()], {
      note: 'old and new listed, as during a rotation: both decrypt, both serials check out',
      serials: [platformSerial, ROTATED_SERIAL] }),
    answer('lower_case_serial_no', [entry(ROTATED_CERT, ROTATED_SERIAL.toLowerCase())], {
      note: 'serials compare case-insensitively; the certificate\'s own spelling is kept',
      serials: [ROTATED_SERIAL] }),
    answer('signed_by_the_new_key', [first(), rotated()], {
      signer: rotatedKey, signerPub: rotatedPub, serial: ROTATED_SERIAL, rc: 'PT_ESIG',
      note: 'a valid signature by a key only this answer vouches for: refused (never verified ' +
            'with a certificate from the same answer)' }),
    answer('untrusted_key_trusted_serial', [rotated()], {
      signer: rotatedKey, signerPub: rotatedPub, rc: 'PT_ESIG',
      note: 'signed by another key under the trusted serial' }),
    answer('tampered_ciphertext', [first(), rotated({ tamper: true })], {
      rc: 'PT_ESIG', note: 'one ciphertext bit flipped (the answer re-signed): the GCM tag fails, ' +
                           'the whole answer is refused' }),
    answer('wrong_associated_data', [rotated({ aadSent: 'transaction' })], {
      rc: 'PT_ESIG', note: 'encrypted under "certificate", sent as "transaction": the tag fails' }),
    answer('other_merchants_apiv3_key', [rotated({ apiv3: otherApiv3 })], {
      rc: 'PT_ESIG', note: 'encrypted with another APIv3 key' }),
    answer('wrong_serial_no', [entry(ROTATED_CERT, '7A1D2C3B4E5F60718293A4B5C6D7E8F901234567')], {
      rc: 'PT_ESIG', note: 'the entry claims a serial its certificate does not have' }),
    answer('serial_no_of_the_other_certificate', [entry(ROTATED_CERT, platformSerial)], {
      rc: 'PT_ESIG', note: 'the new key smuggled in under the trusted serial' }),
    answer('expired_left_out', [first(), rotated({ expire: '2026-11-30T12:00:00+08:00' })], {
      note: 'expire_time before now: left out', serials: [platformSerial] }),
    answer('not_yet_effective_kept', [rotated({ effective: '2026-12-02T12:00:00+08:00' })], {
      note: 'published before its switch, as WeChat does: kept', serials: [ROTATED_SERIAL] }),
    answer('bad_effective_time', [rotated({ effective: '2026-11-30 12:00:00' })], {
      rc: 'PT_EPARSE', note: 'not RFC 3339' }),
    answer('not_a_certificate', [entry(key('other_public.pem'), ROTATED_SERIAL)], {
      rc: 'PT_EPARSE', note: 'decrypts to a public key, not a certificate' }),
    answer('empty_list', [], { note: 'nothing listed (nothing to trust)' }),
    answer('server_error', [first()], { status: 500, rc: 'PT_ENOTFOUND',
      note: 'not an HTTP 200 answer' }),
  ];
  // Not JSON / no data: signed all the same.
  const bodyAnswer = (name, body, rc, note) => {
    const answerNonce = `AnswerNonce${String(answerNo++).padStart(21, '0')}`;
    const msg = Formatter.response(ts, answerNonce, body);
    const sig = Rsa.sign(msg, platformKey);
    return { name, note, status: 200, body,
      headers: { 'Wechatpay-Timestamp': ts, 'Wechatpay-Nonce': answerNonce,
        'Wechatpay-Signature': sig, 'Wechatpay-Serial': platformSerial },
      sdk_valid: Rsa.verify(msg, sig, platformPub), sdk_decrypts: [], rc, serials: [] };
  };
  answers.push(bodyAnswer('no_data', '{"code":"SYSTEM_ERROR"}', 'PT_EPARSE', 'no data array'));
  answers.push(bodyAnswer('not_json', 'data', 'PT_EPARSE', 'not JSON'));

  return {
    comment: 'WeChat Pay GET /v3/certificates: request and answers, made with ' +
             'wechatpay-axios-plugin by gen/gen_wechat_certs.js',
    now_ms: NOW_MS, mchid, serial_no: serial, platform_serial: platformSerial,
    rotated_serial: ROTATED_SERIAL, apiv3_key: apiv3, nonce, endpoint: base,
    merchant_key: 'merchant_wechat_pkcs8.pem', platform_public_key: 'wechat_platform_public.pem',
    rotated_public_key: 'other_public.pem',
    request, answers,
  };
}

write('wechat_certs.json', certVectors());
