// The guard's behaviour on one store: every claim outcome, replay of errors,
// purge, the TTL, and recovery. Run by guard.test.js (memory, better-sqlite3)
// and pg.test.js (PostgreSQL), so every store passes the same checks.
//
// Expected answers are asked of the core (claims.answerFor, claims.complete, …),
// never written out here: the tests check that the guard and the stores carry
// the core's decisions through the I/O unchanged.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { claims, createGuard, createKeyer, jsonResponse } from '../../src/index.js';

const T0 = 1_700_000_000;
const SECRET = '5c'.repeat(32);
const PIX = {
  tenantId: 'tenant-1',
  actionType: 'pix.send',
  payload: '{"creditor_key":"123.456.789-09","amount":10.5,"currency":"brl","request_id":"r-1"}',
  intentEpoch: T0,
};

/** A clock the test moves. */
function clock(start = T0) {
  const c = { t: start, now: () => c.t };
  return c;
}

/** A deferred promise. */
function deferred() {
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
    return typeof response === 'function' ? response(key) : response;
  };
  return { effect, calls };
}

const claimOf = (key, fingerprint = 'fp-a') => ({ key, fingerprint, tenantId: 'tenant-1', actionType: 'pix.send' });

/** The answer the core gives for a decision, as run() returns it. */
function coreAnswer(decision) {
  const a = claims.answerFor(decision);
  return { response: { status: a.status, contentType: a.contentType, body: a.body }, replayed: a.replayed };
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
    it('first claim owns: the effect runs once, with the key, and the core’s completed record is stored', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      const { effect, calls } = countingEffect();
      const result = await guard.run(claimOf('k-own'), effect);
      assert.deepEqual(result, {
        outcome: 'owned',
        response: jsonResponse(201, { id: 'pay_1' }),
        replayed: false,
        key: 'k-own',
        recorded: true,
      });
      assert.deepEqual(calls, ['k-own']);
      const expected = claims.complete(
        claims.newRecord('k-own', 'fp-a', 'tenant-1', 'pix.send', T0),
        jsonResponse(201, { id: 'pay_1' }),
        T0,
        claims.defaultTtlSeconds(),
      );
      assert.deepEqual(await store.get('k-own'), expected);
      assert.equal(expected.status, 'done');
      assert.equal(expected.expiresAt, T0 + claims.defaultTtlSeconds());
    });

    it('repeat after completion: the stored response is replayed, the effect does not run again', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      const { effect, calls } = countingEffect();
      await guard.run(claimOf('k-done'), effect);
      c.t += 30;
      const again = await guard.run(claimOf('k-done'), effect);
      const stored = jsonResponse(201, { id: 'pay_1' });
      assert.deepEqual(again, {
        outcome: 'done',
        ...coreAnswer({ outcome: 'done', response: stored }),
        key: 'k-done',
      });
      assert.equal(again.replayed, true);
      assert.deepEqual(again.response, stored);
      assert.equal(calls.length, 1);
    });

    it('a thrown error with a response is stored and replayed like a success', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now });
      let runs = 0;
      const declined = jsonResponse(402, { error: 'insufficient_funds' });
      const effect = async () => {
        runs++;
        throw Object.assign(new Error('declined'), { response: declined });
      };
      const first = await guard.run(claimOf('k-err'), effect);
      assert.equal(first.outcome, 'owned');
      assert.deepEqual(first.response, declined);
      assert.equal(first.error.message, 'declined');
      const again = await guard.run(claimOf('k-err'), effect);
      assert.equal(again.outcome, 'done');
      assert.equal(again.replayed, true);
      assert.deepEqual(again.response, declined);
      assert.equal(runs, 1);
      assert.equal((await store.get('k-err')).status, 'done');
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
      // Wait until the first attempt holds the claim.
      while ((await store.get('k-flight')) === null) await new Promise((r) => setTimeout(r, 1));
      const second = await guard.run(claimOf('k-flight'), slow);
      assert.deepEqual(second, { outcome: 'in-flight', ...coreAnswer({ outcome: 'in-flight' }), key: 'k-flight' });
      assert.equal(second.response.status, 409);
      assert.equal(second.response.contentType, 'application/problem+json');
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
      while ((await store.get('k-conf')) === null) await new Promise((r) => setTimeout(r, 1));
      const { effect, calls } = countingEffect();
      const whileRunning = await guard.run(claimOf('k-conf', 'fp-b'), effect);
      assert.deepEqual(whileRunning, {
        outcome: 'payload-conflict',
        ...coreAnswer({ outcome: 'payload-conflict' }),
        key: 'k-conf',
      });
      assert.equal(whileRunning.response.status, 422);
      gate.resolve();
      await first;
      const afterDone = await guard.run(claimOf('k-conf', 'fp-b'), effect);
      assert.equal(afterDone.outcome, 'payload-conflict');
      assert.equal(afterDone.response.status, 422);
      assert.equal(calls.length, 0);
    });

    it('intents: key and fingerprint come from the keyer; a reformatted retry is a replay', async (store) => {
      const keyer = createKeyer({ secret: SECRET });
      const guard = createGuard({ store, keyer, now: clock().now });
      const { effect, calls } = countingEffect();
      const first = await guard.run({ intent: PIX }, effect);
      assert.equal(first.key, keyer.derive(PIX));
      assert.deepEqual(calls, [keyer.derive(PIX)]);
      const stored = await store.get(first.key);
      assert.equal(stored.fingerprint, keyer.fingerprint(PIX.tenantId, PIX.actionType, PIX.payload));
      const retry = {
        ...PIX,
        payload: { amount: '10.50', currency: ' BRL ', creditor_key: '12345678909', request_id: 'r-2' },
      };
      const again = await guard.run({ intent: retry }, effect);
      assert.equal(again.outcome, 'done');
      assert.equal(again.key, first.key);
      // The key with a payload: the fingerprint is taken through the keyer.
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

    it('an effect that throws without a response leaves the record in_flight, whatever its age', async (store) => {
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
      assert.equal((await store.get('k-lost')).status, 'in_flight');
      c.t += 10 * 365 * 86_400; // ten years later: no TTL releases it
      assert.equal(await guard.purge(), 0);
      const again = await guard.run(claimOf('k-lost'), async () => {
        runs++;
        return jsonResponse(200, {});
      });
      assert.equal(again.outcome, 'in-flight');
      assert.equal(again.response.status, 409);
      assert.equal(runs, 1);
    });

    it('purge deletes only the done records the core says have expired', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, ttlSeconds: 60 });
      const ok = async () => jsonResponse(200, {});
      await guard.run(claimOf('p-expired'), ok); // expires T0 + 60
      c.t = T0 + 30;
      await guard.run(claimOf('p-at-now'), ok); // expires T0 + 90: exactly "now" below
      c.t = T0 + 40;
      await guard.run(claimOf('p-fresh'), ok); // expires T0 + 100
      await assert.rejects(guard.run(claimOf('p-inflight'), async () => Promise.reject(new Error('lost'))));
      const stuck = { ...claims.newRecord('p-reconcile', 'fp-a', 'tenant-1', 'pix.send', T0), status: 'needs_reconciliation' };
      assert.equal(await store.insertIfAbsent(stuck), true);

      c.t = T0 + 90;
      const before = [];
      for (const status of ['in_flight', 'done', 'needs_reconciliation']) before.push(...(await store.list(status)));
      const purgeable = before.filter((r) => claims.purgeable(r, c.t)).map((r) => r.key).sort();
      assert.deepEqual(purgeable, ['p-at-now', 'p-expired']);
      assert.equal(await guard.purge(), 2);
      for (const r of before) assert.equal((await store.get(r.key)) === null, purgeable.includes(r.key), r.key);
      assert.equal(await guard.purge(), 0);
      // A purged key is free again: a new claim owns it.
      assert.equal((await guard.run(claimOf('p-expired'), ok)).outcome, 'owned');
    });

    it('recovery, found: the destination’s outcome is recorded as done and replayed; the effect never reruns', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 120 });
      let runs = 0;
      const effect = async () => {
        runs++;
        throw new Error('timeout');
      };
      await assert.rejects(guard.run(claimOf('r-found'), effect));
      const lookups = [];
      const found = jsonResponse(201, { id: 'pay_found' });
      const lookup = async (key) => {
        lookups.push(key);
        return { found };
      };
      c.t += 60;
      assert.equal((await guard.recover({ key: 'r-found', lookup })).action, 'not-due');
      assert.equal(lookups.length, 0);
      c.t += 60;
      const result = await guard.recover({ key: 'r-found', lookup });
      assert.equal(result.action, 'record-done');
      assert.equal(result.applied, true);
      assert.deepEqual(lookups, ['r-found']);
      const record = await store.get('r-found');
      assert.equal(record.status, 'done');
      assert.deepEqual(record.response, found);
      const replay = await guard.run(claimOf('r-found'), effect);
      assert.equal(replay.outcome, 'done');
      assert.deepEqual(replay.response, found);
      assert.equal(runs, 1);
    });

    it('recovery, absent from a read-your-writes destination: re-executed once, with the same key', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 0 });
      await assert.rejects(guard.run(claimOf('r-absent'), async () => Promise.reject(new Error('crashed'))));
      c.t += 5;
      const { effect, calls } = countingEffect(jsonResponse(201, { id: 'pay_again' }));
      // Two recoverers at once: one wins the re-execution.
      const results = await Promise.all([
        guard.recover({ key: 'r-absent', lookup: async () => 'absent', readYourWrites: true, effect }),
        guard.recover({ key: 'r-absent', lookup: async () => 'absent', readYourWrites: true, effect }),
      ]);
      assert.deepEqual(calls, ['r-absent']);
      const winners = results.filter((r) => r.action === 're-execute' && r.applied === true);
      assert.equal(winners.length, 1, JSON.stringify(results));
      assert.deepEqual(winners[0].response, jsonResponse(201, { id: 'pay_again' }));
      const record = await store.get('r-absent');
      assert.equal(record.status, 'done');
      assert.deepEqual(record.response, jsonResponse(201, { id: 'pay_again' }));
      const replay = await guard.run(claimOf('r-absent'), effect);
      assert.equal(replay.outcome, 'done');
      assert.equal(calls.length, 1);
    });

    it('recovery, absent from a destination without read-your-writes: treated as unknown, no re-execution', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 0 });
      await assert.rejects(guard.run(claimOf('r-lagging'), async () => Promise.reject(new Error('crashed'))));
      const record = await store.get('r-lagging');
      const result = await guard.recover({ key: 'r-lagging', lookup: async () => 'absent' });
      const expected = claims.decideRecovery(record, 'unknown', false, c.t);
      assert.equal(expected.action, 'check-later');
      assert.deepEqual(result, { action: 'check-later', key: 'r-lagging', applied: true, lookups: expected.lookups, nextLookupAt: expected.nextLookupAt });
      assert.equal((await store.get('r-lagging')).status, 'in_flight');
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
      assert.equal(effects, 1);
      let asked = 0;
      const answers = ['unknown', 'throw', 'unknown', 'unknown'];
      const lookup = async () => {
        const a = answers[asked++];
        if (a === 'throw') throw new Error('lookup timed out'); // could not tell: unknown
        return a;
      };
      // Read-your-writes and an effect are given: even so, unknown never re-executes.
      const recover = () => guard.recover({ key: 'r-unknown', lookup, readYourWrites: true, effect });

      assert.equal((await recover()).action, 'not-due'); // not stale yet
      c.t += 300;
      const waits = [];
      for (;;) {
        const before = await store.get('r-unknown');
        const result = await recover();
        if (result.action === 'reconcile') {
          assert.equal(result.applied, true);
          assert.equal(result.lookups, before.lookups + 1);
          break;
        }
        assert.equal(result.action, 'check-later', JSON.stringify(result));
        assert.equal(result.applied, true);
        waits.push(result.nextLookupAt - c.t);
        // Early: not due, the destination is not asked.
        c.t = result.nextLookupAt - 1;
        const askedBefore = asked;
        assert.equal((await recover()).action, 'not-due');
        assert.equal(asked, askedBefore);
        c.t = result.nextLookupAt;
      }
      // The schedule is the core's: replay it through decide-recovery.
      let probe = claims.newRecord('p', 'fp', 't', 'a', 0);
      const coreWaits = [];
      for (;;) {
        const d = claims.decideRecovery(probe, 'unknown', false, 0);
        if (d.action !== 'check-later') break;
        coreWaits.push(d.nextLookupAt);
        probe = { ...probe, lookups: d.lookups };
      }
      assert.deepEqual(waits, coreWaits);
      assert.deepEqual(waits, [60, 120, 240]);
      assert.equal(asked, 4);

      const record = await store.get('r-unknown');
      assert.equal(record.status, 'needs_reconciliation');
      assert.equal(record.lookups, 4);
      c.t += 86_400;
      assert.equal((await recover()).action, 'not-due');
      const again = await guard.run(claimOf('r-unknown'), effect);
      assert.equal(again.outcome, 'in-flight');
      assert.equal(again.response.status, 409);
      assert.equal(await guard.purge(), 0);
      assert.equal(effects, 1, 'the effect ran only in the original attempt');
      assert.deepEqual(await guard.recoverAll({ lookup, readYourWrites: true, effect }), []);
    });

    it('recoverAll asks about every due in_flight record', async (store) => {
      const c = clock();
      const guard = createGuard({ store, now: c.now, staleAfterSeconds: 60 });
      const lost = async () => Promise.reject(new Error('lost'));
      await assert.rejects(guard.run(claimOf('a-1'), lost));
      await assert.rejects(guard.run(claimOf('a-2'), lost));
      c.t += 30;
      await assert.rejects(guard.run(claimOf('a-3'), lost));
      await guard.run(claimOf('a-done'), async () => jsonResponse(200, {}));
      c.t += 30; // a-1 and a-2 are stale, a-3 not yet
      const results = await guard.recoverAll({ lookup: async (key) => ({ found: jsonResponse(200, { key }) }) });
      assert.deepEqual(results.map((r) => [r.key, r.action]).sort(), [
        ['a-1', 'record-done'],
        ['a-2', 'record-done'],
      ]);
      assert.deepEqual((await store.list('in_flight')).map((r) => r.key), ['a-3']);
    });

    it('store writes are conditional on in_flight', async (store) => {
      const record = claims.newRecord('c-1', 'fp', 'tenant-1', 'pix.send', T0);
      assert.equal(await store.insertIfAbsent(record), true);
      assert.equal(await store.insertIfAbsent({ ...record, fingerprint: 'other' }), false);
      assert.equal((await store.get('c-1')).fingerprint, 'fp');
      assert.equal(await store.get('nope'), null);
      const done = claims.complete(record, jsonResponse(200, { n: 1 }), T0 + 1, 60);
      assert.equal(await store.complete('c-1', done), true);
      const other = claims.complete(record, jsonResponse(500, { n: 2 }), T0 + 2, 60);
      assert.equal(await store.complete('c-1', other), false);
      assert.deepEqual(await store.get('c-1'), done);
      assert.equal(await store.applyRecovery('c-1', record, { ...record, lookups: 1, nextLookupAt: T0 + 60 }), false);
      // A recovery write that read a stale record loses.
      const r2 = claims.newRecord('c-2', 'fp', 'tenant-1', 'pix.send', T0);
      await store.insertIfAbsent(r2);
      const later = { ...r2, lookups: 1, nextLookupAt: T0 + 60 };
      assert.equal(await store.applyRecovery('c-2', r2, later), true);
      assert.equal(await store.applyRecovery('c-2', r2, { ...r2, lookups: 1, nextLookupAt: T0 + 61 }), false);
      assert.deepEqual(await store.get('c-2'), later);
      assert.deepEqual((await store.list('in_flight')).map((r) => r.key), ['c-2']);
      assert.deepEqual((await store.list('done')).map((r) => r.key), ['c-1']);
      // Text round-trips exactly.
      const odd = claims.newRecord('c-3 ção 🙂', 'fp', 'tenant-ü', 'pix.send', T0);
      await store.insertIfAbsent(odd);
      const oddDone = claims.complete(odd, { status: 418, contentType: 'text/plain; charset=utf-8', body: 'chá\n\u2028\\?' }, T0, 60);
      assert.equal(await store.complete(odd.key, oddDone), true);
      assert.deepEqual(await store.get(odd.key), oddDone);
    });
  });
}
