// HTTP middleware for node:http and Express-style `(req, res, next)` handlers.
//
// It reads the idempotency key from a header, fingerprints the request body
// through the keyer, claims the key, and either runs the handler (capturing
// what it writes, finishing the record with it, then sending it) or answers
// without running it: the stored response again (with `Idempotent-Replayed:
// true`), or the core's 409 / 422 problem+json. A missing key gets the core's
// 400 problem+json. Every answer body and status comes from the core, and so
// does what the handler's answer means: a 429 or 503 (the guard's release
// statuses) releases the claim, so a retry runs the handler again; any other
// answer is stored and replayed. A handler that throws leaves the record in
// flight (409 on repeat) until recovery settles it.
import { claims } from './node-core.js';
import { createGuard } from './guard.js';

const DEFAULT_LIMIT = 1024 * 1024;

function headerValue(req, header) {
  const value = req.headers?.[header.toLowerCase()];
  if (Array.isArray(value)) return value.join(', ');
  return typeof value === 'string' ? value : '';
}

/** Sends a core answer (and the replayable headers it carries). */
function send(res, answer) {
  const body = Buffer.from(answer.body, 'utf8');
  res.statusCode = answer.status;
  for (const [name, value] of answer.headers ?? []) res.setHeader(name, value);
  if (answer.contentType !== '') res.setHeader('Content-Type', answer.contentType);
  if (answer.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.setHeader('Content-Length', body.length);
  res.end(body);
}

function tooLarge(limit) {
  const e = new Error(`intentkey: the request body is larger than ${limit} bytes`);
  e.status = 413;
  e.statusCode = 413;
  e.expose = true;
  return e;
}

/**
 * The request body as text: a body parser's raw text if one kept it
 * (`req.rawBody`), a text or Buffer `req.body`, or else read from the stream here
 * (then kept as `req.rawBody`, and as `req.body` when nothing had set it).
 * A parsed object `req.body` is returned as is (the keyer writes it as JSON).
 */
async function readBody(req, limit) {
  const decode = (buf) => new TextDecoder('utf-8', { fatal: true }).decode(buf);
  if (typeof req.rawBody === 'string') return req.rawBody;
  if (req.rawBody instanceof Uint8Array) return decode(req.rawBody);
  if (typeof req.body === 'string') return req.body;
  if (req.body instanceof Uint8Array) return decode(req.body);
  if (req.body !== undefined && req.body !== null && typeof req.body === 'object' && req.readableEnded !== false) {
    return req.body;
  }
  const chunks = await new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk) => {
      if (over) return; // keep draining, so the answer can still be sent
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      size += buf.length;
      if (size > limit) {
        over = true;
        parts.length = 0;
        reject(tooLarge(limit));
        return;
      }
      parts.push(buf);
    });
    req.once('end', () => resolve(parts));
    req.once('error', reject);
  });
  const text = decode(Buffer.concat(chunks));
  req.rawBody = text;
  if (req.body === undefined) req.body = text;
  return text;
}

function toBuffer(chunk, encoding) {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError('response chunks must be strings or bytes');
}

/** The stored headers besides Content-Type: Location, when it is one plain value. */
function replayable(res) {
  const location = res.getHeader('location');
  return typeof location === 'string' ? [['Location', location]] : [];
}

/**
 * Holds back what the handler writes to `res` until the record is finished.
 * `done` resolves with the response once the handler ends it, and rejects when
 * the handler failed (fail()).
 */
function capture(res) {
  const names = ['writeHead', 'write', 'end'];
  const saved = names.map((n) => [n, Object.prototype.hasOwnProperty.call(res, n), res[n]]);
  const chunks = [];
  let finish;
  let failWith;
  let callbacks = [];
  let settled = false;
  const done = new Promise((resolve, reject) => {
    finish = resolve;
    failWith = reject;
  });

  res.writeHead = function writeHead(status, reason, headers) {
    if (typeof reason !== 'string') {
      headers = reason;
      reason = undefined;
    }
    res.statusCode = status;
    if (reason !== undefined) res.statusMessage = reason;
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    }
    return res;
  };
  res.write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    if (chunk !== undefined && chunk !== null) chunks.push(toBuffer(chunk, encoding));
    if (typeof cb === 'function') callbacks.push(cb);
    return true;
  };
  res.end = function end(chunk, encoding, cb) {
    if (typeof chunk === 'function') [cb, chunk] = [chunk, undefined];
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    if (chunk !== undefined && chunk !== null) chunks.push(toBuffer(chunk, encoding));
    if (typeof cb === 'function') callbacks.push(cb);
    if (settled) return res;
    settled = true;
    const contentType = res.getHeader('content-type');
    finish({
      status: res.statusCode,
      contentType: contentType === undefined ? '' : String(contentType),
      headers: replayable(res),
      body: Buffer.concat(chunks).toString('utf8'),
    });
    return res;
  };

  /** The handler failed: no response is stored, the record stays in flight. */
  function fail(error) {
    if (settled) return false;
    settled = true;
    restore();
    failWith(error);
    return true;
  }

  function restore() {
    for (const [name, own, fn] of saved) {
      if (own) res[name] = fn;
      else delete res[name];
    }
  }

  /** Sends what the handler wrote, as it wrote it. */
  function flush() {
    restore();
    const cbs = callbacks;
    callbacks = [];
    res.end(Buffer.concat(chunks), () => {
      for (const cb of cbs) cb();
    });
  }

  return { done, restore, flush, fail };
}

/**
 * Idempotency middleware.
 * @param {{
 *   guard?: ReturnType<typeof createGuard>,
 *   store?: object,
 *   keyer?: object,
 *   tenantId: string | ((req: any) => string | Promise<string>),
 *   actionType?: string | ((req: any) => string | Promise<string>),
 *   header?: string,
 *   required?: boolean,
 *   limit?: number,
 *   payload?: (req: any, body: unknown) => unknown,
 * }} options
 * @returns {(req: any, res: any, next: (err?: unknown) => void) => void}
 */
export function idempotency(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('idempotency takes an options object');
  const guard = options.guard ?? createGuard({ store: options.store, keyer: options.keyer });
  if (guard.keyer === undefined || guard.keyer === null) {
    throw new TypeError('idempotency: the guard needs a keyer to fingerprint request bodies');
  }
  const header = options.header ?? 'Idempotency-Key';
  if (typeof header !== 'string' || header.length === 0) throw new TypeError('header must be a header name');
  const required = options.required ?? true;
  const limit = options.limit ?? DEFAULT_LIMIT;
  const { tenantId } = options;
  if (typeof tenantId !== 'string' && typeof tenantId !== 'function') {
    throw new TypeError('idempotency needs tenantId: a string, or a function of the request');
  }
  const actionType = options.actionType ?? ((req) => `${req.method} ${new URL(req.originalUrl ?? req.url ?? '/', 'http://x').pathname}`);
  const payloadOf = options.payload ?? ((req, body) => body);
  let missing = null;

  async function handle(req, res, next) {
    const key = headerValue(req, header);
    if (key === '') {
      if (!required) {
        next();
        return;
      }
      missing ??= claims.missingKeyAnswer(header);
      send(res, missing);
      return;
    }
    const body = await readBody(req, limit);
    const tenant = typeof tenantId === 'function' ? await tenantId(req) : tenantId;
    const action = typeof actionType === 'function' ? await actionType(req) : actionType;
    const payload = await payloadOf(req, body);

    let held = null;
    let result;
    try {
      result = await guard.run({ key, tenantId: tenant, actionType: action, payload }, (k) => {
        req.idempotencyKey = k;
        held = capture(res);
        req[HELD] = held;
        // A handler that throws, or (node:http style, where next is the handler)
        // returns a promise that rejects, failed: the record stays in flight.
        const ran = next();
        if (ran !== null && typeof ran === 'object' && typeof ran.then === 'function') {
          ran.then(undefined, (e) => held.fail(e));
        }
        return held.done;
      });
    } catch (e) {
      // Nothing was stored (the handler failed, or the store did): the record stays
      // in flight for recovery. An error Express already carries (onError) is not
      // passed on twice.
      held?.restore();
      if (e !== null && typeof e === 'object' && propagated.has(e)) return;
      throw e;
    } finally {
      if (held !== null) delete req[HELD];
    }
    // Owned: what the handler wrote goes out whatever finishing did (stored,
    // released for a retry, or superseded by a recovery).
    if (result.outcome === 'owned') held.flush();
    else send(res, { ...result.response, replayed: result.replayed });
  }

  const middleware = function idempotencyMiddleware(req, res, next) {
    handle(req, res, next).catch((e) => next(e));
  };
  /**
   * Express error middleware (app.use(guarded.onError) after the routes): a
   * handler that throws leaves its record in flight instead of having the error
   * page stored as its answer. The error goes on to the next error handler.
   */
  middleware.onError = function idempotencyOnError(err, req, res, next) {
    const held = req[HELD];
    if (held !== undefined && err !== null && typeof err === 'object') {
      propagated.add(err);
      held.fail(err);
    }
    next(err);
  };
  return middleware;
}

/** The capture of the request being handled (for onError). */
const HELD = Symbol('intentkey.held');
/** Errors Express is already passing along: not passed to next() again. */
const propagated = new WeakSet();
