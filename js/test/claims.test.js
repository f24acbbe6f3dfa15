// The core's `claims` exports through the package: types in and out, and the
// values the boundary refuses instead of letting jco wrap or coerce them. The
// rules themselves are the core's and are tested in Rust; here we only check
// that they arrive intact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IntentkeyError, claims, createEndpoint, createGuard, jsonResponse, memoryStore } from '../src/index.js';

const text = (bytes) => new TextDecoder().decode(bytes);

const ok = jsonResponse(200, { ok: true }, [['Location', '/ok/1']]);
const record = (extra = {}) => ({
  key: 'k',
  fingerprint: 'fp',
  tenantId: 't',
  actionType: 'a',
  status: 'in_flight',
  ownerToken: 'ab'.repeat(16),
  response: null,
  createdAt: 1_700_000_000,
  expiresAt: null,
  lookups: 0,
  nextLookupAt: null,
  ...extra,
});

test('decisions over records in the stored spelling, times as numbers; bodies are bytes', () => {
  const r = record();
  const done = record({ status: 'done', response: ok, expiresAt: 1_700_000_070 });
  assert.deepEqual(claims.decideExisting(done, 'fp'), { outcome: 'done', response: ok });
  assert.ok(claims.decideExisting(done, 'fp').response.body instanceof Uint8Array);
  // A string body is taken as UTF-8 text; what comes back is bytes.
  const textual = record({ status: 'done', response: { ...ok, body: '{"ok":true}' }, expiresAt: 1 });
  assert.deepEqual(claims.decideExisting(textual, 'fp'), { outcome: 'done', response: ok });
  const binary = new Uint8Array([0, 0xff, 0xfe, 0x80, 10]);
  const bin = record({ status: 'done', response: { ...ok, body: binary }, expiresAt: 1 });
  assert.deepEqual(claims.decideExisting(bin, 'fp').response.body, binary);
  assert.deepEqual(claims.decideExisting(r, 'fp'), { outcome: 'in-flight' });
  assert.deepEqual(claims.decideExisting(r, 'other'), { outcome: 'payload-conflict' });
  const waiting = record({ status: 'needs_reconciliation' });
  assert.deepEqual(claims.decideExisting(waiting, 'fp'), { outcome: 'in-flight' });
  assert.equal(claims.recoveryDue(waiting, Number.MAX_SAFE_INTEGER, 0), false);
  assert.equal(claims.recoveryDue(done, Number.MAX_SAFE_INTEGER, 0), false);
  assert.equal(claims.recoveryDue(r, 1_700_000_299, 300), false);
  assert.equal(claims.recoveryDue(r, 1_700_000_300, 300n), true);
  assert.equal(claims.purgeable(r, Number.MAX_SAFE_INTEGER), false);
  assert.equal(claims.purgeable(done, 1_700_000_069), false);
  assert.equal(claims.purgeable(done, 1_700_000_070), true);
});

test('the documented defaults and owner tokens', () => {
  assert.deepEqual(claims.defaultRules(), { ttlSeconds: 86_400, releaseStatuses: [429, 503], fastCompletion: false });
  assert.equal(claims.defaultTtlSeconds(), 86_400);
  assert.equal(claims.defaultStaleAfterSeconds(), 300);
  // A copy each time: changing it changes nothing.
  claims.defaultRules().releaseStatuses.push(500);
  assert.deepEqual(claims.defaultRules().releaseStatuses, [429, 503]);
  assert.equal(claims.ownerToken(new Uint8Array(16).fill(0xab)), 'ab'.repeat(16));
  assert.throws(() => claims.ownerToken(new Uint8Array(3)), (e) => e.code === 'invalid-random');
  assert.throws(() => claims.ownerToken('ab'), TypeError);
});

test('outcome classes: answered is terminal unless its status releases; refused releases; failed is ambiguous', () => {
  assert.equal(claims.classify({ answered: jsonResponse(201, {}) }), 'terminal');
  assert.equal(claims.classify({ answered: jsonResponse(500, {}) }), 'terminal');
  assert.equal(claims.classify({ answered: jsonResponse(402, {}) }), 'terminal');
  assert.equal(claims.classify({ answered: jsonResponse(429, {}) }), 'released');
  assert.equal(claims.classify({ answered: jsonResponse(503, {}) }), 'released');
  assert.equal(claims.classify({ refused: null }), 'released');
  assert.equal(claims.classify({ refused: jsonResponse(400, {}) }), 'released');
  assert.equal(claims.classify('failed'), 'ambiguous');
  const rules = { ttlSeconds: 60, releaseStatuses: [], fastCompletion: false };
  assert.equal(claims.classify({ answered: jsonResponse(503, {}) }, rules), 'terminal');
  assert.equal(claims.classify({ answered: jsonResponse(409, {}) }, { ...rules, releaseStatuses: [409] }), 'released');
  assert.throws(() => claims.classify('maybe'), /effect result/);
  assert.throws(() => claims.classify('failed', { ...rules, releaseStatuses: [70_000] }), /releaseStatuses/);
});

test('answers come from the http endpoint: null for owned, the replay (allow-listed headers), the profile’s 409 and 422', () => {
  const endpoint = createEndpoint({ secret: '5c'.repeat(32) });
  assert.equal(endpoint.answer({ outcome: 'owned' }), null);
  assert.equal(endpoint.answer('owned'), null);
  const stored = { ...ok, headers: [['Location', '/ok/1'], ['Set-Cookie', 's=1']] };
  const replay = endpoint.answer({ outcome: 'done', response: stored });
  assert.deepEqual(replay, {
    status: 200,
    headers: [['Content-Type', 'application/json'], ['Location', '/ok/1'], ['Idempotent-Replayed', 'true']],
    body: ok.body,
  });
  // A decision as decideExisting gives it, its bare outcome and the WIT form answer alike.
  const r = record();
  assert.deepEqual(endpoint.answer(claims.decideExisting(r, 'fp'), 0), endpoint.answer('in-flight', 0));
  assert.deepEqual(endpoint.answer({ tag: 'payload-conflict' }, 0), endpoint.answer('payload-conflict', 0));
  for (const [outcome, status, headers] of [
    ['in-flight', 409, [['Content-Type', 'application/problem+json'], ['Retry-After', '1']]],
    ['payload-conflict', 422, [['Content-Type', 'application/problem+json']]],
  ]) {
    const a = endpoint.answer({ outcome }, 0);
    assert.equal(a.status, status);
    assert.deepEqual(a.headers, headers);
    assert.ok(a.body instanceof Uint8Array);
    const problem = JSON.parse(text(a.body));
    assert.equal(problem.status, status);
    assert.match(problem.type, /^https:\/\/intentkey\.dev\/problems\//);
  }
  const missing = endpoint.admit({ tenantId: 't', method: 'POST', route: '/p', keyValues: [], body: new Uint8Array() }, 0);
  assert.equal(missing.tag, 'refused');
  assert.equal(missing.reply.status, 400);
  assert.match(JSON.parse(text(missing.reply.body)).detail, /Idempotency-Key/);
});

test('recovery decisions', () => {
  const r = record({ createdAt: 0 });
  assert.deepEqual(claims.decideRecovery(r, { found: ok }, false, 10), { action: 'record-done', response: ok });
  assert.deepEqual(claims.decideRecovery(r, 'absent', true, 10), { action: 're-execute' });
  assert.deepEqual(claims.decideRecovery(r, 'absent', false, 10), { action: 'check-later', lookups: 1, nextLookupAt: 70 });
  assert.deepEqual(claims.decideRecovery(r, 'unknown', true, 10), { action: 'check-later', lookups: 1, nextLookupAt: 70 });
  assert.deepEqual(claims.decideRecovery({ ...r, lookups: 3 }, 'unknown', true, 10), { action: 'reconcile', lookups: 4 });
});

test('the boundary refuses what jco would wrap or coerce', () => {
  const r = record();
  const done = (response) => record({ status: 'done', response, expiresAt: 1 });
  assert.throws(() => claims.decideExisting(done({ ...ok, status: 70_000 }), 'fp'), TypeError);
  assert.throws(() => claims.decideExisting(done({ ...ok, status: 200.5 }), 'fp'), TypeError);
  assert.throws(() => claims.decideExisting(done({ status: 200, body: '' }), 'fp'), /contentType/);
  assert.throws(() => claims.decideExisting(done({ ...ok, body: {} }), 'fp'), /body must be bytes/);
  assert.throws(() => claims.decideExisting(done({ ...ok, body: '\ud800' }), 'fp'), /well-formed/);
  assert.throws(() => claims.decideExisting(done({ ...ok, headers: [['Location']] }), 'fp'), /pair/);
  assert.throws(() => claims.decideExisting(done({ ...ok, headers: [['X', 1]] }), 'fp'), /string/);
  assert.throws(() => claims.recoveryDue(r, 1.5, 0), /whole seconds/);
  assert.throws(() => claims.recoveryDue(r, 2 ** 53, 0), /whole seconds/);
  assert.throws(() => claims.recoveryDue(r, 2n ** 63n, 0), /whole seconds/);
  assert.throws(() => claims.decideExisting({ ...r, key: 1 }, 'fp'), /key must be a string/);
  // One spelling of a record status: the stored one; the claim outcome's is refused, by name.
  assert.throws(
    () => claims.decideExisting({ ...r, status: 'in-flight' }, 'fp'),
    (e) =>
      e instanceof IntentkeyError &&
      e.code === 'invalid-argument' &&
      e.field === 'the existing record.status' &&
      /one of 'in_flight', 'done', 'needs_reconciliation'; got 'in-flight' \(.*written 'in_flight'\)/.test(e.message),
  );
  assert.throws(() => claims.decideExisting({ ...r, status: 'needs-reconciliation' }, 'fp'), /written 'needs_reconciliation'/);
  assert.throws(() => claims.decideExisting({ ...r, status: undefined }, 'fp'), /got undefined$/);
  assert.throws(() => claims.decideExisting({ ...r, lookups: -1 }, 'fp'), /lookups/);
  assert.throws(() => claims.decideRecovery(r, 'maybe', false, 0), /look-up answers/);
  assert.throws(() => claims.decideRecovery(r, { found: {} }, false, 0), /status/);
  assert.throws(() => claims.decideRecovery(r, 'absent', 'yes', 0), /readYourWrites/);
  assert.throws(() => createEndpoint({ secret: '5c'.repeat(32) }).answer({ outcome: 'maybe' }), /claim outcome/);
});

test('the guard refuses bad use before touching the store', async () => {
  assert.throws(() => createGuard({}), /store must have insert/);
  assert.throws(() => createGuard({ store: memoryStore(), ttlSeconds: 1.5 }), /ttlSeconds/);
  assert.throws(() => createGuard({ store: memoryStore(), releaseStatuses: [429, 'x'] }), /releaseStatuses/);
  assert.throws(() => createGuard({ store: memoryStore(), fastCompletion: 'yes' }), /fastCompletion/);
  assert.throws(() => createGuard({ store: memoryStore(), staleAfterSeconds: -0.5 }), /staleAfterSeconds/);
  const store = memoryStore();
  const guard = createGuard({ store });
  assert.deepEqual(guard.rules, claims.defaultRules());
  assert.equal(guard.staleAfterSeconds, claims.defaultStaleAfterSeconds());
  const effect = async () => ok;
  await assert.rejects(guard.run({ intent: { tenantId: 't' } }, effect), /needs a keyer/);
  await assert.rejects(guard.run({ key: 'k', tenantId: 't', actionType: 'a' }, effect), /fingerprint or the payload/);
  await assert.rejects(guard.run({ key: 'k', tenantId: 't', actionType: 'a', payload: '{}' }, effect), /needs a keyer/);
  await assert.rejects(guard.run({ key: '', fingerprint: 'f', tenantId: 't', actionType: 'a' }, effect), /key must be/);
  await assert.rejects(guard.run({ key: '\ud800', fingerprint: 'f', tenantId: 't', actionType: 'a' }, effect), /well-formed/);
  await assert.rejects(guard.run({ key: 'k', fingerprint: 'f', tenantId: 't', actionType: 'a' }), /effect must be a function/);
  await assert.rejects(guard.recover({ key: 'k' }), /lookup must be a function/);
  await assert.rejects(guard.recover({ key: 'k', lookup: async () => 'unknown', readYourWrites: true }), /pass the effect/);
  assert.deepEqual(await guard.list('in_flight'), []);
  for (const status of ['in-flight', 'needs-reconciliation', 'IN_FLIGHT', 'pending', undefined]) {
    await assert.rejects(
      guard.list(status),
      (e) => e instanceof IntentkeyError && e.code === 'invalid-argument' && e.field === 'status' && /one of 'in_flight', 'done', 'needs_reconciliation'/.test(e.message),
    );
  }
  assert.deepEqual(await guard.recover({ key: 'nope', lookup: async () => 'unknown' }), { outcome: 'missing', key: 'nope' });
});
