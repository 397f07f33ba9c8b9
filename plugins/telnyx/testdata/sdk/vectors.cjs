// Records the verdicts of Telnyx's official SDK (npm package "telnyx") on
// webhook signatures, for TestVerifyAgreesWithTelnyxSDK. Regenerate with:
//
//   npm install --prefix /tmp/telnyx-sdk telnyx@7.24.0
//   TELNYX_SDK=/tmp/telnyx-sdk/node_modules/telnyx node vectors.cjs > vectors.json
//
// Each case signs (or mis-signs) a body with Ed25519 keys made here from
// fixed seeds and asks the SDK's TelnyxWebhook.verify at a fixed "now".
'use strict';
const crypto = require('crypto');
const { TelnyxWebhook } = require(process.env.TELNYX_SDK + '/lib/webhooks.js');

const NOW = 1764150000; // the clock the SDK is given, Unix seconds
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');

function keyFromSeed(seed) {
  const priv = crypto.createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, Buffer.from(seed)]), format: 'der', type: 'pkcs8' });
  const spki = crypto.createPublicKey(priv).export({ format: 'der', type: 'spki' });
  return { priv, pub: spki.subarray(spki.length - 32).toString('base64') };
}
const account = keyFromSeed('telnyx-sdk-vectors-account-seed!');
const other = keyFromSeed('telnyx-sdk-vectors-other-seed-32');
const sign = (k, ts, body) => crypto.sign(null, Buffer.from(ts + '|' + body), k.priv).toString('base64');

const form = 'AccountSid=acct&CallSid=v3%3AsdkVectorCall_01&From=%2B15550100';
const json = '{"CallSid":"v3:sdkVectorCall_02","SequenceNumber":2}';
const ts = String(NOW - 30);
const good = sign(account, ts, form);
// flipLowBits changes a padded signature's last data character within the
// bits that padding discards: the same 64 bytes, spelled otherwise.
const flipLowBits = (s) => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const i = s.length - 3, v = alphabet.indexOf(s[i]);
  return s.slice(0, i) + alphabet[v ^ 1] + s.slice(i + 1);
};

const cases = [
  ['form', account.pub, ts, good, form],
  ['json', account.pub, ts, sign(account, ts, json), json],
  ['another key', account.pub, ts, sign(other, ts, form), form],
  ['body changed', account.pub, ts, good, form + '&x=1'],
  ['timestamp changed', account.pub, String(NOW - 29), good, form],
  ['at the tolerance', account.pub, String(NOW - 300), sign(account, String(NOW - 300), form), form],
  ['past the tolerance', account.pub, String(NOW - 301), sign(account, String(NOW - 301), form), form],
  ['future within', account.pub, String(NOW + 300), sign(account, String(NOW + 300), form), form],
  ['future past', account.pub, String(NOW + 301), sign(account, String(NOW + 301), form), form],
  ['leading zeros', account.pub, '000' + ts, sign(account, '000' + ts, form), form],
  ['plus sign', account.pub, '+' + ts, sign(account, '+' + ts, form), form],
  ['space', account.pub, ' ' + ts, sign(account, ' ' + ts, form), form],
  ['fraction', account.pub, ts + '.5', sign(account, ts + '.5', form), form],
  ['milliseconds', account.pub, ts + '000', sign(account, ts + '000', form), form],
  ['empty timestamp', account.pub, '', good, form],
  ['empty signature', account.pub, ts, '', form],
  ['unpadded signature', account.pub, ts, good.replace(/=+$/, ''), form],
  ['padding bits set', account.pub, ts, flipLowBits(good), form],
  ['newline in signature', account.pub, ts, good.slice(0, 40) + '\n' + good.slice(40), form],
  ['url-safe alphabet', account.pub, ts, good.replace(/\+/g, '-').replace(/\//g, '_'), form],
  ['truncated signature', account.pub, ts, good.slice(0, 84), form],
  ['utf-8 body', account.pub, ts, sign(account, ts, 'CallSid=v3%3Ax&Name=Zo\u00eb \u2603'), 'CallSid=v3%3Ax&Name=Zo\u00eb \u2603'],
  ['empty body', account.pub, ts, sign(account, ts, ''), ''],
];

(async () => {
  const out = [];
  for (const [name, pub, timestamp, signature, body] of cases) {
    const realNow = Date.now;
    Date.now = () => NOW * 1000;
    let ok = true, why = '';
    try {
      await new TelnyxWebhook(pub).verify(body, { 'telnyx-timestamp': timestamp, 'telnyx-signature-ed25519': signature });
    } catch (e) {
      ok = false;
      why = e.message;
    } finally {
      Date.now = realNow;
    }
    out.push({ name, public_key: pub, timestamp, signature, body, now: NOW, sdk_accepts: ok, sdk_says: why });
  }
  process.stdout.write(JSON.stringify({ sdk: 'telnyx@' + require(process.env.TELNYX_SDK + '/package.json').version, cases: out }, null, 1) + '\n');
})();
