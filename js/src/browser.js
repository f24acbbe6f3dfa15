// intentkey for browsers: the pure component (world `pure`: keys, claims, the
// HTTP endpoint, schema and the sans-I/O flows; no store or destination
// imports), built from the same core as the Node entry's. The core modules are
// fetched and compiled when this module loads (top-level await); after that the
// API is synchronous, and `init()` only instantiates. Randomness comes from
// crypto.getRandomValues.
import { api } from './browser-core.js';

export { IntentkeyError, IntentkeyTrapError } from './errors.js';

export const { createKeyer, createEndpoint, newUuidKey, uuidKey, answerLines, unreadableLineAnswer, claims, init } = api;
