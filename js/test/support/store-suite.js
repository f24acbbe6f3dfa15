// The guard's behaviour on one store: every claim outcome, the outcome classes,
// fencing (a superseded owner's late completion), recovery (not due, found,
// absent, unknown), purge and the fenced store operations themselves. Run by
// guard.test.js (memory, better-sqlite3) and pg.test.js (PostgreSQL), so every
// store passes the same checks.
//
// Expected answers are asked of the core (an http endpoint's answers,
// claims.decideRecovery, claims.defaultRules, …), never written out here: the
// tests check that the guard and the stores carry the core's decisions through
// the I/O unchanged.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  IntentkeyRefused,
  claims,
  createEndpoint,
  createGuard,
  createKeyer,
  jsonResponse,
  refused,
} from '../../src/index.js';

export const T0 = 1_700_000_000;
const SECRET = '5c'.repeat(32);
const PIX = {
  tenantId: 'tenant-1',
  actionType: 'pix.send',
  payload: '{"creditor_key":"123.456.789-09","amount":10.5,"currency":"brl","request_id":"r-1"}',
  intentEpoch: T0,
};
const TOKEN = /^[0-9a-f]{32}$/;

/** A clock the test moves. */
export function clock(start = T0) {
  const c = { t: start, now: () => c.t };
  return c;
}

/** A deferred promise. */
export function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** An effect that counts its runs and the keys it was given. */
function countingEffect(response = jsonResponse(201, { id: 'pay_1' })) {
  const calls = [];
  const effect = async (key) => {
    calls.push(key);
    return typeof response === 'function' ? response(key, calls.length) : response;
  };
  return { effect, calls };
}

export const claimOf = (key, fingerprint = 'fp-a') => ({ key, fingerprint, tenantId: 'tenant-1', actionType: 'pix.send' });

/** UTF-8 text of a body. */
export const text = (bytes) => new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
/** UTF-8 bytes of a text. */
export const bytes = (s) => new TextEncoder().encode(s);

const IETF = createEndpoint({ secret: SECRET });

/**
 * What run() gives an attempt that does not own the effect: the core's answer
 * (the ietf profile's, or `endpoint`'s), Content-Type apart from the other headers.
 */
function coreAnswer(decision, endpoint = IETF) {
  const reply = endpoint.answer(decision, T0);
  const contentType = reply.headers.find(([n]) => n === 'Content-Type')[1];
  const headers = reply.headers.filter(([n]) => n !== 'Content-Type');
  return { response: { status: reply.status, contentType, headers, body: reply.body }, replayed: false };
}

/** A WIT record, as the component hands it to a store. */
export function witRecord(key, ownerToken, createdAt, extra = {}) {
  return {
    key,
    fingerprint: 'fp',
    tenantId: 'tenant-1',
    actionType: 'pix.send',
    status: 'in-flight',
    ownerToken,
    response: undefined,
    createdAt: BigInt(createdAt),
    expiresAt: undefined,
    lookups: 0,
    nextLookupAt: undefined,
    ...extra,
  };
}

const failing = (message) => async () => {
  throw new Error(message);
};

/** Waits until the store holds `key`. */
async function claimed(guard, key) {
  while ((await guard.inspect(key)) === null) await new Promise((r) => setTimeout(r, 1));
}

/**
 * An open() for storeSuite on a server: `fresh()` makes a place of the test's
 * own (a schema, a database, a key prefix: anything with drop()), `make(place)`
 * opens a store there: { store, place, close }. close() closes the store (which
 * ends only what the store made itself), then drops the place; a store that
 * fails to open drops the place too, and its error stands.
 * @template P
 * @param {() => Promise<P & { drop: () => Promise<void> }>} fresh
 * @param {(place: P) => Promise<any>} make
 */
export function freshStore(fresh, make) {
  return async () => {
    const place = await fresh();
    try {
      const store = await make(place);
      return {
        store,
        place,
        async close() {
          await store.close();
          await place.drop();
        },
      };
    } catch (e) {
      await place.drop();
      throw e;
    }
  };
}

/**
 * Registers the suite.
 * @param {string} label
 * @param {{ skip?: string | false, open: () => Promise<{ store: any, close: () => Promise<void> }> }} backend
 *   open() gives a fresh, empty store (its own file / schema) and how to dispose of it
 */
export function storeSuite(label, backend) {
  const it = (name, fn) =>
    test(name, async () => {
      const { store, close } = await backend.open();
      try {
        await fn(store);
      } finally {
        await close();
      }
    });

  describe(`guard on ${label}`, { skip: backend.skip ?? false }, () => {
    it('first claim owns: the effect runs once, with the key; the answer is stored under a fresh owner token', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      const answer = jsonResponse(201, { id: 'pay_1' }, [['Location', '/payments/pay_1']]);
      const { effect, calls } = countingEffect(answer);
      const result = await guard.run(claimOf('k-own'), effect);
      assert.deepEqual(result, { outcome: 'owned', response: answer, replayed: false, key: 'k-own', finished: 'stored' });
      assert.deepEqual(calls, ['k-own']);
      const record = await guard.inspect('k-own');
      assert.match(record.ownerToken, TOKEN);
      assert.deepEqual(record, {
        key: 'k-own',
        fingerprint: 'fp-a',
        tenantId: 'tenant-1',
        actionType: 'pix.send',
        status: 'done',
        ownerToken: record.ownerToken,
        response: answer,
        createdAt: T0,
        expiresAt: T0 + claims.defaultTtlSeconds(),
        lookups: 0,
        nextLookupAt: null,
      });
    });

    it('terminal answers are stored and replayed (headers too); the effect does not run again', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      const stored = jsonResponse(201, { id: 'pay_1' }, [['Location', '/payments/pay_1']]);
      const { effect, calls } = countingEffect(stored);
      await guard.run(claimOf('k-done'), effect);
      c.t += 30;
      const again = await guard.run(claimOf('k-done'), effect);
      assert.deepEqual(again, { outcome: 'done', response: stored, replayed: true, key: 'k-done' });
      assert.equal(calls.length, 1);
    });

    it('a repeat: the claim answers the record it lost to or "not inserted"; a store that claims in one round trip (pg, redis) reads nothing after it', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      const stored = jsonResponse(201, { id: 'pay_1' }, [['Location', '/payments/pay_1']]);
      const { effect, calls } = countingEffect(stored);
      await guard.run(claimOf('k-one-trip'), effect);
      if (typeof store.claim === 'function') {
        // The store's own claim: a repeat answers false or exactly the stored record.
        const record = await store.get('k-one-trip');
        const again = await store.claim(witRecord('k-one-trip', 'ff'.repeat(16), T0 + 30));
        if (again !== false) assert.deepEqual(again, record);
      }
      const counted = { get: 0, insert: 0, claim: 0 };
      const real = {};
      for (const op of Object.keys(counted)) {
        if (typeof store[op] !== 'function') continue;
        real[op] = store[op];
        store[op] = (...args) => {
          counted[op]++;
          return real[op].apply(store, args);
        };
      }
      try {
        c.t += 30;
        const again = await guard.run(claimOf('k-one-trip'), effect);
        assert.deepEqual(again, { outcome: 'done', response: stored, replayed: true, key: 'k-one-trip' });
      } finally {
        Object.assign(store, real);
      }
      assert.equal(calls.length, 1);
      if (store.kind === 'pg' || store.kind === 'redis') {
        assert.deepEqual(counted, { get: 0, insert: 0, claim: 1 }, 'a replay is one claim, no get');
      }
    });

    it('a thrown error with a response is answered: stored and replayed like a success', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      let runs = 0;
      const declined = jsonResponse(402, { error: 'insufficient_funds' });
      const effect = async () => {
        runs++;
        throw Object.assign(new Error('declined'), { response: declined });
      };
      const first = await guard.run(claimOf('k-err'), effect);
      assert.deepEqual([first.outcome, first.finished], ['owned', 'stored']);
      assert.deepEqual(first.response, declined);
      assert.equal(first.error.message, 'declined');
      const again = await guard.run(claimOf('k-err'), effect);
      assert.deepEqual([again.outcome, again.replayed], ['done', true]);
      assert.deepEqual(again.response, declined);
      assert.equal(runs, 1);
      assert.equal((await guard.inspect('k-err')).status, 'done');
    });

    it('a 429 (a release status) is released: the record is deleted, a retry runs the effect, its 201 is stored', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      assert.deepEqual(claims.defaultRules().releaseStatuses, [429, 503]);
      const { effect, calls } = countingEffect((key, n) =>
        n === 1 ? jsonResponse(429, { retry: true }) : n === 2 ? jsonResponse(503, {}) : jsonResponse(201, { n }),
      );
      const busy = await guard.run(claimOf('k-429'), effect);
      assert.deepEqual([busy.outcome, busy.finished, busy.response.status], ['owned', 'released', 429]);
      assert.equal(await guard.inspect('k-429'), null, 'a released claim is deleted');
      const unavailable = await guard.run(claimOf('k-429'), effect);
      assert.deepEqual([unavailable.outcome, unavailable.finished, unavailable.response.status], ['owned', 'released', 503]);
      const ok = await guard.run(claimOf('k-429'), effect);
      assert.deepEqual([ok.outcome, ok.finished, ok.response.status], ['owned', 'stored', 201]);
      const replay = await guard.run(claimOf('k-429'), effect);
      assert.deepEqual([replay.outcome, replay.response.status], ['done', 201]);
      assert.equal(calls.length, 3);
      // The release statuses are the guard's rules: with none, a 429 is terminal.
      const strict = createGuard({ store, now: clock().now, releaseStatuses: [] });
      const stored = await strict.run(claimOf('k-429-strict'), async () => jsonResponse(429, {}));
      assert.equal(stored.finished, 'stored');
      assert.equal((await strict.run(claimOf('k-429-strict'), effect)).outcome, 'done');
    });

    it('a refusal (IntentkeyRefused) is released: its response goes back unstored; without one it is rethrown', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      const answer = jsonResponse(400, { error: 'closed' });
      const r = await guard.run(claimOf('k-refused'), async () => {
        throw refused(answer);
      });
      assert.deepEqual([r.outcome, r.finished], ['owned', 'released']);
      assert.deepEqual(r.response, answer);
      assert.ok(r.error instanceof IntentkeyRefused);
      assert.equal(await guard.inspect('k-refused'), null);
      await assert.rejects(
        guard.run(claimOf('k-refused'), async () => {
          throw new IntentkeyRefused();
        }),
        IntentkeyRefused,
      );
      assert.equal(await guard.inspect('k-refused'), null);
      assert.equal((await guard.run(claimOf('k-refused'), async () => jsonResponse(200, {}))).finished, 'stored');
    });

    it('a throw is ambiguous: left in flight, rethrown, 409 on repeat whatever its age, never purged', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, ttlSeconds: 60 });
      let runs = 0;
      await assert.rejects(
        guard.run(claimOf('k-lost'), async () => {
          runs++;
          throw new Error('connection reset');
        }),
        /connection reset/,
      );
      assert.equal((await guard.inspect('k-lost')).status, 'in_flight');
      c.t += 10 * 365 * 86_400; // ten years later: no TTL releases it
      assert.equal(await guard.purge(), 0);
      const again = await guard.run(claimOf('k-lost'), async () => {
        runs++;
        return jsonResponse(200, {});
      });
      assert.deepEqual(again, { outcome: 'in-flight', ...coreAnswer({ outcome: 'in-flight' }), key: 'k-lost' });
      assert.equal(again.response.status, 409);
      assert.deepEqual(again.response.headers, [['Retry-After', '1']]);
      assert.equal(runs, 1);
      // Something that is not a response is ambiguous too.
      await assert.rejects(guard.run(claimOf('k-odd'), async () => ({ status: 200 })), /contentType/);
      assert.equal((await guard.inspect('k-odd')).status, 'in_flight');
      // So is an error whose `response` is not ours (an HTTP client's, say).
      const foreign = Object.assign(new Error('HTTP 502'), { response: { status: 502, data: '' } });
      await assert.rejects(guard.run(claimOf('k-foreign'), async () => Promise.reject(foreign)), /HTTP 502/);
      assert.equal((await guard.inspect('k-foreign')).status, 'in_flight');
    });

    it('repeat while the original runs: the core’s 409 problem, the effect does not run twice', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      const gate = deferred();
      let runs = 0;
      const slow = async () => {
        runs++;
        await gate.promise;
        return jsonResponse(201, { id: 'pay_slow' });
      };
      const first = guard.run(claimOf('k-flight'), slow);
      await claimed(guard, 'k-flight');
      const second = await guard.run(claimOf('k-flight'), slow);
      assert.deepEqual(second, { outcome: 'in-flight', ...coreAnswer({ outcome: 'in-flight' }), key: 'k-flight' });
      assert.equal(second.response.contentType, 'application/problem+json');
      // A guard configured with an endpoint gives that endpoint's answers (its profile, its Retry-After).
      const stripe = createEndpoint({ secret: SECRET, profile: 'stripe', retryAfterSeconds: 7 });
      const third = await createGuard({ store, endpoint: stripe, now: clock().now }).run(claimOf('k-flight'), slow);
      assert.deepEqual(third, { outcome: 'in-flight', ...coreAnswer({ outcome: 'in-flight' }, stripe), key: 'k-flight' });
      assert.deepEqual([third.response.status, third.response.contentType], [409, 'application/json']);
      assert.deepEqual(third.response.headers, [['Retry-After', '7']]);
      assert.equal(JSON.parse(text(third.response.body)).error.code, 'idempotency_key_in_use');
      gate.resolve();
      assert.equal((await first).outcome, 'owned');
      assert.equal((await guard.run(claimOf('k-flight'), slow)).outcome, 'done');
      assert.equal(runs, 1);
    });

    it('same key, other payload: the core’s 422 problem, in flight or done', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      const gate = deferred();
      const first = guard.run(claimOf('k-conf', 'fp-a'), async () => {
        await gate.promise;
        return jsonResponse(200, {});
      });
      await claimed(guard, 'k-conf');
      const { effect, calls } = countingEffect();
      const whileRunning = await guard.run(claimOf('k-conf', 'fp-b'), effect);
      assert.deepEqual(whileRunning, { outcome: 'payload-conflict', ...coreAnswer({ outcome: 'payload-conflict' }), key: 'k-conf' });
      assert.equal(whileRunning.response.status, 422);
      gate.resolve();
      await first;
      assert.equal((await guard.run(claimOf('k-conf', 'fp-b'), effect)).response.status, 422);
      assert.equal(calls.length, 0);
    });

    it('intents: key and fingerprint come from the keyer; a reformatted retry is a replay', async (store) => {
      const keyer = createKeyer({ secret: SECRET });
      const guard = createGuard({ store, keyer, now: clock().now });
      const { effect, calls } = countingEffect();
      const first = await guard.run({ intent: PIX }, effect);
      assert.equal(first.key, keyer.derive(PIX));
      assert.deepEqual(calls, [keyer.derive(PIX)]);
      assert.equal((await guard.inspect(first.key)).fingerprint, keyer.fingerprint(PIX.tenantId, PIX.actionType, PIX.payload));
      const retry = { ...PIX, payload: { amount: '10.50', currency: ' BRL ', creditor_key: '12345678909', request_id: 'r-2' } };
      const again = await guard.run({ intent: retry }, effect);
      assert.deepEqual([again.outcome, again.key], ['done', first.key]);
      const byPayload = await guard.run(
        { key: first.key, tenantId: PIX.tenantId, actionType: PIX.actionType, payload: retry.payload },
        effect,
      );
      assert.equal(byPayload.outcome, 'done');
      const changed = await guard.run(
        { key: first.key, tenantId: PIX.tenantId, actionType: PIX.actionType, payload: { ...retry.payload, amount: '11.00' } },
        effect,
      );
      assert.equal(changed.outcome, 'payload-conflict');
      assert.equal(calls.length, 1);
    });

    it('purge deletes only the done records that have expired', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, ttlSeconds: 60 });
      const ok = async () => jsonResponse(200, {});
      await guard.run(claimOf('p-expired'), ok); // expires T0 + 60
      c.t = T0 + 30;
      await guard.run(claimOf('p-at-now'), ok); // expires T0 + 90: exactly "now" below
      c.t = T0 + 40;
      await guard.run(claimOf('p-fresh'), ok); // expires T0 + 100
      await assert.rejects(guard.run(claimOf('p-inflight'), failing('lost')));
      c.t = T0 + 90;
      const before = [];
      for (const status of ['in_flight', 'done', 'needs_reconciliation']) before.push(...(await guard.list(status)));
      const purgeable = before.filter((r) => claims.purgeable(r, c.t)).map((r) => r.key).sort();
      assert.deepEqual(purgeable, ['p-at-now', 'p-expired']);
      assert.equal(await guard.purge(), 2);
      for (const r of before) assert.equal((await guard.inspect(r.key)) === null, purgeable.includes(r.key), r.key);
      assert.equal(await guard.purge(), 0);
      // A purged key is free again: a new claim owns it.
      assert.equal((await guard.run(claimOf('p-expired'), ok)).outcome, 'owned');
    });

    it('not due: a fresh claim is left alone (nothing asked, nothing run), then recovered once stale', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 120 });
      await assert.rejects(guard.run(claimOf('r-fresh'), failing('timeout')));
      let asked = 0;
      let ran = 0;
      const request = {
        key: 'r-fresh',
        lookup: async () => {
          asked++;
          return 'absent';
        },
        readYourWrites: true,
        effect: async () => {
          ran++;
          return jsonResponse(201, {});
        },
      };
      c.t += 119;
      assert.deepEqual(await guard.recover(request), { outcome: 'not-due', key: 'r-fresh', dueAt: T0 + 120 });
      assert.deepEqual([asked, ran], [0, 0]);
      assert.deepEqual(await guard.due(), []);
      c.t += 1;
      assert.deepEqual(await guard.due(), ['r-fresh']);
      const r = await guard.recover(request);
      assert.deepEqual([r.outcome, r.action, r.finished], ['applied', 're-execute', 'stored']);
      assert.deepEqual([asked, ran], [1, 1]);
      assert.deepEqual(await guard.recover(request), { outcome: 'not-in-flight', key: 'r-fresh', status: 'done' });
      assert.deepEqual(await guard.recover({ ...request, key: 'r-none' }), { outcome: 'missing', key: 'r-none' });
    });

    it('superseded: a recoverer takes a stale claim over; the first owner’s late completion is refused', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 60 });
      const gate = deferred();
      const ownerA = guard.run(claimOf('r-super'), async () => {
        await gate.promise;
        return jsonResponse(201, { by: 'A' });
      });
      await claimed(guard, 'r-super');
      const tokenA = (await guard.inspect('r-super')).ownerToken;
      c.t += 61;
      const recovered = await guard.recover({
        key: 'r-super',
        lookup: async () => 'absent',
        readYourWrites: true,
        effect: async () => jsonResponse(201, { by: 'recoverer' }),
      });
      assert.deepEqual([recovered.outcome, recovered.action, recovered.finished], ['applied', 're-execute', 'stored']);
      const taken = await guard.inspect('r-super');
      assert.notEqual(taken.ownerToken, tokenA);
      assert.equal(taken.createdAt, c.t, 'the take-over restarts the clock');
      gate.resolve();
      const late = await ownerA;
      assert.deepEqual([late.outcome, late.finished], ['owned', 'superseded']);
      assert.deepEqual(JSON.parse(text(late.response.body)), { by: 'A' });
      const record = await guard.inspect('r-super');
      assert.deepEqual(JSON.parse(text(record.response.body)), { by: 'recoverer' });
      const replay = await guard.run(claimOf('r-super'), failing('must not run'));
      assert.deepEqual(JSON.parse(text(replay.response.body)), { by: 'recoverer' });
    });

    it('recovery, found: the destination’s outcome is recorded as done and replayed; the effect never reruns', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 120 });
      await assert.rejects(guard.run(claimOf('r-found'), failing('timeout')));
      const lookups = [];
      const found = jsonResponse(201, { id: 'pay_found' }, [['Location', '/p/found']]);
      c.t += 120;
      const result = await guard.recover({
        key: 'r-found',
        lookup: async (key) => {
          lookups.push(key);
          return { found };
        },
      });
      assert.deepEqual(result, { outcome: 'applied', key: 'r-found', action: 'record-done', response: found });
      assert.deepEqual(lookups, ['r-found']);
      const record = await guard.inspect('r-found');
      assert.deepEqual([record.status, record.expiresAt], ['done', c.t + claims.defaultTtlSeconds()]);
      assert.deepEqual(record.response, found);
      const replay = await guard.run(claimOf('r-found'), failing('must not run'));
      assert.deepEqual([replay.outcome, replay.response], ['done', found]);
    });

    it('recovery, absent from a read-your-writes destination: two recoverers at once, one re-execution, same key', async (store) => {
      const c = clock();
      // (A stale-after of 0 would make the winner's fresh take-over due at once, so
      // the other could take it over again: the clock stays put, the record ages 61 s.)
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 60 });
      await assert.rejects(guard.run(claimOf('r-absent'), failing('crashed')));
      c.t += 61;
      const { effect, calls } = countingEffect(jsonResponse(201, { id: 'pay_again' }));
      const request = { key: 'r-absent', lookup: async () => 'absent', readYourWrites: true, effect };
      const results = await Promise.all([guard.recover(request), guard.recover(request)]);
      assert.deepEqual(calls, ['r-absent']);
      const winners = results.filter((r) => r.outcome === 'applied');
      assert.equal(winners.length, 1, JSON.stringify(results));
      assert.deepEqual(winners[0].response, jsonResponse(201, { id: 'pay_again' }));
      // The other lost the fenced write, or read the record after the take-over
      // (not due: its clock restarted) or after the re-execution (done).
      const loser = results.find((r) => r !== winners[0]);
      assert.ok(
        (loser.outcome === 'lost' && loser.action === 're-execute') || ['not-due', 'not-in-flight'].includes(loser.outcome),
        JSON.stringify(loser),
      );
      const record = await guard.inspect('r-absent');
      assert.deepEqual([record.status, record.response], ['done', jsonResponse(201, { id: 'pay_again' })]);
    });

    it('recovery, absent without read-your-writes: treated as unknown, no re-execution', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 0 });
      await assert.rejects(guard.run(claimOf('r-lagging'), failing('crashed')));
      const record = await guard.inspect('r-lagging');
      const result = await guard.recover({ key: 'r-lagging', lookup: async () => 'absent' });
      const expected = claims.decideRecovery(record, 'unknown', false, c.t);
      assert.equal(expected.action, 'check-later');
      assert.deepEqual(result, { outcome: 'applied', key: 'r-lagging', ...expected });
      assert.equal((await guard.inspect('r-lagging')).status, 'in_flight');
    });

    it('recovery, unknown: backs off 1, 2, 4 minutes, then needs_reconciliation, and NEVER runs the effect', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 300 });
      let effects = 0;
      const effect = async () => {
        effects++;
        return jsonResponse(201, {});
      };
      await assert.rejects(
        guard.run(claimOf('r-unknown'), async () => {
          effects++;
          throw new Error('504 from the bank');
        }),
      );
      let asked = 0;
      const answers = ['unknown', 'throw', 'unknown', 'unknown'];
      const lookup = async () => {
        const a = answers[asked++];
        if (a === 'throw') throw new Error('lookup timed out'); // could not tell: unknown
        return a;
      };
      // Read-your-writes and an effect are given: even so, unknown never re-executes.
      const recover = () => guard.recover({ key: 'r-unknown', lookup, readYourWrites: true, effect });
      assert.equal((await recover()).outcome, 'not-due');
      c.t += 300;
      const waits = [];
      for (;;) {
        const before = await guard.inspect('r-unknown');
        const result = await recover();
        assert.equal(result.outcome, 'applied', JSON.stringify(result));
        if (result.action === 'reconcile') {
          assert.equal(result.lookups, before.lookups + 1);
          break;
        }
        assert.equal(result.action, 'check-later', JSON.stringify(result));
        waits.push(result.nextLookupAt - c.t);
        c.t = result.nextLookupAt - 1;
        const askedBefore = asked;
        assert.deepEqual(await recover(), { outcome: 'not-due', key: 'r-unknown', dueAt: result.nextLookupAt });
        assert.equal(asked, askedBefore);
        c.t = result.nextLookupAt;
      }
      assert.deepEqual(waits, [60, 120, 240]);
      assert.equal(asked, 4);
      const record = await guard.inspect('r-unknown');
      assert.deepEqual([record.status, record.lookups], ['needs_reconciliation', 4]);
      assert.deepEqual((await guard.list('needs_reconciliation')).map((r) => r.key), ['r-unknown']);
      c.t += 86_400;
      assert.deepEqual(await recover(), { outcome: 'not-in-flight', key: 'r-unknown', status: 'needs_reconciliation' });
      const again = await guard.run(claimOf('r-unknown'), effect);
      assert.deepEqual([again.outcome, again.response.status], ['in-flight', 409]);
      assert.equal(await guard.purge(), 0);
      assert.equal(effects, 1, 'the effect ran only in the original attempt');
      assert.deepEqual(await guard.recoverAll({ lookup, readYourWrites: true, effect }), []);
    });

    it('recoverAll recovers every due in-flight record, oldest first', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 60 });
      await assert.rejects(guard.run(claimOf('a-2'), failing('lost')));
      await assert.rejects(guard.run(claimOf('a-1'), failing('lost')));
      c.t += 30;
      await assert.rejects(guard.run(claimOf('a-3'), failing('lost')));
      await guard.run(claimOf('a-done'), async () => jsonResponse(200, {}));
      c.t += 30; // a-1 and a-2 are stale, a-3 not yet
      assert.deepEqual(await guard.due(), ['a-1', 'a-2']);
      const results = await guard.recoverAll({ lookup: async (key) => ({ found: jsonResponse(200, { key }) }) });
      assert.deepEqual(results.map((r) => [r.key, r.outcome, r.action]), [
        ['a-1', 'applied', 'record-done'],
        ['a-2', 'applied', 'record-done'],
      ]);
      assert.deepEqual((await guard.list('in_flight')).map((r) => r.key), ['a-3']);
    });

    it('fast completion: stored like any other', async (store) => {
      const guard = createGuard({ store, now: clock().now, fastCompletion: true });
      assert.equal(guard.rules.fastCompletion, true);
      const r = await guard.run(claimOf('k-fast'), async () => jsonResponse(201, { fast: true }));
      assert.equal(r.finished, 'stored');
      assert.equal((await guard.run(claimOf('k-fast'), failing('must not run'))).outcome, 'done');
    });

    it('the seven store operations: insert once, every later write fenced on the owner token', async (store) => {
      const guard = createGuard({ store, now: clock().now });
      const A = 'a'.repeat(32);
      const B = 'b'.repeat(32);
      const ok = { status: 200, contentType: 'application/json', headers: [['Location', '/x/1']], body: bytes('{"n":1}') };
      assert.equal(await store.insert(witRecord('c-1', A, T0)), true);
      assert.equal(await store.insert(witRecord('c-1', B, T0, { fingerprint: 'other' })), false);
      assert.deepEqual(await store.get('c-1'), witRecord('c-1', A, T0));
      assert.equal(await store.get('nope'), undefined);
      const completion = (token, response = ok) => ({ key: 'c-1', ownerToken: token, response, expiresAt: BigInt(T0 + 60), fast: false });
      assert.equal(await store.complete(completion(B)), false, 'another token does not complete');
      assert.equal(await store.complete(completion(A)), true);
      assert.equal(await store.complete(completion(A, { ...ok, status: 500 })), false, 'done is not completed twice');
      assert.deepEqual(await store.get('c-1'), witRecord('c-1', A, T0, { status: 'done', response: ok, expiresAt: BigInt(T0 + 60) }));
      assert.equal(await store.release({ key: 'c-1', ownerToken: A }), false, 'done is not released');
      // Recovery writes: token and look-up count must match.
      await store.insert(witRecord('c-2', A, T0));
      const later = witRecord('c-2', A, T0, { lookups: 1, nextLookupAt: BigInt(T0 + 60) });
      assert.equal(await store.replace({ expectedToken: B, expectedLookups: 0, record: later }), false);
      assert.equal(await store.replace({ expectedToken: A, expectedLookups: 1, record: later }), false);
      assert.equal(await store.replace({ expectedToken: A, expectedLookups: 0, record: later }), true);
      assert.equal(await store.replace({ expectedToken: A, expectedLookups: 0, record: later }), false, 'a stale read loses');
      assert.deepEqual(await store.get('c-2'), later);
      const taken = witRecord('c-2', B, T0 + 100);
      assert.equal(await store.replace({ expectedToken: A, expectedLookups: 1, record: taken }), true);
      assert.deepEqual(await store.get('c-2'), taken);
      assert.equal(await store.release({ key: 'c-2', ownerToken: A }), false, 'the old owner cannot release');
      assert.equal(await store.release({ key: 'c-2', ownerToken: B }), true);
      assert.equal(await store.get('c-2'), undefined);
      // list: by status, oldest first (created_at, then key), at most limit.
      for (const [key, at] of [['l-b', T0 + 1], ['l-a', T0 + 1], ['l-c', T0]]) await store.insert(witRecord(key, A, at));
      assert.deepEqual((await store.list('in-flight', 10)).map((r) => r.key), ['l-c', 'l-a', 'l-b']);
      assert.deepEqual((await store.list('in-flight', 2)).map((r) => r.key), ['l-c', 'l-a']);
      assert.deepEqual((await store.list('done', 10)).map((r) => r.key), ['c-1']);
      // purge: done and expired only.
      assert.equal(Number(await store.purge(BigInt(T0 + 59))), 0);
      assert.equal(Number(await store.purge(BigInt(T0 + 60))), 1);
      assert.equal((await store.list('in-flight', 10)).length, 3);
      // Text round-trips exactly, headers in order; bodies byte for byte, binary or empty.
      const odd = witRecord('c-3 ção 🙂', A, T0, { tenantId: 'tenant-ü' });
      await store.insert(odd);
      const oddResponse = {
        status: 418,
        contentType: 'text/plain; charset=utf-8',
        headers: [['Location', '/ção'], ['X-Two', '2'], ['X-Two', '3']],
        body: bytes('\ufeffchá\n\u2028\\?'),
      };
      assert.equal(await store.complete({ ...completion(A, oddResponse), key: odd.key }), true);
      assert.deepEqual((await guard.inspect(odd.key)).response, oddResponse);
      const binary = new Uint8Array(256).map((_, i) => 255 - i); // not UTF-8: 0xff, 0xfe, …, 0x00
      for (const [key, body] of [['c-bin', binary], ['c-empty', new Uint8Array(0)]]) {
        await store.insert(witRecord(key, A, T0));
        const response = { status: 200, contentType: 'application/pdf', headers: [], body };
        assert.equal(await store.complete({ ...completion(A, response), key }), true);
        const got = (await store.get(key)).response;
        assert.ok(got.body instanceof Uint8Array && Object.getPrototypeOf(got.body) === Uint8Array.prototype);
        assert.deepEqual(got, response);
      }
    });
  });
}
