// Kill trials on a real store (Redis, MySQL): an owner (a child process running
// one guarded payment whose effect the test can count) is SIGKILLed at a random
// moment, often between its effect and its completion; then a redelivery and a
// recovery. Never a second effect; every record ends done.
import assert from 'node:assert/strict';
import { createGuard, jsonResponse } from '../../src/index.js';

const claimOf = (key) => ({ key, fingerprint: 'fp', tenantId: 't1', actionType: 'pix.send' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `trials` kill trials on keys fault-000, fault-001, …, reports the tally
 * on `t` and checks that enough kills landed between effect and completion.
 * @param {import('node:test').TestContext} t
 * @param {{
 *   trials: number,
 *   store: any,
 *   spawn: (key: string, pauseMs: string) => { child: import('node:child_process').ChildProcess, exited: Promise<unknown> },
 *   kill: (c: ReturnType<typeof spawn>) => Promise<void>,
 *   effects: (key: string) => Promise<number>,
 *   effect: (who: string) => (key: string) => Promise<any>,
 * }} o spawn starts the owner of `key` (pausing pauseMs between its effect and
 *   its completion); kill SIGKILLs it and waits until it is gone; effects counts
 *   the effects of `key`; effect(who) is an effect recorded as `who`'s
 */
export async function killTrials(t, { trials, store, spawn, kill, effects, effect }) {
  let midEffect = 0;
  let finished = 0;
  let beforeEffect = 0;
  let recovered = 0;
  const started = Date.now();
  for (let trial = 0; trial < trials; trial++) {
    const key = `fault-${String(trial).padStart(3, '0')}`;
    const c = spawn(key, String(Math.floor(Math.random() * 30)));
    // Odd trials: wait until the effect is seen, then a random moment; even
    // trials: a random moment after the spawn (before, during or after it).
    if (trial % 2 === 1) {
      const deadline = Date.now() + 20_000;
      let exited = false;
      c.exited.then(() => (exited = true));
      while ((await effects(key)) === 0 && Date.now() < deadline && !exited) await sleep(1);
      await sleep(Math.floor(Math.random() * 5));
    } else {
      await sleep(Math.floor(Math.random() * 400));
    }
    await kill(c);
    const record = await store.get(key);
    const ran = await effects(key);
    if (record?.status === 'in-flight' && ran === 1) midEffect++;
    else if (record?.status === 'done' && ran === 1) finished++;
    else beforeEffect++;
    // A redelivery never reruns an in-flight effect.
    const again = await createGuard({ store, now: () => 1_700_000_100 })
      .run(claimOf(key), effect('redelivery'))
      .catch((e) => e);
    if (record?.status === 'in-flight') assert.equal(again.response?.status, 409, `${key}: an in-flight record is never released`);
    // Recovery asks the destination (read-your-writes: where the effects are counted).
    const recoverer = createGuard({ store, now: () => 1_700_001_000, staleAfterSeconds: 300 });
    const r = await recoverer.recover({
      key,
      lookup: async (k) => ((await effects(k)) > 0 ? { found: jsonResponse(201, {}) } : 'absent'),
      readYourWrites: true,
      effect: effect('recovery'),
    });
    if (r.outcome === 'applied') recovered++;
    assert.equal(await effects(key), 1, `${key}: exactly one effect`);
    assert.equal((await store.get(key))?.status, 'done', `${key}: settled`);
  }
  t.diagnostic(
    `${trials} kill trials: killed between effect and completion ${midEffect}, before the effect ${beforeEffect}, ` +
      `finished ${finished}; recoveries applied ${recovered}; duplicate effects 0; ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  assert.ok(midEffect >= trials / 6, `too few kills landed between effect and completion (${midEffect})`);
}
