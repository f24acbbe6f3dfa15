// intentkey/fastify: idempotency as a Fastify plugin that is not encapsulated (as
// fastify-plugin makes one, without the dependency), so its hooks apply to every
// route of the scope it is registered in. Thin: hooks read
// the request and write the reply; the shared pipeline (http/pipeline.js) does
// the rest.
//
//   preParsing  reads the raw body (up to maxBodyBytes, then stops) and gives the
//               bytes back to the payload stream, so Fastify's parsers read the
//               body as sent; a body past the limit is answered here (413, or
//               the key's 400), before anything else reads it;
//   preHandler  after validation (and whatever auth runs before it): the core
//               admits, the guard claims; a request that does not own the
//               effect gets its answer here and the handler does not run;
//   onError     a handler that throws: its outcome is unknown, unless the error
//               carries a 4xx statusCode (the core's released class);
//   onSend      the owner's answer (status, headers, the serialized payload) is
//               finished by its outcome class and sent as it is; after a throw,
//               the core's 500 (no stack trace) goes out instead and the record
//               stays in flight; after a throw with a 4xx statusCode, Fastify's
//               answer to it goes out, the claim is released and nothing stored.
//
// Body parsing and schema validation run before preHandler: a body Fastify
// refuses (400, 415) is answered before anything is claimed.
//
// The route is Fastify's route template (`request.routeOptions.url`). The owner's
// handler finds `request.idempotency = { key, tenantId }`. A route opts out with
// `config: { idempotency: false }`.
import { createPipeline, init } from '../http/node.js';
import { discardRest, peekBody } from '../http/node-body.js';
import { headerPairs } from '../http/pipeline.js';

export { init };

const EMPTY = new Uint8Array(0);
/** The body read in preParsing. */
const BODY = Symbol('intentkey.body');
/** The owned attempt in progress, and the error its handler threw. */
const TICKET = Symbol('intentkey.ticket');
const THROWN = Symbol('intentkey.thrown');
/**
 * The tenant of a body past the limit, answered in preParsing before the
 * tenant function can run: the core answers such a body from its key and size
 * alone (400 or 413), so no tenant is ever derived from it.
 */
const OVER_LIMIT_TENANT = 'intentkey:over-limit';
/** What Fastify's register() itself reads from a plugin's options, and passes on. */
const FASTIFY_REGISTER_OPTIONS = Object.freeze(['prefix', 'logLevel', 'logSerializers']);

/** Every value of a request header, one per header line. */
function headerValues(request, name) {
  const lower = name.toLowerCase();
  const raw = request.raw.rawHeaders;
  const values = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i].toLowerCase() === lower) values.push(raw[i + 1]);
  return values;
}

function pathOf(url) {
  const path = String(url ?? '/').split('?')[0];
  return path === '' ? '/' : path;
}

/** Fastify's route template, else the path (no route matched). */
function defaultRoute(request) {
  const template = request.routeOptions?.url;
  return typeof template === 'string' && template.length > 0 ? template : pathOf(request.url);
}

/** Sends a core reply from a hook. */
function send(reply, r) {
  reply.code(r.status);
  const grouped = new Map();
  for (const [name, value] of r.headers) {
    const key = name.toLowerCase();
    const entry = grouped.get(key);
    if (entry === undefined) grouped.set(key, [name, [value]]);
    else entry[1].push(value);
  }
  for (const [name, values] of grouped.values()) reply.header(name, values.length === 1 ? values[0] : values);
  reply.send(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
  return reply;
}

/** The serialized payload onSend gets, as bytes (a stream is read whole). */
async function payloadBytes(payload) {
  if (payload === null || payload === undefined) return { bytes: EMPTY, payload };
  if (typeof payload === 'string') return { bytes: new TextEncoder().encode(payload), payload };
  if (payload instanceof Uint8Array) {
    return { bytes: new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength), payload };
  }
  if (typeof payload.pipe === 'function' || typeof payload[Symbol.asyncIterator] === 'function') {
    const chunks = [];
    for await (const chunk of payload) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    const buf = Buffer.concat(chunks);
    return { bytes: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), payload: buf };
  }
  throw new TypeError('intentkey: onSend got a payload that is neither text, bytes nor a stream');
}

/**
 * The plugin. Options: see fastify.d.ts (secret and store are required).
 * @param {import('fastify').FastifyInstance} fastify
 * @param {import('./fastify.d.ts').FastifyIdempotencyOptions} options
 */
async function intentkeyPlugin(fastify, options) {
  const pipeline = createPipeline(options, 'the intentkey Fastify plugin', FASTIFY_REGISTER_OPTIONS);
  const { endpoint } = pipeline;
  const applies = (request) => pipeline.guards(request.method) && request.routeOptions?.config?.idempotency !== false;

  /**
   * Serves the request through the pipeline; when retries wait for the first
   * attempt, the wait is cancelled if the client goes away (the response
   * closes before it was written).
   */
  async function serveOrAbandon(request, res) {
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

  fastify.decorateRequest('idempotency', null);
  fastify.decorate('intentkey', Object.freeze({ endpoint, guard: pipeline.guard }));

  fastify.addHook('preParsing', async (request, reply, payload) => {
    if (!applies(request)) return payload;
    const { body, over } = await peekBody(payload, pipeline.maxBodyBytes);
    if (over) {
      const admission = pipeline.admit({
        tenantId: OVER_LIMIT_TENANT,
        method: request.method,
        route: defaultRoute(request),
        keyValues: headerValues(request, endpoint.headerName),
        contentType: request.headers['content-type'],
        body,
      });
      if (admission.tag !== 'unguarded') {
        send(reply, admission.tag === 'reply' ? admission.reply : endpoint.tooLarge(pipeline.now()));
        // Nothing reads the body now: the rest of it is dropped, so the
        // connection serves the next request.
        discardRest(payload, reply.raw);
        return reply;
      }
      // No key, and keys are optional: unguarded, the body is Fastify's to read.
      request[BODY] = null;
      return payload;
    }
    request[BODY] = body;
    return payload;
  });

  fastify.addHook('preHandler', async (request, reply) => {
    if (!applies(request)) return;
    const body = request[BODY];
    if (body === null) return; // unguarded: decided in preParsing
    const route = await pipeline.routeOf(defaultRoute(request), request);
    const tenantId = await pipeline.tenantOf(request);
    const served = await serveOrAbandon(
      {
        tenantId,
        method: request.method,
        route,
        keyValues: headerValues(request, endpoint.headerName),
        contentType: request.headers['content-type'],
        body: body ?? EMPTY,
      },
      reply.raw,
    );
    // 'aborted': the client went away while the request waited for the first
    // attempt; the core's 409 ends the hook chain (the handler must not run).
    if (served.tag === 'reply' || served.tag === 'aborted') return send(reply, served.reply);
    if (served.tag === 'unguarded') return;
    request.idempotency = served.ticket.idempotency;
    request[TICKET] = served.ticket;
  });

  fastify.addHook('onError', async (request, reply, error) => {
    const ticket = request[TICKET];
    if (ticket !== undefined && !ticket.settled && request[THROWN] === undefined) request[THROWN] = error;
  });

  fastify.addHook('onSend', async (request, reply, payload) => {
    const ticket = request[TICKET];
    if (ticket === undefined || ticket.settled) return payload;
    if (request[THROWN] !== undefined) {
      const raised = await ticket.raise(request[THROWN], (message, error) => request.log.error({ err: error }, message));
      // Released (a 4xx): Fastify's answer to the error goes out, unstored.
      if (raised.path === 'released') return payload;
      const failed = raised.reply;
      for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
      reply.code(failed.status);
      for (const [name, value] of failed.headers) reply.header(name, value);
      return Buffer.from(failed.body.buffer, failed.body.byteOffset, failed.body.byteLength);
    }
    const { bytes, payload: out } = await payloadBytes(payload);
    await ticket.answer({
      status: reply.statusCode,
      headers: headerPairs(Object.entries(reply.getHeaders())),
      body: bytes,
    });
    return out;
  });
}

// What fastify-plugin sets, written out so that the package needs nothing but
// Fastify itself: not encapsulated (skip-override), a name, and the Fastify
// versions it runs on (plugin-meta, which Fastify checks at register()).
intentkeyPlugin[Symbol.for('skip-override')] = true;
intentkeyPlugin[Symbol.for('fastify.display-name')] = 'intentkey';
intentkeyPlugin[Symbol.for('plugin-meta')] = Object.freeze({ fastify: '>=4', name: 'intentkey' });

/** The Fastify plugin: `await app.register(intentkey, { secret, store, … })`. */
export const intentkey = intentkeyPlugin;
export default intentkey;
