// Compiled (never run) by types.test.js: the shipped .d.ts must describe real use.
import {
  IntentkeyError,
  IntentkeyTrapError,
  answerLines,
  createKeyer,
  newUuidKey,
  uuidKey,
  type DeriveResult,
  type ErrorCode,
  type Intent,
  type Keyer,
} from 'intentkey';

const keyer: Keyer = createKeyer({ secret: new Uint8Array(32), policy: { version: 1 } });
createKeyer({ secret: 'ab'.repeat(32) });
createKeyer({ secret: 'ab'.repeat(32), policy: '{"version":1}' });

const intent: Intent = { tenantId: 't', actionType: 'pix.send', payload: '{"amount":"1.00"}', intentEpoch: 1_700_000_000n };
const key: string = keyer.derive({ ...intent, payload: { amount: '1.00' }, intentEpoch: 1 });
const results: DeriveResult[] = keyer.deriveMany([intent, intent]);
for (const r of results) {
  if (r.error) {
    const code: ErrorCode = r.error.code;
    const field: string | undefined = r.error.field;
    console.log(code, field);
  } else {
    const k: string = r.key;
    console.log(k);
  }
}
const material: string = keyer.material(intent);
const short: string = keyer.intentKey('t', 'i', 40);
const full: string = keyer.intentKey('t', 'i');
const fp: string = keyer.fingerprint('t', 'pix.send', { amount: '1.00' });
const same: boolean = keyer.fingerprintMatches('t', 'pix.send', '{}', fp);
const fpm: string = keyer.fingerprintMaterial('t', 'pix.send', '{}');
keyer.dispose();
const u1: string = newUuidKey();
const u2: string = uuidKey(new Uint8Array(16));
const lines: string[] = answerLines(['{}']);
try {
  createKeyer({ secret: '' });
} catch (e) {
  if (e instanceof IntentkeyError) console.log(e.code satisfies ErrorCode, e.field);
  if (e instanceof IntentkeyTrapError) console.log(e.message);
}
console.log(key, material, short, full, same, fpm, u1, u2, lines);

// @ts-expect-error an intent needs an epoch
keyer.derive({ tenantId: 't', actionType: 'a', payload: '{}' });
// @ts-expect-error the secret is required
createKeyer({});
