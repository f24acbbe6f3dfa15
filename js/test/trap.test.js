// A failure inside a component call discards the instance: later calls get a fresh
// one, keyers made on the broken instance refuse to run. (Its own file: it breaks the
// module-level instance on purpose.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IntentkeyTrapError, createKeyer, newUuidKey } from '../src/index.js';
import { internal } from '../src/node-core.js';

test('an exception inside a call poisons that instance only', () => {
  const keyer = createKeyer({ secret: '11'.repeat(32) });
  const key = keyer.intentKey('t', 'i');
  // The guard export run with no store active: the store import throws through the
  // guest (a bug in the package, never a stub answer), which is a trap.
  const attempt = { key: 'k', fingerprint: 'f', tenantId: 't', actionType: 'a' };
  assert.throws(
    () => internal.driving(null, null, (g) => g.claim(attempt, 0n)),
    (e) => e instanceof IntentkeyTrapError && e.cause instanceof Error && /no store was active/.test(e.message),
  );
  assert.throws(() => keyer.intentKey('t', 'i'), IntentkeyTrapError);
  assert.match(newUuidKey(), /^[0-9a-f]{32}$/);
  assert.equal(createKeyer({ secret: '11'.repeat(32) }).intentKey('t', 'i'), key);
});

test('randomness that fails inside a call is a trap too', () => {
  // Enough draws to empty the 4 KiB block of randomness, so the next one calls
  // crypto.getRandomValues.
  const real = globalThis.crypto.getRandomValues;
  let calls = 0;
  globalThis.crypto.getRandomValues = function counting(bytes) {
    calls++;
    return real.call(globalThis.crypto, bytes);
  };
  try {
    while (calls === 0) newUuidKey();
    globalThis.crypto.getRandomValues = () => {
      throw new Error('entropy source failed');
    };
    assert.throws(
      () => {
        for (let i = 0; i < 4096 / 16 + 1; i++) newUuidKey();
      },
      (e) => e instanceof IntentkeyTrapError && e.cause instanceof Error,
    );
  } finally {
    globalThis.crypto.getRandomValues = real;
  }
  assert.match(newUuidKey(), /^[0-9a-f]{32}$/);
});
