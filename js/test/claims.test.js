// The core's `claims` exports through the package: types in and out, and the
// values the boundary refuses instead of letting jco wrap or coerce them. The
// rules themselves are the core's and are tested in Rust; here we only check
// that they arrive intact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { claims, createGuard, jsonResponse, memoryStore } from '../src/index.js';

const ok = jsonResponse(200, { ok: true });

test('records cross the boundary in the stored spelling, times as numbers', () => {
  const r = claims.newRecord('k', 'fp', 't', 'a', 1_700_000_000);
  assert.deepEqual(r, {
    key: 'k',
    fingerprint: 'fp',
    tenantId: 't',
    actionType: 'a',
    status: 'in_flight',
    response: null,
    createdAt: 1_700_000_000,
    expiresAt: null,
    lookups: 0,
    nextLookupAt: null,
  });
  assert.deepEqual(claims.newRecord('k', 'fp', 't', 'a', 5n), { ...r, createdAt: 5 });
  const done = claims.complete(r, ok, 1_700_000_010, 60);
  assert.equal(done.status, 'done');
  assert.deepEqual(done.response, ok);
  assert.equal(done.expiresAt, 1_700_000_070);
  assert.deepEqual(claims.decideExisting(done, 'fp'), { outcome: 'done', response: ok });
  assert.deepEqual(claims.decideExisting(r, 'fp'), { outcome: 'in-flight' });
  assert.deepEqual(claims.decideExisting(r, 'other'), { outcome: 'payload-conflict' });
  const waiting = { ...r, status: 'needs_reconciliation' };
  assert.deepEqual(claims.decideExisting(waiting, 'fp'), { outcome: 'in-flight' });
  assert.equal(claims.recoveryDue(waiting, Number.MAX_SAFE_INTEGER, 0), false);
  assert.equal(claims.recoveryDue(done, Number.MAX_SAFE_INTEGER, 0), false);
  assert.equal(claims.recoveryDue(r, 1_700_000_000, 0), true);
  assert.equal(claims.purgeable(r, Number.MAX_SAFE_INTEGER), false);
  assert.equal(claims.purgeable(done, 1_700_000_069), false);
  assert.equal(claims.purgeable(done, 1_700_000_070), true);
  assert.equal(claims.defaultTtlSeconds(), 86_400);
});

test('answers: null for owned, the stored response replayed, problem+json otherwise', () => {
  assert.equal(claims.answerFor({ outcome: 'owned' }), null);
  assert.deepEqual(claims.answerFor({ outcome: 'done', response: ok }), { ...ok, replayed: true });
  for (const [outcome, status] of [
    ['in-flight', 409],
    ['payload-conflict', 422],
  ]) {
    const a = claims.answerFor({ outcome });
    assert.equal(a.status, status);
    assert.equal(a.contentType, 'application/problem+json');
    assert.equal(a.replayed, false);
    assert.equal(JSON.parse(a.body).status, status);
  }
  const missing = claims.missingKeyAnswer('Idempotency-Key');
  assert.equal(missing.status, 400);
  assert.match(JSON.parse(missing.body).detail, /Idempotency-Key/);
});

test('recovery decisions', () => {
  const r = claims.newRecord('k', 'fp', 't', 'a', 0);
  assert.deepEqual(claims.decideRecovery(r, { found: ok }, false, 10), { action: 'record-done', response: ok });
  assert.deepEqual(claims.decideRecovery(r, 'absent', true, 10), { action: 're-execute' });
  assert.deepEqual(claims.decideRecovery(r, 'absent', false, 10), { action: 'check-later', lookups: 1, nextLookupAt: 70 });
  assert.deepEqual(claims.decideRecovery(r, 'unknown', true, 10), { action: 'check-later', lookups: 1, nextLookupAt: 70 });
  assert.deepEqual(claims.decideRecovery({ ...r, lookups: 3 }, 'unknown', true, 10), { action: 'reconcile', lookups: 4 });
});

test('the boundary refuses what jco would wrap or coerce', () => {
  const r = claims.newRecord('k', 'fp', 't', 'a', 0);
  assert.throws(() => claims.complete(r, { ...ok, status: 70_000 }, 0, 60), TypeError);
  assert.throws(() => claims.complete(r, { ...ok, status: 200.5 }, 0, 60), TypeError);
  assert.throws(() => claims.complete(r, { status: 200, body: '' }, 0, 60), /contentType/);
  assert.throws(() => claims.complete(r, { ...ok, body: {} }, 0, 60), /body/);
  assert.throws(() => claims.complete(r, { ...ok, body: '\ud800' }, 0, 60), /well-formed/);
  assert.throws(() => claims.newRecord('k', 'fp', 't', 'a', 1.5), /whole seconds/);
  assert.throws(() => claims.newRecord('k', 'fp', 't', 'a', 2 ** 53), /whole seconds/);
  assert.throws(() => claims.newRecord('k', 'fp', 't', 'a', 2n ** 63n), /whole seconds/);
  assert.throws(() => claims.newRecord(1, 'fp', 't', 'a', 0), /key must be a string/);
  assert.throws(() => claims.decideExisting({ ...r, status: 'in-flight' }, 'fp'), /status must be one of in_flight/);
  assert.throws(() => claims.decideExisting({ ...r, lookups: -1 }, 'fp'), /lookups/);
  assert.throws(() => claims.decideRecovery(r, 'maybe', false, 0), /look-up answers/);
  assert.throws(() => claims.decideRecovery(r, { found: {} }, false, 0), /status/);
  assert.throws(() => claims.decideRecovery(r, 'absent', 'yes', 0), /readYourWrites/);
  assert.throws(() => claims.answerFor({ outcome: 'maybe' }), /outcome/);
});

test('the guard refuses bad use before touching the store', async () => {
  assert.throws(() => createGuard({}), /store must have insertIfAbsent/);
  assert.throws(() => createGuard({ store: memoryStore(), ttlSeconds: 1.5 }), /ttlSeconds/);
  const store = memoryStore();
  const guard = createGuard({ store });
  const effect = async () => ok;
  await assert.rejects(guard.run({ intent: { tenantId: 't' } }, effect), /needs a keyer/);
  await assert.rejects(guard.run({ key: 'k', tenantId: 't', actionType: 'a' }, effect), /fingerprint or the payload/);
  await assert.rejects(guard.run({ key: 'k', tenantId: 't', actionType: 'a', payload: '{}' }, effect), /needs a keyer/);
  await assert.rejects(guard.run({ key: '', fingerprint: 'f', tenantId: 't', actionType: 'a' }, effect), /key must be/);
  await assert.rejects(guard.run({ key: 'k', fingerprint: 'f', tenantId: 't', actionType: 'a' }), /effect must be a function/);
  await assert.rejects(guard.recover({ key: 'k', lookup: async () => 'unknown' }), /staleAfterSeconds/);
  await assert.rejects(
    guard.recover({ key: 'k', lookup: async () => 'unknown', readYourWrites: true, staleAfterSeconds: 0 }),
    /pass the effect/,
  );
  assert.deepEqual(store.list('in_flight'), []);
  assert.equal(
    (await guard.recover({ key: 'nope', lookup: async () => 'unknown', staleAfterSeconds: 0 })).action,
    'missing',
  );
});

test('an effect that answers something that is not a response leaves the record in_flight', async () => {
  const store = memoryStore();
  const guard = createGuard({ store });
  const claim = { key: 'k', fingerprint: 'f', tenantId: 't', actionType: 'a' };
  await assert.rejects(guard.run(claim, async () => ({ status: 200 })), /contentType/);
  assert.equal(store.get('k').status, 'in_flight');
  // An error whose `response` is not ours (an HTTP client's, say): the outcome is unknown.
  const foreign = Object.assign(new Error('HTTP 502'), { response: { status: 502, data: '' } });
  await assert.rejects(guard.run({ ...claim, key: 'k2' }, async () => Promise.reject(foreign)), /HTTP 502/);
  assert.equal(store.get('k2').status, 'in_flight');
});
