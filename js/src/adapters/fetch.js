// intentkey/fetch: idempotency for web-standard handlers, `(request: Request,
// ...rest) => Response`, as in Hono, Bun, Deno and Cloudflare Workers. Nothing
// here imports from Node: the entry that binds it to a component (fetch-node.js,
// fetch-browser.js) chooses where the core modules come from.
//
//   withIdempotency(handler, options)  wraps a fetch handler (Hono's app.fetch,
//                                      a Bun or Deno server's, a Worker's);
//   idempotency(options)               the same as a Hono middleware;
//   idempotencyOf(request)             { key, tenantId } of the request the owner's
//                                      handler is running, else undefined (under
//                                      Hono also c.get('idempotency')).
//
// The body is read from a clone of the request (up to maxBodyBytes, then the
// reading stops), so the handler reads the request body as sent. The owner's
// Response is read whole, finished by its outcome class, and sent again as it
// was; a handler that throws gets the core's 500 (no stack trace) and leaves the
// record in flight. An error with a 4xx status (Hono's HTTPException(400)) is
// the core's released class: under Hono its answer (app.onError's) goes out
// unstored; from a plain fetch handler the error is thrown on; either way the
// claim is released, so a retry runs again. Every other answer is the core's
// (http/pipeline.js).

const EMPTY = new Uint8Array(0);
/** Statuses whose responses have no body (the Response constructor refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** The owner's context of each request being handled. */
const contexts = new WeakMap();

/** { key, tenantId } while the owner's handler runs for `request`, else undefined. */
export function idempotencyOf(request) {
  return contexts.get(request);
}

/** The value of a request header as one line (the fetch API joins repeated ones). */
function headerValues(request, name) {
  const value = request.headers.get(name);
  return value === null ? [] : [value];
}

/**
 * A request body read from a clone, up to `max` bytes (stopping once past it).
 * The request itself keeps its body for the handler.
 */
async function peekBody(request, max) {
  if (request.body === null || request.body === undefined) return EMPTY;
  if (request.bodyUsed) return null;
  const reader = request.clone().body.getReader();
  const chunks = [];
  let size = 0;
  let over = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
      if (size > max) {
        over = true;
        break;
      }
    }
  } finally {
    if (over) reader.cancel().catch(() => {});
  }
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.byteLength;
  }
  return body;
}

/** A core reply as a Response. */
function toResponse(reply) {
  const body = NULL_BODY.has(reply.status) ? null : reply.body;
  return new Response(body, { status: reply.status, headers: reply.headers });
}

/** The handler's Response read whole: what is stored, and the same Response to send. */
async function captureResponse(response) {
  if (!(response instanceof Response)) {
    throw new TypeError('intentkey: the handler must answer a Response');
  }
  const body = response.body === null ? EMPTY : new Uint8Array(await response.arrayBuffer());
  const headers = [...response.headers];
  const again = new Response(NULL_BODY.has(response.status) ? null : body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  return { captured: { status: response.status, headers, body }, response: again };
}

function pathOf(request) {
  return new URL(request.url).pathname;
}

/** Hono's route template: the last matched route's (the handler's), unless it is a wildcard. */
function honoRoute(c) {
  const routes = c.req.matchedRoutes;
  const path = Array.isArray(routes) && routes.length > 0 ? routes[routes.length - 1].path : undefined;
  return typeof path === 'string' && path.length > 0 && !path.includes('*') ? path : pathOf(c.req.raw);
}

/**
 * The fetch adapter over one pipeline maker (see fetch-node.js).
 * @param {(options: object, adapter: string) => any} createPipeline
 */
export function fetchAdapter(createPipeline) {
  /**
   * Runs one request through the pipeline: `run(context)` runs the handler
   * (when the attempt owns the effect, or runs unguarded) and answers
   * { response } or { error }.
   */
  async function guarded(pipeline, request, { tenantArgs, route, body }, run) {
    const tenantId = await pipeline.tenantOf(...tenantArgs);
    const served = await pipeline.serve(
      {
        tenantId,
        method: request.method,
        route,
        keyValues: headerValues(request, pipeline.endpoint.headerName),
        contentType: request.headers.get('content-type') ?? undefined,
        body,
      },
      // A wait for the first attempt ends when the client goes away (the
      // request's signal aborts): the core's 409 is answered to nobody.
      pipeline.waits ? (request.signal ?? undefined) : undefined,
    );
    if (served.tag === 'reply' || served.tag === 'aborted') return { response: toResponse(served.reply) };
    if (served.tag === 'unguarded') return { unguarded: true };
    const { ticket } = served;
    contexts.set(request, ticket.idempotency);
    let outcome;
    try {
      outcome = await run(ticket.idempotency);
    } catch (error) {
      outcome = { error };
    } finally {
      contexts.delete(request);
    }
    if (outcome.error !== undefined) {
      const raised = await ticket.raise(outcome.error);
      if (raised.path !== 'released') return { response: toResponse(raised.reply) };
      // Released (a 4xx): the framework's answer to the error (Hono's c.res)
      // goes out unstored, else the error is thrown on.
      if (outcome.response === undefined) throw outcome.error;
      return { response: outcome.response };
    }
    let captured;
    try {
      captured = await captureResponse(outcome.response);
    } catch (error) {
      return { response: toResponse((await ticket.raise(error)).reply) };
    }
    await ticket.answer(captured.captured);
    return { response: captured.response };
  }

  /**
   * Wraps a fetch handler: `(request, ...rest) => Promise<Response>`.
   * @param {(request: Request, ...rest: any[]) => Response | Promise<Response>} handler
   * @param {object} options see fetch.d.ts (secret and store are required)
   */
  function withIdempotency(handler, options) {
    if (typeof handler !== 'function') throw new TypeError('withIdempotency(handler, options): handler must be a function');
    const pipeline = createPipeline(options, 'withIdempotency()');
    return async function idempotentFetch(request, ...rest) {
      if (!pipeline.guards(request.method)) return handler(request, ...rest);
      const route = await pipeline.routeOf(pathOf(request), request, ...rest);
      const body = await peekBody(request, pipeline.maxBodyBytes);
      const out = await guarded(pipeline, request, { tenantArgs: [request, ...rest], route, body: body ?? EMPTY }, async () => ({
        response: await handler(request, ...rest),
      }));
      return out.unguarded ? handler(request, ...rest) : out.response;
    };
  }

  /**
   * A Hono middleware: `app.post('/orders', idempotency(options), handler)` or
   * `app.use('/api/*', idempotency(options))`. The route is the handler's
   * template; the owner's handler finds c.get('idempotency').
   * @param {object} options see fetch.d.ts (secret and store are required)
   */
  function idempotency(options) {
    const pipeline = createPipeline(options, 'idempotency()');
    return async function intentkeyMiddleware(c, next) {
      const request = c.req.raw;
      if (!pipeline.guards(request.method)) return next();
      const route = await pipeline.routeOf(honoRoute(c), c);
      let body = await peekBody(request, pipeline.maxBodyBytes);
      // Read by a middleware before this one: Hono has it cached (a parsed JSON
      // body comes back as JSON.stringify writes it).
      if (body === null) body = new Uint8Array(await c.req.arrayBuffer());
      const out = await guarded(pipeline, request, { tenantArgs: [c], route, body }, async (context) => {
        c.set('idempotency', context);
        let thrown;
        try {
          await next();
        } catch (e) {
          thrown = { error: e };
        }
        if (thrown !== undefined) return thrown;
        // Hono catches a handler's Error, answers with app.onError and keeps it in c.error.
        if (c.error !== undefined && c.error !== null) return { error: c.error, response: c.res };
        return { response: c.res };
      });
      if (out.unguarded) return next();
      c.res = undefined; // so that Hono does not merge the handler's headers into the answer
      c.res = out.response;
      return undefined;
    };
  }

  return { withIdempotency, idempotency, idempotencyOf };
}
