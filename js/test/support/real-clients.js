// Real clients for the HTTP adapter tests: an undici client that retries as a
// production client does, a TCP proxy that drops the first response (the
// connection dies after the server has run the handler, before the client has
// the answer), and plain concurrent requests. Framework-independent: every
// adapter (Express, Fastify, the fetch wrapper under Hono) is served on a real
// port and driven the same way.
import net from 'node:net';
import { Agent, RetryAgent, request } from 'undici';

/**
 * A TCP proxy to `upstreamPort` that kills the first `drops` connections as
 * soon as the server's answer starts to arrive: the server has run the handler
 * and written its response, the client sees a reset connection.
 * @param {number} upstreamPort
 * @param {{ drops?: number }} [options]
 * @returns {Promise<{ port: number, dropped: () => number, close: () => Promise<void> }>}
 */
export async function droppingProxy(upstreamPort, { drops = 1 } = {}) {
  let dropped = 0;
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(upstreamPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    const dropThis = dropped < drops;
    client.on('error', () => {});
    upstream.on('error', () => {});
    client.pipe(upstream);
    upstream.on('data', (chunk) => {
      if (dropThis) {
        if (!client.destroyed) dropped++;
        client.resetAndDestroy?.() ?? client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => client.end());
    client.on('close', () => upstream.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: /** @type {net.AddressInfo} */ (server.address()).port,
    dropped: () => dropped,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * undici's RetryAgent, set up as a payment client sets it up: POST is retried
 * (it carries an idempotency key), on a reset or closed connection and on 409
 * and 503, honouring Retry-After.
 */
export function retryingAgent() {
  return new RetryAgent(new Agent({ keepAliveTimeout: 10, pipelining: 0 }), {
    maxRetries: 5,
    minTimeout: 20,
    maxTimeout: 2000,
    timeoutFactor: 2,
    retryAfter: true,
    methods: ['GET', 'PUT', 'POST', 'PATCH', 'DELETE'],
    statusCodes: [409, 503],
    errorCodes: ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'],
  });
}

/**
 * One request; the answer with its body as bytes.
 * @param {string} url
 * @param {{ method?: string, headers?: Record<string, string | string[]>, body?: string | Uint8Array, dispatcher?: import('undici').Dispatcher }} [init]
 */
export async function send(url, { method = 'POST', headers = {}, body, dispatcher } = {}) {
  const res = await request(url, { method, headers, body, dispatcher });
  const bytes = new Uint8Array(await res.body.arrayBuffer());
  return {
    status: res.statusCode,
    headers: res.headers,
    bytes,
    text: () => new TextDecoder().decode(bytes),
    json: () => JSON.parse(new TextDecoder().decode(bytes)),
  };
}

/** Bytes that are not text: a PDF head, then every byte value, NUL and 0xFF among them. */
export function pdfBytes() {
  const head = new TextEncoder().encode('%PDF-1.7\n%\u00e2\u00e3\u00cf\u00d3\n');
  const all = Uint8Array.from({ length: 256 }, (_, i) => 255 - i);
  const out = new Uint8Array(head.length + all.length);
  out.set(head);
  out.set(all, head.length);
  return out;
}

/**
 * One request written by hand on a socket, for what HTTP clients refuse to
 * send (a header with a control character, say): the status and the body.
 * @param {number} port
 * @param {string} path
 * @param {[string, string][]} headerLines
 * @param {string} body
 * @returns {Promise<{ status: number, headers: Record<string, string>, text: string }>}
 */
export function rawRequest(port, path, headerLines, body) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const [head, ...rest] = raw.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = {};
      for (const line of lines) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      let text = rest.join('\r\n\r\n');
      if (headers['transfer-encoding'] === 'chunked') {
        let out = '';
        for (let i = 0; ; ) {
          const end = text.indexOf('\r\n', i);
          const size = parseInt(text.slice(i, end), 16);
          if (!size) break;
          out += text.slice(end + 2, end + 2 + size);
          i = end + 2 + size + 2;
        }
        text = out;
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, text: Buffer.from(text, 'latin1').toString('utf8') });
    });
    const bytes = Buffer.from(body, 'utf8');
    const lines = [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', `Content-Length: ${bytes.length}`];
    for (const [name, value] of headerLines) lines.push(`${name}: ${value}`);
    socket.write(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bytes]));
  });
}
