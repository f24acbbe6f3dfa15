// intentkey for Node: the Rust core as one WebAssembly component (see core.js).
// The core modules are read and compiled synchronously on first use, so the API
// is synchronous and importing the package costs nothing until it is used.
// The claim side (guard, stores, HTTP middleware) does the I/O; the order of every
// store operation and every decision is the core's.
import { api } from './node-core.js';

export { IntentkeyError, IntentkeyTrapError } from './core.js';
export { IntentkeyRefused, createGuard, jsonResponse, refused } from './guard.js';
export { idempotency } from './http.js';
export { memoryStore } from './stores/memory.js';
export { sqliteStore } from './stores/sqlite.js';
export { pgStore } from './stores/pg.js';

export const { createKeyer, newUuidKey, uuidKey, answerLines, unreadableLineAnswer, claims } = api;
