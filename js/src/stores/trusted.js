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
