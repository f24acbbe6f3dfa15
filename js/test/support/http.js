// A node:http server on a free port, and a client for it.
import http from 'node:http';

/** Serves `listener` on 127.0.0.1; close() stops it. */
export async function serve(listener) {
  const server = http.createServer(listener);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** One request; resolves with { status, headers, body }. */
export function request(server, { key, body = '', method = 'POST', path = '/payments', headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const h = { 'content-type': 'application/json', ...headers };
    if (key !== undefined) h['idempotency-key'] = key;
    const req = http.request({ host: '127.0.0.1', port: server.port, method, path, headers: h }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}
