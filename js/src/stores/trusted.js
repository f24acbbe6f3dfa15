// The mark of the package's own stores: the guard trusts what they return (no
// checks on the hot path). Its own module, free of imports, so that the memory
// store runs wherever the package does (Node, browsers, workerd).

/** Marks the package's own stores. */
export const TRUSTED = Symbol('intentkey.trusted-store');

/**
 * Called by a guard or an adapter with waiting on (`wait: { maxMs > 0 }`)
 * over the store: a PostgreSQL store then notifies other processes of the
 * records its writes change (unless made with `notify: false`). Optional.
 */
export const WAITING = Symbol('intentkey.store-waiting');

/**
 * Marks a store of this package whose operations read their AbortSignal only
 * as `signal.aborted` (or not at all): the guard then passes each operation
 * a plain `{ aborted }` flag, set when the store deadline passes, where an
 * AbortSignal (an EventTarget) costs microseconds to make for every store
 * call. Any other store gets a real AbortSignal.
 */
export const ABORTED_FLAG = Symbol('intentkey.store-reads-aborted');

/**
 * The closing of a store (a `closer()`): work a guard runs in the background
 * on the store (the release of a claim whose insert failed) stops once the
 * store's close() is called, instead of keeping the process alive. Optional.
 */
export const CLOSING = Symbol('intentkey.store-closing');

/**
 * A store's closing: `closed`, `onClose(fn)` (fn runs once close() is called,
 * at once if it was; answers a function that forgets fn) and `close()`. Not
 * an AbortSignal: any number of waiters, no listener limit.
 */
export function closer() {
  const waiting = new Set();
  let closed = false;
  return Object.freeze({
    get closed() {
      return closed;
    },
    onClose(fn) {
      if (closed) {
        fn();
        return () => {};
      }
      waiting.add(fn);
      return () => waiting.delete(fn);
    },
    close() {
      if (closed) return;
      closed = true;
      const fns = [...waiting];
      waiting.clear();
      for (const fn of fns) fn();
    },
  });
}
