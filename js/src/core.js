// The intentkey API over a transpiled component, shared by the Node and the
// browser entries. Every rule (normalization, canonical JSON, HMAC, error codes and
// messages, every claim decision and the order of every store operation) lives in
// the Rust core inside the component; the package only converts JavaScript values
// to the WIT types and back (values.js), supplies the component's imports (secrets,
// randomness, and in world `intentkey` the store and the destination) and turns the
// component's errors into IntentkeyError (instance.js). This file wires one API
// together: the instance, the keyer (keyer.js), uuid keys and answer lines
// (lines.js), endpoints (endpoint.js) and the claim decisions (claims.js).
import { createClaims } from './claims.js';
import { endpointFactory } from './endpoint.js';
import { IntentkeyError, IntentkeyTrapError } from './errors.js';
import { createInstance } from './instance.js';
import { keyerFactory } from './keyer.js';
import { linesFactory } from './lines.js';
import { secretBytes } from './values.js';
import { waitError, waitMaxMsIn } from './watching.js';

export { IntentkeyError, IntentkeyTrapError };

/**
 * Builds the API over one transpiled component.
 * @param {{
 *   instantiate: Function,
 *   getCoreModule: (name: string) => WebAssembly.Module,
 *   world: 'intentkey' | 'pure',
 *   prepare?: (options?: object) => Promise<void>,
 * }} component jco's `instantiate` (sync mode); a synchronous way to get each
 *   compiled core module (cached by the caller); the component's world: `intentkey`
 *   imports a store and a destination and exports `guard`, `pure` does neither;
 *   `prepare`, when the entry can compile the core modules ahead of use: it
 *   compiles them asynchronously (what `init()` awaits)
 */
export function createApi({ instantiate, getCoreModule, world, prepare }) {
  if (world !== 'intentkey' && world !== 'pure') throw new TypeError(`unknown component world ${world}`);
  const { instance, callOn, call, driving, flow, runFlow, migration, rawClaims, rawFlows, rawSchema, withSecret, withKeyring, randomBytes } =
    createInstance({ instantiate, getCoreModule, world });

  const createEndpoint = endpointFactory({ instance, callOn, withSecret, withKeyring, secretBytes, flow });

  /**
   * The endpoint whose answers the guard gives when no endpoint is configured:
   * the `ietf` profile's defaults, one per instance. Its secret is random and
   * never used (answers need none; keys and fingerprints come from elsewhere).
   */
  function defaultAnswers() {
    const inst = instance();
    inst.answers ??= createEndpoint({ secret: randomBytes(32) });
    return inst.answers;
  }

  /** A fresh owner token (32 hex): 16 random bytes through the core's owner-token. */
  function ownerToken() {
    const bytes = randomBytes(16);
    return rawClaims((c) => c.ownerToken(bytes));
  }

  /** A run flow's seed: 16 random bytes, from which the core derives its owner tokens. */
  const seed = () => randomBytes(16);

  /**
   * The wait-max-ms of a `wait` option ({ maxMs }), checked by the core's
   * `check-wait-max-ms` (at most 60000, `invalid-argument` naming `wait.maxMs`).
   */
  function waitMaxMs(wait, who) {
    const ms = waitMaxMsIn(wait, who);
    try {
      return rawFlows((f) => f.checkWaitMaxMs('wait-max-ms', ms));
    } catch (e) {
      throw waitError(e, who);
    }
  }

  const internal = Object.freeze({ driving, flow, runFlow, migration, rawClaims, rawFlows, rawSchema, defaultAnswers, ownerToken, seed, waitMaxMs, world });

  const createKeyer = keyerFactory({ instance, call, withSecret, withKeyring });
  const { newUuidKey, uuidKey, answerLines, unreadableLineAnswer } = linesFactory({ instance, call });

  // The claim, replay and recovery decisions (pure functions of the core's
  // `claims` interface), on the current instance.
  const claims = createClaims(rawClaims);

  let ready = null;
  /**
   * Compiles the component's core modules asynchronously (where the entry can)
   * and instantiates the component, so that the first call does not block the
   * event loop compiling. Idempotent. Without it, the first call compiles
   * synchronously.
   * @param {object} [options] passed to the entry's compiler
   */
  function init(options) {
    ready ??= (async () => {
      if (prepare !== undefined) await prepare(options);
      instance();
    })().catch((e) => {
      ready = null; // a failed init (a missing file, say) may be retried
      throw e;
    });
    return ready;
  }

  return {
    createKeyer,
    createEndpoint,
    newUuidKey,
    uuidKey,
    answerLines,
    unreadableLineAnswer,
    claims,
    init,
    internal,
  };
}
