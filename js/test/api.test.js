// The package API: types in and out, errors, order, randomness.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  IntentkeyError,
  answerLines,
  createKeyer,
  newUuidKey,
  uuidKey,
} from '../src/index.js';
import { unreadableLineAnswer } from '../src/index.js';

const SECRET = '5c'.repeat(32);
const FIRST = {
  tenantId: 'tenant-1',
  actionType: 'pix.send',
  payload:
    '{"creditor_key":"123.456.789-09","amount":10.5,"currency":"brl","remittance":"Fatura Março","request_id":"r-1"}',
  intentEpoch: 1_700_000_000,
};
// The README's example: same intent, reformatted fields, new attempt metadata.
const AGAIN = {
  ...FIRST,
  payload: {
    remittance: '  FATURA MARÇO ',
    currency: ' BRL ',
    amount: '10.50',
    creditor_key: '12345678909',
    request_id: 'r-2',
    attempt: 2,
  },
};
const KEY = '46df2fdd5062891ab86e223a4091efb640446b3206d4886c7bf20411c0335ed2';

function throwsIntentkey(fn, code, field) {
  let caught;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof IntentkeyError, `expected an IntentkeyError, got ${caught}`);
  assert.ok(caught instanceof Error);
  assert.equal(caught.name, 'IntentkeyError');
  assert.equal(caught.code, code, caught.message);
  if (field !== undefined) assert.equal(caught.field, field);
  assert.equal(typeof caught.message, 'string');
  assert.ok(caught.message.length > 0);
  return caught;
}

test('derive: the README example (text and object payloads agree)', () => {
  const keyer = createKeyer({ secret: SECRET });
  assert.equal(keyer.derive(FIRST), KEY);
  assert.equal(keyer.derive(AGAIN), KEY);
  assert.equal(
    keyer.material(FIRST),
    '["tenant-1","pix.send",{"amount":"10.50","creditor_key":"12345678909","currency":"BRL","remittance":"fatura março"},1888888]',
  );
  // A secret given as bytes is the same secret, and stays the caller's (not zeroed).
  const bytes = new Uint8Array(32).fill(0x5c);
  assert.equal(createKeyer({ secret: bytes }).derive(FIRST), KEY);
  assert.deepEqual(bytes, new Uint8Array(32).fill(0x5c));
  assert.equal(createKeyer({ secret: SECRET.toUpperCase() }).derive(FIRST), KEY);
});

test('intentEpoch: number and bigint agree; out of range or fractional is invalid-epoch', () => {
  const keyer = createKeyer({ secret: SECRET });
  assert.equal(keyer.derive({ ...FIRST, intentEpoch: 1_700_000_000n }), KEY);
  const max = keyer.material({ ...FIRST, intentEpoch: 2n ** 63n - 1n });
  assert.match(max, /,10248191152060862\]$/);
  for (const bad of [1.5, 2 ** 53, Number.NaN, '1700000000', 2n ** 63n, -(2n ** 63n) - 1n, undefined]) {
    throwsIntentkey(() => keyer.derive({ ...FIRST, intentEpoch: bad }), 'invalid-epoch', 'intent_epoch');
  }
});

test('payload text keeps number literals exactly; objects go through JSON.stringify', () => {
  const keyer = createKeyer({ secret: SECRET });
  const intent = (payload) => ({ ...FIRST, payload });
  // A 26-digit integer literal is taken exactly from the text...
  assert.match(
    keyer.material(intent('{"amount":12345678901234567890123456}')),
    /"amount":"12345678901234567890123456\.00"/,
  );
  // ...while a JS number has already lost the digits (documented: pass text or strings).
  assert.match(
    keyer.material(intent({ amount: 12345678901234567890123456 })),
    /"amount":"12345678901234568000000000\.00"/,
  );
  assert.match(keyer.material(intent({ amount: '12345678901234567890123456' })), /"12345678901234567890123456\.00"/);
  assert.equal(keyer.material(intent('{"amount":1.0050}')), keyer.material(intent('{"amount":"1.005"}')));
  throwsIntentkey(() => keyer.derive(intent({ amount: 10n })), 'invalid-payload', 'payload');
  throwsIntentkey(() => keyer.derive(intent(undefined)), 'invalid-payload', 'payload');
});

test('IntentkeyError carries the WIT code and field, never the secret', () => {
  const keyer = createKeyer({ secret: SECRET });
  const e = throwsIntentkey(
    () => keyer.derive({ ...FIRST, payload: '{"zeta":1,"alpha":2,"amount":"1"}' }),
    'unclassified-fields',
  );
  assert.match(e.message, /\["alpha", "zeta"\]/);
  throwsIntentkey(() => keyer.derive({ ...FIRST, tenantId: '' }), 'invalid-tenant-id', 'tenant_id');
  throwsIntentkey(() => keyer.derive({ ...FIRST, tenantId: 7 }), 'invalid-tenant-id', 'tenant_id');
  throwsIntentkey(() => keyer.derive({ ...FIRST, actionType: null }), 'invalid-action-type', 'action_type');
  throwsIntentkey(() => keyer.derive({ ...FIRST, payload: '{"amount":"ten"}' }), 'invalid-decimal', 'amount');

  const short = 'ab'.repeat(31);
  const tooShort = throwsIntentkey(() => createKeyer({ secret: short }), 'secret-too-short', 'secret');
  assert.ok(!tooShort.message.includes('abab'), tooShort.message);
  const notHex = throwsIntentkey(() => createKeyer({ secret: `${'zz'}${SECRET}` }), 'invalid-secret', 'secret');
  assert.ok(!notHex.message.includes(SECRET));
  throwsIntentkey(() => createKeyer({}), 'invalid-secret', 'secret');
  throwsIntentkey(() => createKeyer({ secret: 42 }), 'invalid-secret', 'secret');

  throwsIntentkey(
    () => createKeyer({ secret: SECRET, policy: { version: 1, fields: { amount: { class: 'key', normalizer: 'decimal', scale: 19 } } } }),
    'invalid-policy',
    'fields.amount.scale',
  );
  throwsIntentkey(() => createKeyer({ secret: SECRET, policy: '{"version":' }), 'invalid-policy');
});

test('non-ASCII text crosses into the component as UTF-8: raw and \\u-escaped payloads give one key, short, long and past a memory growth', () => {
  const keyer = createKeyer({ secret: SECRET });
  const escaped = (text) => text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const keyOf = (text) => keyer.derive({ ...FIRST, payload: `{"amount":"1.00","remittance":"${text}"}` });
  const texts = [];
  // Around the glue's short-string bound (64 UTF-16 units) and with the first non-ASCII character early or late.
  for (const n of [1, 2, 31, 40, 41, 63, 64, 65, 100, 4096]) {
    texts.push(`${'a'.repeat(n)}ç`, `ç${'a'.repeat(n)}`, `março ${'€'.repeat(n)} 😀 ${'ß'.repeat(n)}`);
  }
  // Several MiB of multi-byte text: the allocation grows the guest's memory while the string is written.
  texts.push('€😀ç'.repeat(700_000));
  for (const text of texts) {
    assert.equal(keyOf(text), keyOf(escaped(text)), `${text.length} UTF-16 units`);
  }
  assert.notEqual(keyOf('março'), keyOf('marco'));
});

test('bad input never traps: the keyer keeps working afterwards', () => {
  const keyer = createKeyer({ secret: SECRET });
  const intent = (payload) => ({ ...FIRST, payload });
  throwsIntentkey(() => keyer.derive(intent('['.repeat(200_000))), 'invalid-payload');
  throwsIntentkey(() => keyer.derive(intent(`{"request_id":${'['.repeat(150)}${']'.repeat(150)},"amount":"1"}`)), 'invalid-payload');
  throwsIntentkey(() => keyer.derive(intent('{"amount":NaN}')), 'invalid-payload');
  // A lone surrogate, escaped in the text (the core refuses) or raw in the JS string
  // (cannot become a WIT string): the same answer.
  throwsIntentkey(() => keyer.derive(intent('{"amount":"\\ud800"}')), 'invalid-payload', 'payload');
  throwsIntentkey(() => keyer.derive(intent('{"amount":"\ud800"}')), 'invalid-payload', 'payload');
  throwsIntentkey(() => keyer.derive(intent(`{"amount":"1.00","remittance":"${'a'.repeat(100)}\ud800"}`)), 'invalid-payload', 'payload');
  throwsIntentkey(() => keyer.derive({ ...FIRST, tenantId: 'a\udc00' }), 'invalid-tenant-id');
  throwsIntentkey(() => keyer.derive(intent('{"amount":1e400}')), 'invalid-decimal');
  throwsIntentkey(() => keyer.derive(intent(`{"amount":"${'9'.repeat(100_000)}"}`)), 'decimal-out-of-range');
  throwsIntentkey(() => keyer.derive(intent('')), 'invalid-payload');
  throwsIntentkey(() => keyer.derive(intent('[]')), 'invalid-payload');
  throwsIntentkey(() => keyer.intentKey('t', 'i', 31), 'invalid-key-length', 'keyHexLength');
  throwsIntentkey(() => keyer.intentKey('t', 'i', 40.5), 'invalid-key-length');
  throwsIntentkey(() => keyer.intentKey('t', 'i', -1), 'invalid-key-length');
  throwsIntentkey(() => keyer.intentKey('t', '', 40), 'invalid-intent-id', 'intent_id');
  throwsIntentkey(() => uuidKey(new Uint8Array(15)), 'invalid-random');
  assert.throws(() => keyer.derive(null), TypeError);
  assert.throws(() => uuidKey([1, 2, 3]), TypeError);
  const big = { request_id: 'x'.repeat(1 << 20), amount: '1.00' };
  assert.match(keyer.derive(intent(big)), /^[0-9a-f]{64}$/);
  assert.equal(keyer.derive(FIRST), KEY);
});

test('deriveMany: one answer per intent, in order, errors in place', () => {
  const keyer = createKeyer({ secret: SECRET });
  const intents = [];
  for (let i = 0; i < 300; i++) {
    if (i % 7 === 3) intents.push({ ...FIRST, payload: `{"amount":"${i}","coupon":"x"}` });
    else if (i % 11 === 5) intents.push({ ...FIRST, intentEpoch: 0.5 });
    else intents.push({ ...FIRST, payload: `{"amount":"${i}.25","currency":"BRL"}`, intentEpoch: 1_700_000_000 + i * 900 });
  }
  const results = keyer.deriveMany(intents);
  assert.equal(results.length, intents.length);
  results.forEach((r, i) => {
    let want;
    try {
      want = { key: keyer.derive(intents[i]) };
    } catch (e) {
      want = { error: e.code };
    }
    if (want.key) assert.deepEqual(r, want, `#${i}`);
    else {
      assert.ok(r.error instanceof IntentkeyError, `#${i}`);
      assert.equal(r.error.code, want.error, `#${i}`);
    }
  });
  assert.equal(new Set(results.filter((r) => r.key).map((r) => r.key)).size, results.filter((r) => r.key).length);
  assert.deepEqual(keyer.deriveMany([]), []);
});

test('intentKey and fingerprints', () => {
  const keyer = createKeyer({ secret: SECRET });
  const k40 = keyer.intentKey('tenant-1', 'intent-7f3a', 40);
  assert.match(k40, /^[0-9a-f]{40}$/);
  assert.ok(keyer.intentKey('tenant-1', 'intent-7f3a').startsWith(k40));
  assert.equal(keyer.intentKey('tenant-1', 'intent-7f3a', undefined).length, 64);
  const fp = keyer.fingerprint('tenant-1', 'pix.send', FIRST.payload);
  assert.match(fp, /^[0-9a-f]{64}$/);
  assert.equal(keyer.fingerprint('tenant-1', 'pix.send', AGAIN.payload), fp);
  assert.equal(keyer.fingerprintMatches('tenant-1', 'pix.send', AGAIN.payload, fp), true);
  assert.equal(keyer.fingerprintMatches('tenant-1', 'pix.send', { ...AGAIN.payload, amount: '10.51' }, fp), false);
  assert.equal(keyer.fingerprintMatches('tenant-1', 'pix.send', FIRST.payload, 'nope'), false);
  assert.match(keyer.fingerprintMaterial('tenant-1', 'pix.send', FIRST.payload), /^\[/);
  keyer.dispose();
  keyer.dispose();
  assert.throws(() => keyer.derive(FIRST), /disposed/);
  assert.equal(createKeyer({ secret: SECRET }).derive(FIRST), KEY, 'other keyers are unaffected');
});

test('uuid keys: v4 shape from host randomness, fixed bytes give fixed keys', () => {
  const shape = /^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/;
  const seen = new Set();
  for (let i = 0; i < 200; i++) {
    const key = newUuidKey();
    assert.match(key, shape);
    seen.add(key);
  }
  assert.equal(seen.size, 200);
  assert.equal(uuidKey(new Uint8Array(16).fill(0xab)), 'abababababab4bababababababababab');
  assert.match(uuidKey(new Uint8Array(16)), shape);
});

test('answerLines: one answer per line, in order; a lone surrogate is a non-UTF-8 line', () => {
  const line = (id) =>
    JSON.stringify({ id, secret_hex: SECRET, tenant_id: 'tenant-1', action_type: 'pix.send', payload: JSON.parse(FIRST.payload), intent_epoch: 1_700_000_000 });
  const lines = [line('a'), '', 'not json', '{"id":"x\ud800"}', line('b'), '{"id":7}\r'];
  const answers = answerLines(lines);
  assert.equal(answers.length, lines.length);
  assert.equal(answers[0], `{"id":"a","key":"${KEY}"}`);
  assert.match(answers[1], /^\{"id":null,"error":\{"code":"invalid-json"/);
  assert.match(answers[2], /^\{"id":null,"error":\{"code":"invalid-json"/);
  assert.equal(answers[3], unreadableLineAnswer());
  assert.equal(answers[4], `{"id":"b","key":"${KEY}"}`);
  assert.match(answers[5], /^\{"id":7,"error":\{"code":"invalid-secret"/);
  assert.deepEqual(answerLines([]), []);
  assert.throws(() => answerLines('x'), TypeError);
});

test('answerLines with a policy: keys under it; a bad policy is refused whole', () => {
  const policy = {
    version: 1,
    keyHexLength: 40,
    fields: { amount: { class: 'key', normalizer: 'decimal', scale: 2 }, request_id: { class: 'ignored' } },
  };
  const line = (payload) =>
    JSON.stringify({ id: 1, secret_hex: SECRET, tenant_id: 't', action_type: 'a', payload, intent_epoch: 1_700_000_000 });
  const [a, b, c] = answerLines([line({ amount: '1.5' }), line({ amount: 1.50, request_id: 'x' }), line({ amount: '1', currency: 'BRL' })], { policy });
  assert.match(a, /^\{"id":1,"key":"[0-9a-f]{40}"\}$/);
  assert.equal(b, a);
  assert.match(c, /"code":"unclassified-fields"/);
  assert.deepEqual(answerLines([line({ amount: '1.5' })], { policy: JSON.stringify(policy) }), [a]);
  const keyer = createKeyer({ secret: SECRET, policy });
  assert.equal(JSON.parse(a).key, keyer.derive({ tenantId: 't', actionType: 'a', payload: { amount: '1.50' }, intentEpoch: 1_700_000_000 }));
  throwsIntentkey(() => answerLines([line({})], { policy: { version: 2 } }), 'invalid-policy');
  throwsIntentkey(() => answerLines([], { policy: '{"version":1,"fields":{"x":{"class":"nope"}}}' }), 'invalid-policy', 'fields.x.class');
});
