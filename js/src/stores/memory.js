// A store in process memory: for tests, single-process tools and examples. It
// holds the WIT records the component passes (no conversion, no copy: jco makes a
// fresh object for every record it hands over and only reads what it is given;
// response bodies are the Uint8Arrays jco made) and applies every fenced condition
// of the SQL stores. JavaScript runs one operation at a time, so each is atomic.
// Synchronous: the guard plugs it into the component's `store` import (or, over
// the pure component, awaits it in the core's flows). No imports from Node: it
// runs wherever the package does. A retry that waits for the first attempt
// (op `watch`) is woken by this store's own writes that changed its record.
import { CLOSING, TRUSTED, closer } from './trusted.js';
import { createWatchers } from './watchers.js';

/** A record store in memory (lost when the process ends). */
export function memoryStore() {
  /** @type {Map<string, any>} WIT records by key */
  const rows = new Map();
  const watchers = createWatchers();
  const closing = closer();

  /** The record under `key` if it is in flight and still carries `token`. */
  function fenced(key, token) {
    const r = rows.get(key);
    return r !== undefined && r.status === 'in-flight' && r.ownerToken === token ? r : undefined;
  }

  return {
    kind: 'memory',
    synchronous: true,
    [TRUSTED]: true,

    /** INSERT … ON CONFLICT (key) DO NOTHING: true when this call inserted. */
    insert(record) {
      if (rows.has(record.key)) return false;
      rows.set(record.key, record);
      return true;
    },

    get(key) {
      return rows.get(key);
    },

    /** The fenced completion. */
    complete(c) {
      const r = fenced(c.key, c.ownerToken);
      if (r === undefined) return false;
      r.status = 'done';
      r.response = c.response;
      r.expiresAt = c.expiresAt;
      r.nextLookupAt = undefined;
      watchers.changed(c.key);
      return true;
    },

    /**
     * The fenced recovery write: every mutable column, if the record is in
     * flight or awaiting reconciliation (a human's decision) and the token and
     * the look-up count still match.
     */
    replace(x) {
      const next = x.record;
      const r = rows.get(next.key);
      if (r === undefined || (r.status !== 'in-flight' && r.status !== 'needs-reconciliation')) return false;
      if (r.ownerToken !== x.expectedToken || r.lookups !== x.expectedLookups) return false;
      r.status = next.status;
      r.ownerToken = next.ownerToken;
      r.response = next.response;
      r.createdAt = next.createdAt;
      r.expiresAt = next.expiresAt;
      r.lookups = next.lookups;
      r.nextLookupAt = next.nextLookupAt;
      watchers.changed(next.key);
      return true;
    },

    /** The fenced release (delete). */
    release(x) {
      if (fenced(x.key, x.ownerToken) === undefined) return false;
      rows.delete(x.key);
      watchers.changed(x.key);
      return true;
    },

    /** Records with `status` (WIT spelling), oldest first (created_at, then key), at most `limit`. */
    list(status, limit) {
      const out = [];
      for (const r of rows.values()) if (r.status === status) out.push(r);
      out.sort((a, b) =>
        a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
      );
      return out.length > limit ? out.slice(0, limit) : out;
    },

    /** DELETE … WHERE status = 'done' AND expires_at <= now: how many. */
    purge(now) {
      let n = 0;
      for (const [key, r] of rows) {
        if (r.status === 'done' && r.expiresAt !== undefined && r.expiresAt <= now) {
          rows.delete(key);
          n++;
        }
      }
      return n;
    },

    /**
     * Resolves when this store's own write changed the record of `key`
     * (completed, released, taken over), after `ms`, or when `signal` aborts.
     */
    watch: watchers.watch,

    /**
     * How many records have `status` (WIT spelling), and the oldest claim
     * among them: { count, oldest }.
     */
    count(status) {
      let count = 0;
      let oldest = null;
      for (const r of rows.values()) {
        if (r.status !== status) continue;
        count++;
        const at = Number(r.createdAt);
        if (oldest === null || at < oldest) oldest = at;
      }
      return { count, oldest };
    },

    /** Closed when close() is called (a guard's background work on this store stops). */
    [CLOSING]: closing,

    /** Wakes every waiter (they claim again). */
    close() {
      closing.close();
      watchers.wakeAll();
    },
  };
}
