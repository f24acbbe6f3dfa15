// intentkey/stores/memory: records in process memory. Runs wherever the package
// does (Node, browsers, workerd): it imports nothing from Node.
import type { MemoryStore } from './types.js';

export type { MemoryStore, Store, WitRecord, WitResponse, WitCompletion, WitReplacement } from './types.js';

/** Records in process memory, as the WIT records themselves (tests, single-process tools); lost when the process ends. */
export function memoryStore(): MemoryStore;
