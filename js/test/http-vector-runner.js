// The HTTP conformance vector runner (tests/vectors/http/http_test.json), shared
// by Node (http-vectors.test.js), Chromium (browser/http-vectors-page.js) and any
// other runtime (Bun, Deno, workerd): no Node or DOM APIs here, and the package is
// a parameter, not an import. It follows the adapter pipeline every runner follows
// (tests/vectors/README.md, "HTTP vectors"; the Rust twin is crates/vectors/src/http.rs):
// admit through the endpoint, claim through a guard over a fresh memory store per
// case, answer(outcome), run the handler when owned, finish by outcome class. Each
// step compares the path taken, whether the handler ran, the status, the exact
// header list and the exact body bytes; the fingerprints, storage keys and the
// endpoint's fixed answers are checked through the endpoint.
//
// The API: { createEndpoint, createGuard, memoryStore } (the package's).

export const SCHEMA = 'intentkey_http_vectors_v1';
export const KINDS = ['handler', 'failed', 'unguarded', 'replay', 'in-flight', 'payload-conflict', 'refused'];
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

/** Thrown by a handler whose vector says "throws". */
class HandlerThrew extends Error {}

/** The adapter pipeline for one step: { kind, ran, reply, finished }. */
async function runStep(endpoint, guard, clock, headerName, step, at) {
  const now = step.now;
  clock.now = now;
  const { request, handler } = step;
  const name = headerName.toLowerCase();
  const keyValues = request.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  const typeHeader = request.headers.find(([n]) => n.toLowerCase() === 'content-type');
  const admission = endpoint.admit(
    {
      tenantId: request.tenant,
      method: request.method,
      route: request.route,
      keyValues,
      contentType: typeHeader === undefined ? undefined : typeHeader[1],
      body: bytesOf(request, 'body', 'body_hex', `${at}.request`),
    },
    now,
  );
  if (admission.tag === 'refused') return { kind: 'refused', ran: false, reply: admission.reply, finished: null };
  if (admission.tag === 'unguarded') {
    if (handler === 'throws') throw new Error('the handler of an unguarded step throws: the vectors never do that');
    return { kind: 'unguarded', ran: true, reply: asIs(handler, `${at}.handler`), finished: null };
  }
  if (admission.tag !== 'guarded') throw new Error(`admit gave an unknown admission ${admission.tag}`);
  const { attempt } = admission;
  let ran = false;
  let ownedAnswer;
  const threw = new HandlerThrew('the handler failed');
  let result;
  try {
    result = await guard.run(
      { key: attempt.key, tenantId: attempt.tenantId, actionType: attempt.actionType, fingerprint: attempt.fingerprint },
      async () => {
        ran = true;
        ownedAnswer = endpoint.answer('owned', now);
        if (handler === 'throws') throw threw;
        return {
          status: handler.status,
          contentType: handler.content_type,
          headers: pairs(handler.headers),
          body: bytesOf(handler, 'body', 'body_hex', `${at}.handler`),
        };
      },
    );
  } catch (e) {
    if (e !== threw) throw e;
    if (ownedAnswer !== null) throw new Error('answer(owned) gave a reply; an owned attempt runs the handler');
    // The guard finished with `failed` and rethrew: the record must be left in flight.
    const record = await guard.inspect(attempt.key);
    const finished = record !== null && record.status === 'in_flight' ? 'left-in-flight' : `record ${record?.status}`;
    return { kind: 'failed', ran, reply: endpoint.failed(now), finished };
  }
  if (result.outcome === 'owned') {
    if (ownedAnswer !== null) throw new Error(`answer(owned) gave a ${ownedAnswer.status} reply; an owned attempt runs the handler`);
    return { kind: 'handler', ran, reply: asIs(handler, `${at}.handler`), finished: result.finished };
  }
  const outcome = result.outcome === 'done' ? { outcome: 'done', response: result.response } : result.outcome;
  const reply = endpoint.answer(outcome, now);
  if (reply === null || reply === undefined) throw new Error(`answer(${result.outcome}) gave no reply; only an owned attempt gets none`);
  const kind = { done: 'replay', 'in-flight': 'in-flight', 'payload-conflict': 'payload-conflict' }[result.outcome];
  if (kind === undefined) throw new Error(`the claim gave an unknown outcome ${result.outcome}`);
  return { kind, ran, reply, finished: null };
}

function stepProblems(kase, step, trace, at) {
  const out = [];
  const { expect } = step;
  if (trace.kind !== expect.kind) out.push(`path: want ${expect.kind}, got ${trace.kind}`);
  if (trace.ran !== expect.ran) out.push(`handler ran: want ${expect.ran}, got ${trace.ran}`);
  out.push(...replyDiff(expect, trace.reply, at));
  let wantFinished = null;
  if (trace.kind === 'handler') wantFinished = kase.release_statuses.includes(step.handler.status) ? 'released' : 'stored';
  else if (trace.kind === 'failed') wantFinished = 'left-in-flight';
  if ((trace.finished ?? null) !== wantFinished) out.push(`finish: want ${wantFinished}, got ${trace.finished}`);
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
  const secret = doc.secret_hex;

  for (const kase of doc.cases) {
    const before = failures.length;
    const endpoint = endpointOf(api, secret, kase.endpoint);
    const clock = { now: 0 };
    const guard = api.createGuard({
      store: api.memoryStore(),
      endpoint,
      releaseStatuses: kase.release_statuses,
      now: () => clock.now,
    });
    if (endpoint.headerName !== kase.header_name) {
      failures.push(`${kase.name}: header-name: want ${JSON.stringify(kase.header_name)}, got ${JSON.stringify(endpoint.headerName)}`);
    }
    for (const [i, step] of kase.steps.entries()) {
      const at = `${kase.name}#${i + 1}`;
      let problems;
      try {
        const trace = await runStep(endpoint, guard, clock, kase.header_name, step, at);
        if (trace.ran) handlerRuns += 1;
        problems = stepProblems(kase, step, trace, at);
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
