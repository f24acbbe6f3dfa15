// intentkey/express: idempotency middleware for Express (4 and 5) and for plain
// node:http `(req, res, next)` handlers. Thin: it reads the request, runs the
// shared pipeline (http/pipeline.js: the core's serve flow admits, claims,
// captures, finishes and answers) and writes the reply.
//
// The body is fingerprinted as it was sent. Mounted before the body parsers (the
// recommended place), the middleware reads the raw stream itself and gives the
// bytes back to it, so express.json() and the handler after it read the body as
// usual. Mounted after a parser, it takes `req.rawBody` when the parser kept it
// (express.json({ verify: (req, res, buf) => { req.rawBody = buf } })), else the
// parsed `req.body`: bytes or text as they are, an object as JSON.stringify
// writes it (application/json, which the core canonicalizes by RFC 8785 anyway).
//
// The owner's handler runs with `req.idempotency = { key, tenantId }` (the
// tenant-scoped storage key). What it writes is held back until the record is
// finished, then sent as written. A handler that throws leaves the record in
// flight and the client gets the core's 500 (no stack trace): under Express,
// add `app.use(guarded.onError)` after the routes so that a route's throw is
// seen (otherwise Express's own error page would be stored as the answer).
// An error that carries a 4xx status (express.json()'s 400 for a body such as
// `false`, an http-errors error) is the core's `released` class: onError hands
// it on to the next error handler, whose answer goes out unstored, and the
// claim is released, so a retry runs again instead of getting 409.
import { createPipeline, init } from '../http/node.js';
import { discardRest, peekBody, unread } from '../http/node-body.js';
import { errorStatus as errorStatusOf, headerPairs } from '../http/pipeline.js';

export { init };

const EMPTY = new Uint8Array(0);
const encoder = new TextEncoder();

/** The capture of the request being handled (for onError). */
const HELD = Symbol('intentkey.held');

/**
 * Serves the request through the pipeline; when retries wait for the first
 * attempt, the wait is cancelled if the client goes away (the response closes
 * before it was written): the flow is abandoned, nothing is sent.
 */
async function serveOrAbandon(pipeline, request, res) {
  if (!pipeline.waits) return pipeline.serve(request);
  const aborter = new AbortController();
  const onClose = () => {
    if (!res.writableEnded) aborter.abort(new Error('intentkey: the client closed the connection'));
  };
  res.once('close', onClose);
  try {
    return await pipeline.serve(request, aborter.signal);
  } finally {
    res.off('close', onClose);
  }
}

/** Every value of a request header, one per header line (duplicates kept: the core refuses them). */
function headerValues(req, name) {
  const lower = name.toLowerCase();
  const raw = req.rawHeaders;
  if (Array.isArray(raw)) {
    const values = [];
    for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i].toLowerCase() === lower) values.push(raw[i + 1]);
    return values;
  }
  const value = req.headers?.[lower];
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [String(value)];
}

/** The path of a request URL, as sent (no query). */
function pathOf(url) {
  const path = String(url ?? '/').split('?')[0];
  return path === '' ? '/' : path;
}

/** Express's route template (`/orders/:id`, under the router's mount path), else the path. */
function defaultRoute(req) {
  const template = req.route?.path;
  if (typeof template === 'string' && template.length > 0) return `${req.baseUrl ?? ''}${template}`;
  return pathOf(req.originalUrl ?? req.url);
}

const view = (b) => (Object.getPrototypeOf(b) === Uint8Array.prototype ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength));

/** A body someone else read: raw bytes or text as they are, a parsed object as JSON. */
function parsedBody(value, contentType) {
  if (value instanceof Uint8Array) return { body: view(value), contentType };
  if (typeof value === 'string') return { body: encoder.encode(value), contentType };
  if (value !== null && typeof value === 'object') {
    return { body: encoder.encode(JSON.stringify(value)), contentType: 'application/json' };
  }
  return { body: EMPTY, contentType };
}

/** The request body to fingerprint: { body, contentType, peeked? } (peeked: read from the stream and given back). */
async function requestBody(req, max) {
  const contentType = req.headers?.['content-type'];
  if (req.rawBody !== undefined && req.rawBody !== null) return parsedBody(req.rawBody, contentType);
  if (unread(req)) {
    const { body } = await peekBody(req, max);
    return { body, contentType, peeked: true };
  }
  if (req.body !== undefined) return parsedBody(req.body, contentType);
  return { body: EMPTY, contentType };
}

/** Writes a core reply. */
function send(res, reply) {
  res.statusCode = reply.status;
  const grouped = new Map();
  for (const [name, value] of reply.headers) {
    const key = name.toLowerCase();
    const entry = grouped.get(key);
    if (entry === undefined) grouped.set(key, [name, [value]]);
    else entry[1].push(value);
  }
  for (const [name, values] of grouped.values()) res.setHeader(name, values.length === 1 ? values[0] : values);
  const { body } = reply;
  res.setHeader('Content-Length', body.byteLength);
  res.end(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}

function toBuffer(chunk, encoding) {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError('response chunks must be strings or bytes');
}

/** The headers the handler set, with the names as it spelled them. */
function responseHeaders(res) {
  const names = typeof res.getRawHeaderNames === 'function' ? res.getRawHeaderNames() : res.getHeaderNames();
  return headerPairs(names.map((name) => [name, res.getHeader(name)]));
}

/**
 * Holds back what the handler writes to `res` until the record is finished.
 * When the handler ends the response, the ticket gets its answer: on a
 * synchronous store the record is finished inside end() and the answer sent
 * right after (`done` resolves with { sent: true }); otherwise `done` resolves
 * with { pending } (the finish in progress). A failure (fail()) resolves it
 * with { error, next } (next: the error handler's, when the error came
 * through onError).
 */
function capture(res, ticket) {
  const names = ['writeHead', 'write', 'end', 'flushHeaders'];
  const saved = names.map((n) => [n, Object.prototype.hasOwnProperty.call(res, n), res[n]]);
  const chunks = [];
  let size = 0;
  let settle;
  let callbacks = [];
  let settled = false;
  /** The answer is the framework's to an error of the released class: sent, not stored. */
  let released = false;
  const done = new Promise((resolve) => {
    settle = resolve;
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
  res.flushHeaders = function flushHeaders() {};
  res.write = function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    // Written after the answer was settled (a handler that went on after
    // res.end, or failed): not part of the answer; dropped.
    if (settled && !released) return false;
    if (chunk !== undefined && chunk !== null) {
      const buf = toBuffer(chunk, encoding);
      chunks.push(buf);
      size += buf.length;
    }
    if (typeof cb === 'function') callbacks.push(cb);
    return true;
  };
  res.end = function end(chunk, encoding, cb) {
    if (typeof chunk === 'function') [cb, chunk] = [chunk, undefined];
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    if (settled && !released) return res;
    if (chunk !== undefined && chunk !== null) {
      const buf = toBuffer(chunk, encoding);
      chunks.push(buf);
      size += buf.length;
    }
    if (typeof cb === 'function') callbacks.push(cb);
    if (released) {
      // The framework's answer to an error the core released the claim for: sent, not stored.
      flush();
      return res;
    }
    if (settled) return res;
    settled = true;
    // Express ends a response with one end(chunk): that chunk is the body.
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    const answered = ticket.answerNow({
      status: res.statusCode,
      headers: responseHeaders(res),
      body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
    });
    if (typeof answered.then !== 'function') {
      // Finished (stored, released or superseded) before a byte is sent.
      flush();
      settle({ sent: true });
      return res;
    }
    settle({ pending: answered });
    return res;
  };

  /** Sends what the handler wrote, as it wrote it. */
  function flush() {
    restore();
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
    const cbs = callbacks;
    callbacks = [];
    if (cbs.length === 0) res.end(body);
    else {
      res.end(body, () => {
        for (const cb of cbs) cb();
      });
    }
  }

  function restore() {
    for (const [name, own, fn] of saved) {
      if (own) res[name] = fn;
      else delete res[name];
    }
  }

  return {
    done,
    get settled() {
      return settled;
    },
    /**
     * An error the core released the claim for: what the handler wrote is
     * dropped, and the next error handler's answer is sent as it is, unstored.
     */
    answerUnstored() {
      released = true;
      chunks.length = 0;
      size = 0;
      callbacks = [];
      for (const name of res.getHeaderNames()) res.removeHeader(name);
    },
    ticket,
    /** The handler failed: nothing of what it wrote is sent or stored. */
    fail(error, next) {
      if (settled) return false;
      settled = true;
      settle({ error, next });
      return true;
    },
    flush,
    /** Sends `reply` instead of anything the handler set. */
    replace(reply) {
      restore();
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      send(res, reply);
    },
  };
}

/**
 * Idempotency middleware for Express and node:http.
 * @param {import('./express.d.ts').ExpressIdempotencyOptions} options
 * @returns {import('./express.d.ts').IdempotencyMiddleware}
 */
export function idempotency(options) {
  const pipeline = createPipeline(options, 'idempotency()');
  const { endpoint } = pipeline;

  /** A handler's error that came after its answer was settled: reported, not answered. */
  function late(taken, error, key = null) {
    if (!taken) pipeline.report(error, { phase: 'handler', key });
  }

  async function handle(req, res, next) {
    if (!pipeline.guards(req.method) || req[HELD] !== undefined) {
      next();
      return;
    }
    const keyValues = headerValues(req, endpoint.headerName);
    const route = await pipeline.routeOf(defaultRoute(req), req);
    const tenantId = await pipeline.tenantOf(req);
    const { body, contentType, peeked } = await requestBody(req, pipeline.maxBodyBytes);
    const served = await serveOrAbandon(pipeline, { tenantId, method: req.method, route, keyValues, contentType, body }, res);
    // The client went away while the request waited for the first attempt.
    if (served.tag === 'aborted') return;
    if (served.tag === 'reply') {
      send(res, served.reply);
      // Refused: nothing reads the body now. What is left of it (all of it
      // past the limit) is dropped, so the connection serves the next request.
      if (peeked === true) discardRest(req, res);
      return;
    }
    if (served.tag === 'unguarded') {
      next();
      return;
    }
    const { ticket } = served;
    req.idempotency = ticket.idempotency;
    const held = capture(res, ticket);
    req[HELD] = held;
    try {
      // A handler that throws, or (node:http style, where next is the handler)
      // returns a promise that rejects, failed: its outcome is unknown.
      const ran = next();
      if (ran !== null && typeof ran === 'object' && typeof ran.then === 'function') {
        ran.then(undefined, (e) => late(held.fail(e), e, req.idempotency?.key ?? null));
      }
    } catch (e) {
      late(held.fail(e), e, req.idempotency?.key ?? null);
    }
    const outcome = await held.done;
    if (outcome.sent === true) return;
    if (outcome.pending !== undefined) {
      // Owned: what the handler wrote goes out whatever finishing did (stored,
      // released for a retry, or superseded by a recovery).
      await outcome.pending;
      held.flush();
      return;
    }
    const raised = await ticket.raise(outcome.error);
    if (raised.path !== 'released') {
      held.replace(raised.reply);
    } else if (outcome.next !== undefined) {
      // Released: the next error handler answers, and its answer is not stored.
      held.answerUnstored();
      outcome.next(outcome.error);
    } else {
      held.replace({ status: errorStatusOf(outcome.error), headers: [], body: EMPTY });
    }
  }

  const middleware = function idempotencyMiddleware(req, res, next) {
    handle(req, res, next).catch((e) => next(e));
  };
  /**
   * Express error middleware (app.use(guarded.onError) after the routes): a
   * route that throws leaves its record in flight and gets the core's 500,
   * instead of having Express's error page stored as its answer. An error
   * with a 4xx status (a body parser's 400) releases the claim: it goes on to
   * the next error handler, whose answer is sent and not stored. Errors of
   * requests the middleware does not hold go on to the next error handler.
   */
  middleware.onError = function idempotencyOnError(err, req, res, next) {
    const held = req[HELD];
    if (held === undefined) {
      next(err);
      return;
    }
    // After the handler answered, its answer stands: the error is reported,
    // and no error page is written over (or after) the answer.
    late(held.fail(err, next), err, req.idempotency?.key ?? null);
  };
  middleware.endpoint = endpoint;
  middleware.guard = pipeline.guard;
  return middleware;
}

export default idempotency;
