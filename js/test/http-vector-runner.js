// The HTTP conformance vector runner (tests/vectors/http/http_test.json), shared
// by Node (http-vectors.test.js), Chromium (browser/http-vectors-page.js) and any
// other runtime (Bun, Deno, workerd): no Node or DOM APIs here, and the package is
// a parameter, not an import. It follows the adapter pipeline every runner follows
// (tests/vectors/README.md, "HTTP vectors"; the Rust twin is crates/vectors/src/http.rs):
// each step goes through the core's serve flow (guard.serve: admit, claim, the
// handler, capture, finish, answer) over a fresh memory store per case, whose
// operations fail where the step says. Each step compares the path taken,
// whether the handler ran, the status, the exact header list, the exact body
// bytes, what finishing did and how often it was tried again; the fingerprints,
// storage keys and the endpoint's fixed answers are checked through the endpoint.
//
// The API: { createEndpoint, createGuard, memoryStore } (the package's).

export const SCHEMA = 'intentkey_http_vectors_v1';
export const KINDS = ['handler', 'failed', 'unguarded', 'replay', 'in-flight', 'payload-conflict', 'refused', 'unavailable', 'released'];
const PROBE_KEY = 'fingerprint-probe';
const STORAGE_KEY_ROUTE = '/storage-key';
const LISTS = ['cases', 'steps', 'fingerprints', 'storage keys', 'endpoint answers'];

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

function hexBytes(hex) {
  if (typeof hex !== 'string' || hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
    throw new Error(`not hex: ${String(hex).slice(0, 40)}`);
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** `text` (UTF-8) or `hexName` (hex) of a vector object: exactly one. */
function bytesOf(obj, text, hexName, at) {
  const hasText = typeof obj[text] === 'string';
  const hasHex = typeof obj[hexName] === 'string';
  if (hasText === hasHex) throw new Error(`${at}: needs exactly one of ${text} and ${hexName}`);
  return hasText ? encoder.encode(obj[text]) : hexBytes(obj[hexName]);
}

function show(bytes) {
  let s;
  try {
    s = JSON.stringify(decoder.decode(bytes));
  } catch {
    s = `hex ${toHex(bytes)}`;
  }
  return s.length <= 300 ? s : `${s.slice(0, 300)}… (${bytes.length} bytes)`;
}

function sameBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function pairs(list) {
  return list.map(([n, v]) => [n, v]);
}

function replyDiff(want, got, at) {
  const out = [];
  if (want.status !== got.status) out.push(`status: want ${want.status}, got ${got.status}`);
  const wantHeaders = JSON.stringify(pairs(want.headers));
  const gotHeaders = JSON.stringify(pairs(got.headers));
  if (wantHeaders !== gotHeaders) out.push(`headers:\n      want ${wantHeaders}\n      got  ${gotHeaders}`);
  const body = bytesOf(want, 'body', 'body_hex', at);
  const gotBody = got.body instanceof Uint8Array ? got.body : encoder.encode(String(got.body));
  if (!sameBytes(body, gotBody)) out.push(`body:\n      want ${show(body)}\n      got  ${show(gotBody)}`);
  return out;
}

/** The reply an adapter sends for a handler's response: status, Content-Type (when not empty), its headers, its body. */
function asIs(response, at) {
  const headers = response.content_type ? [['Content-Type', response.content_type]] : [];
  return { status: response.status, headers: [...headers, ...pairs(response.headers)], body: bytesOf(response, 'body', 'body_hex', at) };
}

function endpointOf(api, secretHex, config) {
  return api.createEndpoint({
    secret: secretHex,
    profile: config.profile,
    strictKeySyntax: config.strict_key_syntax,
    retryAfterSeconds: config.retry_after_seconds,
    replayHeaders: config.replay_headers,
    keyRequired: config.key_required,
    maxBodyBytes: config.max_body_bytes,
    policies: config.policies,
  });
}

function defaults(profile, policies = {}) {
  return {
    profile,
    strict_key_syntax: false,
    retry_after_seconds: 1,
    replay_headers: ['Location', 'Content-Type'],
    key_required: true,
    max_body_bytes: 1048576,
    policies,
  };
}

/** Thrown by a handler whose vector says "throws" (or raises a status). */
class HandlerThrew extends Error {}

/**
 * A store over `inner` (synchronous, as the memory store is) whose next claim
 * operations (insert, get) and finishing writes (complete, release) fail as a
 * step's `store_fails` says: unreachable, or an error the store answered.
 */
function failingStore(inner, fails) {
  const down = () => {
    const tag = fails.unavailable ? 'unavailable' : 'failed';
    return Object.assign(new Error(`injected by the vector (${tag})`), { payload: { tag, val: 'injected by the vector' } });
  };
  const gate = (budget, op) => (...args) => {
    if (fails[budget] > 0) {
      fails[budget] -= 1;
      throw down();
    }
    return inner[op](...args);
  };
  return {
    kind: 'vector-faults',
    synchronous: inner.synchronous === true,
    insert: gate('claim', 'insert'),
    get: gate('claim', 'get'),
    complete: gate('finish', 'complete'),
    release: gate('finish', 'release'),
    replace: (...a) => inner.replace(...a),
    list: (...a) => inner.list(...a),
    purge: (...a) => inner.purge(...a),
  };
}

/** The step through the core's serve flow (guard.serve): { kind, ran, reply, finished, finishRetries }. */
async function runStep(guard, clock, headerName, step, at) {
  const now = step.now;
  clock.now = now;
  clock.fails.claim = step.store_fails?.claim ?? 0;
  clock.fails.finish = step.store_fails?.finish ?? 0;
  clock.fails.unavailable = step.store_fails?.unavailable ?? false;
  const { request, handler } = step;
  const name = headerName.toLowerCase();
  const keyValues = request.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  const typeHeader = request.headers.find(([n]) => n.toLowerCase() === 'content-type');
  const served = await guard.serve(
    {
      tenantId: request.tenant,
      method: request.method,
      route: request.route,
      keyValues,
      contentType: typeHeader === undefined ? undefined : typeHeader[1],
      body: bytesOf(request, 'body', 'body_hex', `${at}.request`),
    },
    async () => {
      if (handler === 'throws') throw new HandlerThrew('the handler failed');
      if (handler !== null && typeof handler === 'object' && 'raises' in handler) {
        throw Object.assign(new HandlerThrew(`raised ${handler.raises}`), { status: handler.raises });
      }
      const sent = asIs(handler, `${at}.handler`);
      return { status: sent.status, headers: sent.headers, body: sent.body };
    },
  );
  if (served.error !== undefined && !(served.error instanceof HandlerThrew)) throw served.error;
  let reply = served.reply;
  if (['handler', 'unguarded', 'released'].includes(served.path)) {
    if (reply !== null) throw new Error(`the core gave a ${reply.status} reply on path ${served.path}`);
    reply =
      served.path === 'released'
        ? { status: handler.raises, headers: [], body: new Uint8Array(0) }
        : asIs(handler, `${at}.handler`);
  } else if (reply === null) {
    throw new Error(`the core gave no reply on path ${served.path}`);
  }
  return { kind: served.path, ran: served.ran, reply, finished: served.finished, finishRetries: served.finishRetries };
}

function stepProblems(step, trace, at) {
  const out = [];
  const { expect } = step;
  if (trace.kind !== expect.kind) out.push(`path: want ${expect.kind}, got ${trace.kind}`);
  if (trace.ran !== expect.ran) out.push(`handler ran: want ${expect.ran}, got ${trace.ran}`);
  out.push(...replyDiff(expect, trace.reply, at));
  if ((trace.finished ?? null) !== expect.finished) out.push(`finish: want ${expect.finished}, got ${trace.finished}`);
  if (trace.finishRetries !== expect.finish_retries) {
    out.push(`finish retries: want ${expect.finish_retries}, got ${trace.finishRetries}`);
  }
  return out;
}

function guarded(admission) {
  if (admission.tag !== 'guarded') {
    const detail = admission.reply ? ` with ${admission.reply.status} ${show(admission.reply.body)}` : '';
    throw new Error(`admitted ${admission.tag}${detail}, want guarded`);
  }
  return admission.attempt;
}

function message(e) {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Parses and lints the file: the schema, the counts, kinds, unique names. Throws on a malformed file. */
export function parseHttpVectors(text) {
  const doc = JSON.parse(text);
  if (doc === null || typeof doc !== 'object' || doc.schema !== SCHEMA) throw new Error(`schema is not ${SCHEMA}`);
  const counts = {
    numberOfCases: doc.cases.length,
    numberOfSteps: doc.cases.reduce((n, c) => n + c.steps.length, 0),
    numberOfFingerprints: doc.fingerprints.length,
    numberOfStorageKeys: doc.storage_keys.length,
    numberOfEndpointAnswers: doc.endpoint_answers.length,
  };
  for (const [name, found] of Object.entries(counts)) {
    if (doc[name] !== found) throw new Error(`${name} says ${doc[name]}, the file holds ${found}`);
  }
  const names = new Set(doc.cases.map((c) => c.name));
  if (names.size !== doc.cases.length) throw new Error('two cases share a name');
  for (const c of doc.cases) {
    c.steps.forEach((s, i) => {
      if (!KINDS.includes(s.expect.kind)) throw new Error(`${c.name}#${i + 1}: unknown kind ${s.expect.kind}`);
      if ((s.expect.kind === 'refused') !== ('refusal' in s.expect)) {
        throw new Error(`${c.name}#${i + 1}: refusal is given exactly when the kind is refused`);
      }
    });
  }
  return doc;
}

/**
 * Runs every list of the file. Returns { counts: { cases: [run, passed], … },
 * handlerRuns, expectedRuns, failures }.
 */
export async function runHttpVectors(api, doc) {
  const counts = Object.fromEntries(LISTS.map((l) => [l, [0, 0]]));
  const tally = (list, passed) => {
    counts[list][0] += 1;
    counts[list][1] += passed ? 1 : 0;
  };
  const failures = [];
  let handlerRuns = 0;
  const reports = [];
  const secret = doc.secret_hex;

  for (const kase of doc.cases) {
    const before = failures.length;
    const endpoint = endpointOf(api, secret, kase.endpoint);
    const clock = { now: 0, fails: { claim: 0, finish: 0, unavailable: false } };
    const guard = api.createGuard({
      store: failingStore(api.memoryStore(), clock.fails),
      endpoint,
      releaseStatuses: kase.release_statuses,
      now: () => clock.now,
      // The injected store failures and the throwing handlers are reported here, not logged.
      onError: (error, context) => reports.push(context.phase),
    });
    if (endpoint.headerName !== kase.header_name) {
      failures.push(`${kase.name}: header-name: want ${JSON.stringify(kase.header_name)}, got ${JSON.stringify(endpoint.headerName)}`);
    }
    for (const [i, step] of kase.steps.entries()) {
      const at = `${kase.name}#${i + 1}`;
      let problems;
      try {
        const trace = await runStep(guard, clock, kase.header_name, step, at);
        if (trace.ran) handlerRuns += 1;
        problems = stepProblems(step, trace, at);
      } catch (e) {
        problems = [message(e)];
      }
      tally('steps', problems.length === 0);
      if (problems.length > 0) failures.push(`${at}: ${problems.join('\n    ')}`);
    }
    endpoint.dispose?.();
    tally('cases', failures.length === before);
  }

  for (const [i, f] of doc.fingerprints.entries()) {
    const at = `fingerprints[${i}] (${f.comment})`;
    let problems = [];
    try {
      const endpoint = endpointOf(api, secret, defaults('stripe', f.policies));
      const a = guarded(
        endpoint.admit(
          {
            tenantId: f.tenant,
            method: f.method,
            route: f.route,
            keyValues: [PROBE_KEY],
            contentType: f.content_type ?? undefined,
            body: bytesOf(f, 'body', 'body_hex', at),
          },
          0,
        ),
      );
      endpoint.dispose?.();
      if (a.fingerprint !== f.fingerprint) problems.push(`fingerprint: want ${f.fingerprint}, got ${a.fingerprint}`);
      if (a.tenantId !== f.tenant || a.actionType !== f.action_type) {
        problems.push(`attempt: want ${f.tenant} / ${f.action_type}, got ${a.tenantId} / ${a.actionType}`);
      }
    } catch (e) {
      problems = [message(e)];
    }
    tally('fingerprints', problems.length === 0);
    if (problems.length > 0) failures.push(`${at}: ${problems.join('; ')}`);
  }

  for (const [i, s] of doc.storage_keys.entries()) {
    const at = `storage_keys[${i}] (${s.comment})`;
    let problems = [];
    try {
      const endpoint = endpointOf(api, secret, defaults(s.profile));
      const a = guarded(
        endpoint.admit(
          { tenantId: s.tenant, method: 'POST', route: STORAGE_KEY_ROUTE, keyValues: [s.header_value], body: new Uint8Array(0) },
          0,
        ),
      );
      endpoint.dispose?.();
      if (a.key !== s.storage_key) problems.push(`storage key: want ${s.storage_key}, got ${a.key}`);
    } catch (e) {
      problems = [message(e)];
    }
    tally('storage keys', problems.length === 0);
    if (problems.length > 0) failures.push(`${at}: ${problems.join('; ')}`);
  }

  const calls = { 'too-large': 'tooLarge', unavailable: 'unavailable', failed: 'failed' };
  for (const [i, a] of doc.endpoint_answers.entries()) {
    const at = `endpoint_answers[${i}] (${a.comment})`;
    let problems;
    try {
      const endpoint = endpointOf(api, secret, a.endpoint);
      const method = calls[a.call];
      if (method === undefined) throw new Error(`unknown call ${a.call}`);
      problems = replyDiff(a.expect, endpoint[method](a.now), at);
      endpoint.dispose?.();
    } catch (e) {
      problems = [message(e)];
    }
    tally('endpoint answers', problems.length === 0);
    if (problems.length > 0) failures.push(`${at}: ${problems.join('\n    ')}`);
  }

  const expectedRuns = doc.cases.reduce((n, c) => n + c.steps.filter((s) => s.expect.ran).length, 0);
  // Every injected store failure and every handler that failed is reported,
  // once: a claim failure as 'claim', each failed finishing write as
  // 'complete', a throw (or a raised non-4xx) as 'handler'.
  const want = { claim: 0, complete: 0, handler: 0 };
  for (const c of doc.cases) {
    for (const s of c.steps) {
      if ((s.store_fails?.claim ?? 0) > 0) want.claim += 1;
      if (s.expect.ran) want.complete += s.store_fails?.finish ?? 0;
      if (s.expect.kind === 'failed') want.handler += 1;
    }
  }
  const got = { claim: 0, complete: 0, handler: 0 };
  for (const phase of reports) got[phase] = (got[phase] ?? 0) + 1;
  if (failures.length === 0 && JSON.stringify(got) !== JSON.stringify(want)) {
    failures.push(`onError heard ${JSON.stringify(got)}, the vectors imply ${JSON.stringify(want)}`);
  }
  if (failures.length === 0 && handlerRuns !== expectedRuns) {
    failures.push(`the handler ran ${handlerRuns} times, the vectors say ${expectedRuns}`);
  }
  return { counts, handlerRuns, expectedRuns, failures };
}

/** The one-line summary every runner prints. */
export function httpSummary(runtime, result) {
  const parts = LISTS.map((l) => `${result.counts[l][1]}/${result.counts[l][0]} ${l}`);
  parts[1] += ` (${result.handlerRuns} handler runs)`;
  return `${runtime}: http vectors: ${parts.join(', ')} passed`;
}

/**
 * Alters three vectors (a replayed body, a handler run, a fingerprint) of a copy
 * of the file and runs them: the runner must report each. Returns problems
 * (none when the runner caught all three).
 */
export async function httpCanary(api, doc) {
  const altered = JSON.parse(JSON.stringify(doc));
  altered.cases = altered.cases.slice(0, 2);
  altered.cases[0].steps[1].expect.body += ' ';
  altered.cases[1].steps[0].expect.ran = false;
  altered.fingerprints = altered.fingerprints.slice(0, 1);
  altered.fingerprints[0].fingerprint = '0'.repeat(64);
  altered.storage_keys = altered.storage_keys.slice(0, 1);
  altered.endpoint_answers = altered.endpoint_answers.slice(0, 1);
  const result = await runHttpVectors(api, altered);
  const problems = [];
  if (result.failures.length !== 3) {
    problems.push(`the canary run on 3 altered vectors reported ${result.failures.length} failures:\n${result.failures.join('\n')}`);
  }
  if (result.counts.cases[1] !== 0 || result.counts.fingerprints[1] !== 0) problems.push('the canary run passed an altered vector');
  if (result.counts['storage keys'][1] !== 1 || result.counts['endpoint answers'][1] !== 1) {
    problems.push('the canary run failed an unaltered vector');
  }
  return problems;
}
