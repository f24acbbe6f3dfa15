// The Keyer (a keyer resource of the component's `keys` interface: keys,
// fingerprints and claim attempts under one secret or keyring) and createKeyer.
import { oneOf } from './endpoint.js';
import { IntentkeyError } from './errors.js';
import { inBatches } from './batches.js';
import {
  attemptOut,
  fingerprintArgs,
  jsonText,
  keyLengthIn,
  payloadText,
  policyText,
  secretBytes,
  toEpoch,
  toIntent,
  toRun,
  witString,
} from './values.js';

/**
 * createKeyer over one API's instance (see instance.js).
 * @param {{ instance: Function, call: Function, withSecret: Function, withKeyring: Function }} host
 */
export function keyerFactory({ instance, call, withSecret, withKeyring }) {
  class Keyer {
    #inst;
    #resource;

    constructor(inst, resource) {
      this.#inst = inst;
      this.#resource = resource;
    }

    /** The component resource, or a clear error once disposed. */
    #live() {
      if (this.#resource === null) throw new TypeError('this keyer was disposed; create a new one');
      return this.#resource;
    }

    derive(intent) {
      const wit = toIntent(intent);
      const r = this.#live();
      return call(this.#inst, () => r.derive(wit));
    }

    deriveMany(intents) {
      if (!Array.isArray(intents)) throw new TypeError('deriveMany takes an array of intents');
      const out = new Array(intents.length);
      const wit = [];
      const where = [];
      for (let i = 0; i < intents.length; i++) {
        try {
          wit.push(toIntent(intents[i]));
          where.push(i);
        } catch (e) {
          if (!(e instanceof IntentkeyError)) throw e;
          out[i] = { error: e };
        }
      }
      const r = this.#live();
      const results = inBatches(wit, (w) => w.payloadJson.length, (batch) => call(this.#inst, () => r.deriveMany(batch)));
      for (let j = 0; j < results.length; j++) {
        const { tag, val } = results[j];
        out[where[j]] =
          tag === 'ok' ? { key: val } : { error: new IntentkeyError(val.code, val.message, val.field ?? undefined) };
      }
      return out;
    }

    material(intent) {
      const wit = toIntent(intent);
      const r = this.#live();
      return call(this.#inst, () => r.material(wit));
    }

    intentKey(tenantId, intentId, keyHexLength) {
      const tenant = witString(tenantId, 'invalid-tenant-id', 'tenant_id');
      const id = witString(intentId, 'invalid-intent-id', 'intent_id');
      const length = keyLengthIn(keyHexLength);
      const r = this.#live();
      return call(this.#inst, () => r.intentKey(tenant, id, length));
    }

    /** The intent-hmac key under the keyring's secret active at the intent's epoch. */
    intentKeyAt(tenantId, intentId, intentEpoch, keyHexLength) {
      const tenant = witString(tenantId, 'invalid-tenant-id', 'tenant_id');
      const id = witString(intentId, 'invalid-intent-id', 'intent_id');
      const epoch = toEpoch(intentEpoch);
      const length = keyLengthIn(keyHexLength);
      const r = this.#live();
      return call(this.#inst, () => r.intentKeyAt(tenant, id, epoch, length));
    }

    fingerprint(tenantId, actionType, payload) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprint(t, a, p));
    }

    /** The fingerprint under the keyring's secret active at the intent's epoch. */
    fingerprintAt(tenantId, actionType, payload, intentEpoch) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const epoch = toEpoch(intentEpoch);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintAt(t, a, p, epoch));
    }

    /**
     * The claim attempt of an intent, under the keyring's secret active at its
     * epoch: `{ tenantId, actionType, payload, intentEpoch, intentId?, keyHexLength? }`.
     * With `intentId`, the intent-hmac key of the recorded intent; without it, the
     * fields key of the payload. The fingerprint is the payload's either way.
     */
    intentAttempt(intent) {
      const wit = toIntent(intent);
      const id = intent.intentId === undefined ? undefined : witString(intent.intentId, 'invalid-intent-id', 'intent_id');
      const length = keyLengthIn(intent.keyHexLength);
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.intentAttempt(wit, id, length)));
    }

    /**
     * The claim attempt of step `step` of `run` (the journal's): keyed by the run
     * and the name; its fingerprint also covers `input` (any JSON value).
     */
    stepAttempt(run, step, input) {
      const wit = toRun(run);
      const name = witString(step, 'invalid-step-name', 'step');
      const inputJson = input === undefined ? undefined : jsonText(input, 'input');
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.stepAttempt(wit, name, inputJson)));
    }

    /**
     * The claim attempt of a validated tool call of `run`: keyed by the run, the
     * tool (the action type) and the arguments' key fields under the policy.
     */
    toolCallAttempt(run, tool, args) {
      const wit = toRun(run);
      const name = witString(tool, 'invalid-action-type', 'action_type');
      const json = payloadText(args);
      const r = this.#live();
      return attemptOut(call(this.#inst, () => r.toolCallAttempt(wit, name, json)));
    }

    fingerprintMaterial(tenantId, actionType, payload) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintMaterial(t, a, p));
    }

    fingerprintMatches(tenantId, actionType, payload, stored) {
      const [t, a, p] = fingerprintArgs(tenantId, actionType, payload);
      if (typeof stored !== 'string') throw new TypeError('the stored fingerprint must be a string');
      const r = this.#live();
      return call(this.#inst, () => r.fingerprintMatches(t, a, p, stored));
    }

    /** Frees the keyer (and the secret it holds) inside the component now. */
    dispose() {
      const resource = this.#resource;
      if (resource === null) return;
      this.#resource = null;
      const drop = resource[Symbol.dispose] ?? resource[Symbol.for('dispose')];
      if (typeof drop === 'function' && !this.#inst.poisoned) drop.call(resource);
    }

    get [Symbol.toStringTag]() {
      return 'Keyer';
    }
  }

  function createKeyer(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('createKeyer takes an options object: { secret, policy } or { keyring, policy }');
    }
    const policyJson = policyText(options.policy);
    const inst = instance();
    if (options.keyring !== undefined) {
      oneOf(options);
      const resource = withKeyring(inst, options.keyring, (entries) =>
        call(inst, (keys) => keys.Keyer.createKeyring(policyJson, entries)),
      );
      return new Keyer(inst, resource);
    }
    const secret = secretBytes(options.secret);
    // The guest copies the bytes into the keyer resource; no copy stays here.
    const resource = withSecret(inst, secret, (secretId) => call(inst, (keys) => keys.Keyer.create(policyJson, secretId)));
    return new Keyer(inst, resource);
  }

  return createKeyer;
}
