// The journal: steps recorded once per run and replayed; concurrent attempts of
// one step never both run it; failures follow the outcome classes; outputs are
// bounded; tool calls are keyed by the run and the validated arguments (never
// the model's text) and settled by the destination when left in flight. On the
// memory store and on PostgreSQL (skipped outside CI when the server is absent).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import pg from 'pg';
import { IntentkeyError, createJournal, createKeyer, memoryStore, pgStore } from '../src/index.js';
import { freshSchema, pgAvailability } from './support/pg.js';
import { clock, deferred } from './support/store-suite.js';
import { TOOL_POLICY } from '../examples/agent/agent.mjs';

const { skip: pgSkip } = await pgAvailability('journal.test.js');

const T0 = 1_700_000_000;
const SECRET = '4b'.repeat(32);
const RUN = Object.freeze({ tenantId: 'acme', intentId: 'run-42', intentEpoch: T0 });
// The agent example's policy: the tools allowed, every argument classified, the model's text ignored.
const keyer = createKeyer({ secret: SECRET, policy: TOOL_POLICY });

const rejectsWith = (code) => (e) => {
  assert.ok(e instanceof IntentkeyError, `an IntentkeyError, got ${e}`);
  assert.equal(e.code, code, e.message);
  return true;
};

/** A payment destination that counts effects per key and answers look-ups from them. */
function destination() {
  const paid = new Map();
  return {
    paid,
    pay: async (key, args) => {
      paid.set(key, (paid.get(key) ?? 0) + 1);
      return { payment: `pay_${key.slice(0, 8)}`, amount: args.amount };
    },
    lookup: async (key) => (paid.has(key) ? { found: { payment: `pay_${key.slice(0, 8)}`, recovered: true } } : 'absent'),
  };
}

test('journal keys are the HMAC of the documented material, computed here with node:crypto', () => {
  const hmac = (material) => createHmac('sha256', Buffer.from(SECRET, 'hex')).update(material).digest('hex');
  const step = keyer.stepAttempt(RUN, 'plan', { b: 1, a: [true, null] });
  assert.equal(step.key, hmac('["intentkey/step/v1","acme","run-42","plan"]'));
  assert.equal(step.fingerprint, hmac('["intentkey/step-input/v1","acme","run-42","plan",{"a":[true,null],"b":1}]'));
  assert.equal(step.actionType, 'step:plan');
  const call = keyer.toolCallAttempt(RUN, 'pix.send', { amount: '150', currency: 'brl', pix_key: 'Ana@Example.com', remittance: 'Rent' });
  assert.equal(
    call.key,
    hmac('["intentkey/tool-call/v1","acme","pix.send","run-42",{"amount":"150.00","currency":"BRL","pix_key":"ana@example.com"}]'),
  );
  assert.equal(call.fingerprint, keyer.fingerprint('acme', 'pix.send', { amount: '150', currency: 'brl', pix_key: 'Ana@Example.com' }));
});

function journalSuite(name, makeStore) {
  describe(`journal on ${name}`, () => {
    test('a step runs once per run and name; every later attempt replays its output', async () => {
      await makeStore(async (store) => {
        const events = [];
        const journal = createJournal({ store, keyer, observe: (e) => events.push(e.outcome) });
        let calls = 0;
        const sample = async () => ({ text: `sample ${++calls}`, at: calls });
        const first = await journal.step(RUN, 'plan', sample, { input: { prompt: 'pay rent' } });
        const again = await journal.step(RUN, 'plan', sample, { input: { prompt: 'pay rent' } });
        assert.deepEqual(first, { text: 'sample 1', at: 1 });
        assert.deepEqual(again, first);
        assert.equal(calls, 1);
        // Another run, another step name: their own outputs.
        assert.deepEqual(await journal.step({ ...RUN, intentId: 'run-43' }, 'plan', sample, { input: { prompt: 'pay rent' } }), {
          text: 'sample 2',
          at: 2,
        });
        assert.deepEqual(await journal.step(RUN, 'answer', sample), { text: 'sample 3', at: 3 });
        assert.deepEqual(events, ['ran', 'replayed', 'ran', 'ran']);
        // The same name asked something else: refused, never the wrong output.
        await assert.rejects(journal.step(RUN, 'plan', sample, { input: { prompt: 'pay twice' } }), rejectsWith('step-input-changed'));
        assert.equal(calls, 3);
      });
    });

    test('concurrent attempts of one step never both run it', async () => {
      await makeStore(async (store) => {
        const a = createJournal({ store, keyer });
        const b = createJournal({ store, keyer });
        const gate = deferred();
        let calls = 0;
        const slow = async () => {
          calls++;
          await gate.promise;
          return { by: 'first' };
        };
        const first = a.step(RUN, 'plan', slow);
        await new Promise((r) => setTimeout(r, 20));
        await assert.rejects(
          b.step(RUN, 'plan', async () => {
            calls++;
            return { by: 'second' };
          }),
          (e) => rejectsWith('step-in-flight')(e) && e.dueAt !== undefined,
        );
        gate.resolve();
        assert.deepEqual(await first, { by: 'first' });
        assert.deepEqual(await b.step(RUN, 'plan', slow), { by: 'first' });
        assert.equal(calls, 1);
      });
    });

    test('a step that throws records nothing: the error comes back and a retry asks again', async () => {
      await makeStore(async (store) => {
        const journal = createJournal({ store, keyer });
        const boom = new Error('model timed out');
        await assert.rejects(journal.step(RUN, 'plan', async () => Promise.reject(boom)), (e) => e === boom);
        assert.deepEqual(await journal.step(RUN, 'plan', async () => ({ ok: true })), { ok: true });
      });
    });

    test('a step left in flight by a crash is taken over once stale, not before', async () => {
      await makeStore(async (store) => {
        const c = clock(T0);
        const crashed = createJournal({ store, keyer, now: c.now, staleAfterSeconds: 60 });
        // The process dies mid-step: the claim is written, the step never finishes.
        crashed.step(RUN, 'plan', () => new Promise(() => {}));
        await new Promise((r) => setTimeout(r, 20));
        const resumed = createJournal({ store, keyer, now: c.now, staleAfterSeconds: 60 });
        let calls = 0;
        const fn = async () => ({ sample: ++calls });
        c.t = T0 + 30;
        await assert.rejects(resumed.step(RUN, 'plan', fn), (e) => rejectsWith('step-in-flight')(e) && e.dueAt === T0 + 60);
        assert.equal(calls, 0, 'not stale yet: not run');
        c.t = T0 + 61;
        assert.deepEqual(await resumed.step(RUN, 'plan', fn), { sample: 1 });
        assert.deepEqual(await resumed.step(RUN, 'plan', fn), { sample: 1 }, 'recorded by the takeover');
        assert.equal(calls, 1);
      });
    });

    test('outputs are bounded and JSON, with errors naming the step; the claim is released', async () => {
      await makeStore(async (store) => {
        const journal = createJournal({ store, keyer, maxOutputBytes: 1024 });
        await assert.rejects(
          journal.step(RUN, 'draft', async () => 'x'.repeat(2000)),
          (e) => rejectsWith('step-output-too-large')(e) && /`draft`/.test(e.message) && /2002 bytes/.test(e.message),
        );
        await assert.rejects(journal.step(RUN, 'draft', async () => undefined), rejectsWith('invalid-step-output'));
        await assert.rejects(journal.step(RUN, 'draft', async () => ({ n: 1n })), rejectsWith('invalid-step-output'));
        assert.equal(await journal.step(RUN, 'draft', async () => 'short'), 'short');
        await assert.rejects(journal.step(RUN, '', async () => 1), rejectsWith('invalid-step-name'));
        await assert.rejects(journal.step({ ...RUN, intentId: '' }, 'x', async () => 1), rejectsWith('invalid-intent-id'));
      });
    });

    test('tool calls: the same action resampled runs once; another run is another action', async () => {
      await makeStore(async (store) => {
        const dest = destination();
        const journal = createJournal({ store, keyer });
        const call = (remittance, amount = '150.00') => ({
          tool: 'pix.send',
          arguments: { amount, currency: 'brl', pix_key: 'Ana@Example.com', remittance },
        });
        const first = await journal.toolCall(RUN, call('Rent for March'), (key) => dest.pay(key, { amount: '150.00' }));
        // The model resampled: other text, other number spelling, same action.
        const again = await journal.toolCall(RUN, call('march rent :)', '150'), (key) => dest.pay(key, { amount: '150' }));
        assert.deepEqual(again, first);
        assert.equal(dest.paid.size, 1);
        assert.deepEqual([...dest.paid.values()], [1]);
        await journal.toolCall({ ...RUN, intentId: 'run-43' }, call('Rent for March'), (key) => dest.pay(key, {}));
        assert.equal(dest.paid.size, 2, 'two runs never collide');
        await journal.toolCall(RUN, call('Rent for March', '151'), (key) => dest.pay(key, {}));
        assert.equal(dest.paid.size, 3, 'another amount is another action');

        await assert.rejects(
          journal.toolCall(RUN, { tool: 'pix.send', arguments: { ...call('x').arguments, tool_call_id: 'call_1' } }, dest.pay),
          (e) => rejectsWith('unclassified-fields')(e) && /tool_call_id/.test(e.message),
        );
        await assert.rejects(journal.toolCall(RUN, { tool: 'wire.send', arguments: call('x').arguments }, dest.pay), rejectsWith('unknown-action-type'));
        assert.equal(dest.paid.size, 3);
      });
    });

    test('a tool call left in flight is settled by the destination: found is recorded, unknown never re-runs', async () => {
      await makeStore(async (store) => {
        const c = clock(T0);
        const dest = destination();
        const args = { amount: '10', currency: 'BRL', pix_key: 'a@b.c', remittance: 'r' };
        const call = { tool: 'pix.send', arguments: args };
        // Crash after the effect, before the completion: the effect happened, the record is in flight.
        const crashed = createJournal({ store, keyer, now: c.now });
        crashed.toolCall(RUN, call, async (key) => {
          await dest.pay(key, args);
          return new Promise(() => {});
        });
        await new Promise((r) => setTimeout(r, 20));
        assert.equal(dest.paid.size, 1);

        const resumed = createJournal({ store, keyer, now: c.now, staleAfterSeconds: 60 });
        const pay = (key) => dest.pay(key, args);
        await assert.rejects(resumed.toolCall(RUN, call, pay), rejectsWith('step-in-flight'), 'no look-up given: wait');
        c.t = T0 + 61;
        await assert.rejects(
          resumed.toolCall(RUN, call, pay, { lookup: async () => 'unknown' }),
          (e) => rejectsWith('step-in-flight')(e) && e.recovery.action === 'check-later',
        );
        assert.deepEqual([...dest.paid.values()], [1], 'unknown never re-executes');
        c.t = T0 + 61 + 60;
        const found = await resumed.toolCall(RUN, call, pay, { lookup: dest.lookup, readYourWrites: true });
        assert.equal(found.recovered, true, 'the destination’s answer is recorded');
        assert.deepEqual(await resumed.toolCall(RUN, call, pay), found, 'and replayed');
        assert.deepEqual([...dest.paid.values()], [1]);
      });
    });

    test('a tool call whose result cannot be recorded stays in flight: the effect is never run again by a retry', async () => {
      await makeStore(async (store) => {
        const dest = destination();
        const journal = createJournal({ store, keyer, maxOutputBytes: 64 });
        const call = { tool: 'pix.send', arguments: { amount: '1', currency: 'BRL', pix_key: 'a@b.c' } };
        const pay = async (key) => {
          await dest.pay(key, {});
          return { receipt: 'r'.repeat(100) };
        };
        await assert.rejects(journal.toolCall(RUN, call, pay), rejectsWith('step-output-too-large'));
        await assert.rejects(journal.toolCall(RUN, call, pay), rejectsWith('step-in-flight'));
        assert.deepEqual([...dest.paid.values()], [1]);
      });
    });
  });
}

journalSuite('memory', async (fn) => fn(memoryStore()));

describe('journal on PostgreSQL', { skip: pgSkip }, () => {
  journalSuite('PostgreSQL', async (fn) => {
    const schema = await freshSchema();
    const pool = new pg.Pool(schema.config);
    try {
      await fn(await pgStore(pool));
    } finally {
      await pool.end();
      await schema.drop();
    }
  });
});
