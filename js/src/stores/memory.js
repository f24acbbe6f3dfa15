// A store in process memory: for tests, single-process tools and examples. The
// same interface and the same conditional writes as the SQL stores; JavaScript
// runs one statement at a time, so each method is atomic. What may be purged is
// the core's `purgeable`.
import { claims } from '../node-core.js';
import { checkNow, checkStatus, recordToRow, rowToRecord, COLUMNS } from './schema.js';

/** A private copy of a record, through the same row form the SQL stores write. */
function copy(record) {
  const values = recordToRow(record);
  return rowToRecord(Object.fromEntries(COLUMNS.map((c, i) => [c, values[i]])));
}

/** A record store in memory (lost when the process ends). */
export function memoryStore() {
  /** @type {Map<string, ReturnType<typeof copy>>} */
  const rows = new Map();

  return {
    kind: 'memory',

    /** Inserts the record unless its key exists (INSERT … ON CONFLICT DO NOTHING). */
    insertIfAbsent(record) {
      const row = copy(record);
      if (rows.has(row.key)) return false;
      rows.set(row.key, row);
      return true;
    },

    get(key) {
      const row = rows.get(key);
      return row === undefined ? null : copy(row);
    },

    /** Writes a completed record: only while the stored one is in_flight. */
    complete(key, record) {
      const next = copy(record);
      const row = rows.get(key);
      if (row === undefined || row.status !== 'in_flight') return false;
      row.status = next.status;
      row.response = next.response;
      row.expiresAt = next.expiresAt;
      row.lookups = next.lookups;
      row.nextLookupAt = next.nextLookupAt;
      return true;
    },

    /**
     * Writes a recovery result: only while the stored record is in_flight and
     * still as `expected` was read (created_at, lookups, next_lookup_at).
     */
    applyRecovery(key, expected, next) {
      const want = copy(expected);
      const n = copy(next);
      const row = rows.get(key);
      if (
        row === undefined ||
        row.status !== 'in_flight' ||
        row.createdAt !== want.createdAt ||
        row.lookups !== want.lookups ||
        row.nextLookupAt !== want.nextLookupAt
      ) {
        return false;
      }
      row.status = n.status;
      row.response = n.response;
      row.createdAt = n.createdAt;
      row.expiresAt = n.expiresAt;
      row.lookups = n.lookups;
      row.nextLookupAt = n.nextLookupAt;
      return true;
    },

    /** The records with this status, oldest first. */
    list(status, { limit } = {}) {
      checkStatus(status);
      const out = [...rows.values()]
        .filter((r) => r.status === status)
        .sort((a, b) => a.createdAt - b.createdAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
        .map(copy);
      return limit === undefined ? out : out.slice(0, limit);
    },

    /** Deletes the records the core says are purgeable at `now`; returns how many. */
    purge(now) {
      checkNow(now);
      let n = 0;
      for (const [key, row] of rows) {
        if (claims.purgeable(row, now)) {
          rows.delete(key);
          n++;
        }
      }
      return n;
    },

    close() {},
  };
}
