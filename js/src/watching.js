// The host's part of the bounded wait (the core's op `watch`): "return when the
// store says the record of `key` changed, or after `ms`, whichever is first",
// then the flow resumes with `watched { elapsedMs, now }` and claims again. The
// core chooses the intervals (50 ms doubling to 1 s, with jitter) and the
// budget; this only waits. A store with `watch(key, ms, signal)` (memory,
// SQLite, PostgreSQL, Redis) wakes the waiter early; any other store is polled:
// the host sleeps the interval. Never blocks the event loop. Shared by the
// serve flow's driver (http/serving.js) and the run flows' (guard.js). No
// imports from Node: it runs wherever the package does.
import { IntentkeyError } from './errors.js';

/** The abort of a wait (the client disconnected, or the caller's signal): the flow is abandoned. */
export class WaitAborted extends Error {
  constructor(reason) {
    super('intentkey: the wait for the first attempt was aborted', reason === undefined ? undefined : { cause: reason });
    this.name = 'WaitAborted';
    this.reason = reason;
  }
}

/** Resolves after `ms` milliseconds, or as soon as `signal` aborts. Never rejects. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

const clock = () => globalThis.performance.now();

/**
 * Performs one op `watch` ({ key, ms }) on `store` and answers the WIT
 * op-result `watched`; throws WaitAborted when `signal` aborted (the flow must
 * not go on: a waiter owns nothing, so abandoning it is safe).
 * @param {object} store the store the flow runs on
 * @param {{ key: string, ms: number }} request
 * @param {AbortSignal | undefined} signal
 * @param {() => number} now whole seconds (the guard's clock)
 */
export async function performWatch(store, { key, ms }, signal, now) {
  if (signal?.aborted) throw new WaitAborted(signal.reason);
  const start = clock();
  if (typeof store.watch === 'function') {
    try {
      await store.watch(key, ms, signal);
    } catch {
      // A store whose watch failed: the rest of the interval is polled.
      const left = ms - (clock() - start);
      if (left > 0) await sleep(left, signal);
    }
  } else {
    await sleep(ms, signal);
  }
  if (signal?.aborted) throw new WaitAborted(signal.reason);
  const elapsed = Math.min(Math.max(Math.round(clock() - start), 0), 0xffffffff);
  return { tag: 'watched', val: { elapsedMs: elapsed, now: BigInt(now()) } };
}

/** The option's name in messages and `field` (the core checks its limit, 60000, as `wait-max-ms`). */
const FIELD = 'wait.maxMs';

/**
 * The `wait` option ({ maxMs }) as the WIT's wait-max-ms: 0 when absent. An
 * unknown key inside it, or a maxMs that is not a whole number of
 * milliseconds, is an IntentkeyError `invalid-argument` naming it
 * (`wait.maxMss`); the core refuses more than 60000 (see checkWait).
 * @param {unknown} value the option
 * @param {string} who the function given it, for messages
 */
export function waitMaxMsIn(value, who) {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new IntentkeyError('invalid-argument', `${who}: \`wait\` must be an object: { maxMs } (milliseconds, 0 to 60000)`, 'wait');
  }
  for (const name of Object.keys(value)) {
    if (name !== 'maxMs') {
      throw new IntentkeyError(
        'invalid-argument',
        `${who}: \`wait.${name}\` is not an option; \`wait\` takes maxMs (how long a retry that finds its key in flight waits, in milliseconds)`,
        `wait.${name}`,
      );
    }
  }
  const { maxMs } = value;
  if (maxMs === undefined) return 0;
  if (!Number.isInteger(maxMs) || maxMs < 0 || maxMs > 0xffffffff) {
    throw new IntentkeyError('invalid-argument', `${who}: \`${FIELD}\` must be a whole number of milliseconds (0 to 60000)`, FIELD);
  }
  return maxMs;
}

/**
 * The core's refusal of a wait (`invalid-argument` on field `wait-max-ms`)
 * as the option's: the same code and message, naming `wait.maxMs`.
 */
export function waitError(e, who) {
  if (e instanceof IntentkeyError && e.field === 'wait-max-ms') {
    const message = e.message.replace(/^wait-max-ms: /, '');
    return new IntentkeyError(e.code, `${who}: \`${FIELD}\`: ${message}`, FIELD, { cause: e });
  }
  return e;
}
