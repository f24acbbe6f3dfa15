// intentkey for Node: the Rust core as one WebAssembly component (see core.js).
// The core modules are read and compiled synchronously on first use, so the API
// is synchronous and importing the package costs nothing until it is used;
// `await init()` compiles them asynchronously ahead of the first use instead.
// The claim side (guard, stores) does the I/O; the order of every store operation
// and every decision is the core's. The HTTP adapters are subpath exports:
// intentkey/express, intentkey/fastify, intentkey/fetch.
import { api } from './node-core.js';

export { IntentkeyError, IntentkeyTrapError } from './errors.js';
export { IntentkeyRefused, jsonResponse, refused } from './guard.js';
export { memoryStore } from './stores/memory.js';
export { sqliteStore } from './stores/sqlite.js';
export { pgStore } from './stores/pg.js';
export { redisStore } from './stores/redis.js';
export { mysqlStore } from './stores/mysql.js';
export { dynamoStore } from './stores/dynamodb.js';
export { createGuard, createJournal, observeRecords } from './node-core.js';

export const {
  createKeyer,
  createEndpoint,
  newUuidKey,
  uuidKey,
  answerLines,
  unreadableLineAnswer,
  claims,
  init,
} = api;
