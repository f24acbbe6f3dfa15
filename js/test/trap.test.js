// A failure inside a component call discards the instance: later calls get a fresh
// one, keyers made on the broken instance refuse to run. (Its own file: it breaks the
// module-level instance on purpose.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IntentkeyTrapError, createKeyer, newUuidKey } from '../src/index.js';

test('an exception inside a call poisons that instance only', () => {
  const keyer = createKeyer({ secret: '11'.repeat(32) });
  const key = keyer.intentKey('t', 'i');
  const real = globalThis.crypto.getRandomValues;
  globalThis.crypto.getRandomValues = () => {
    throw new Error('entropy source failed');
  };
  try {
    assert.throws(() => newUuidKey(), (e) => e instanceof IntentkeyTrapError && e.cause instanceof Error);
  } finally {
    globalThis.crypto.getRandomValues = real;
  }
  assert.throws(() => keyer.intentKey('t', 'i'), IntentkeyTrapError);
  assert.match(newUuidKey(), /^[0-9a-f]{32}$/);
  assert.equal(createKeyer({ secret: '11'.repeat(32) }).intentKey('t', 'i'), key);
});
