// Wake-ups for retries that wait for the first attempt (the core's op `watch`):
// one registry per store object, keyed by record key. The store's own writes
// that changed a record (completion, release, recovery write) wake the waiters
// of its key at once; a store with notifications from other processes
// (PostgreSQL LISTEN, Redis sharded pub/sub) feeds the same registry from its
// one listening connection. A waiter that misses a wake-up (it came between
// its claim and its watch, or from a process that does not notify) re-checks
// at the end of the core's interval: the core chooses the intervals, and
// claims again after every watch, so a wake-up is only ever a hint.
// No imports from Node: the memory store runs wherever the package does.

/**
 * A registry of waiters.
 * @returns {{
 *   watch: (key: string, ms: number, signal?: AbortSignal) => Promise<void>,
 *   changed: (key: string) => void,
 *   wakeAll: () => void,
 *   readonly size: number,
 * }}
 */
export function createWatchers() {
  /** @type {Map<string, Set<() => void>>} the wake functions of the waiters, by key */
  const waiting = new Map();

  /** Wakes every waiter of `key` (a no-op when nobody waits: one Map look-up). */
  function changed(key) {
    if (waiting.size === 0) return;
    const set = waiting.get(key);
    if (set === undefined) return;
    waiting.delete(key);
    for (const wake of set) wake();
  }

  /** Wakes every waiter (a listener reconnected: notifications may have been lost; the store closes). */
  function wakeAll() {
    const sets = [...waiting.values()];
    waiting.clear();
    for (const set of sets) for (const wake of set) wake();
  }

  /**
   * Resolves when `key` changed, after `ms` milliseconds, or when `signal`
   * aborts, whichever is first. Never rejects.
   */
  function watch(key, ms, signal) {
    return new Promise((resolve) => {
      if (signal?.aborted) {
        resolve();
        return;
      }
      let set = waiting.get(key);
      if (set === undefined) {
        set = new Set();
        waiting.set(key, set);
      }
      const mine = set;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        mine.delete(done);
        if (mine.size === 0 && waiting.get(key) === mine) waiting.delete(key);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      mine.add(done);
    });
  }

  return {
    watch,
    changed,
    wakeAll,
    /** How many keys have waiters now (a finished or cancelled wait leaves none). */
    get size() {
      return waiting.size;
    },
  };
}
