// The mark of the package's own stores: the guard trusts what they return (no
// checks on the hot path). Its own module, free of imports, so that the memory
// store runs wherever the package does (Node, browsers, workerd).

/** Marks the package's own stores. */
export const TRUSTED = Symbol('intentkey.trusted-store');
