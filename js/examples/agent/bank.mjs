// A payment destination over HTTP that does NOT deduplicate: every POST is a
// payment, so a duplicate effect shows. It keeps each payment under the
// idempotency key the caller sent and answers look-ups by that key (it is
// read-your-writes: a key it has no payment for was never paid).
import { createServer } from 'node:http';

/**
 * Starts the bank on 127.0.0.1 (a free port).
 * @returns {Promise<{ url: string, payments: () => object[], close: () => Promise<void> }>}
 */
export async function startBank() {
  const payments = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const send = (status, value) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (req.method === 'POST' && req.url === '/payments') {
        const key = req.headers['idempotency-key'];
        const payment = { payment: `pay_${payments.length + 1}`, key, ...JSON.parse(body) };
        payments.push(payment);
        return send(201, payment);
      }
      const found = req.method === 'GET' && req.url.startsWith('/payments/') && req.url.slice('/payments/'.length);
      if (found) {
        const payment = payments.find((p) => p.key === found);
        return payment === undefined ? send(404, { error: 'no such payment' }) : send(200, payment);
      }
      return send(404, { error: `no route ${req.method} ${req.url}` });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    payments: () => payments.map((p) => ({ ...p })),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The bank's client: pay with the key, look a key up (found / absent / unknown). */
export function bankClient(url) {
  return {
    async pay(key, args) {
      const res = await fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(args),
      });
      if (!res.ok) throw new Error(`the bank answered ${res.status}`);
      return res.json();
    },
    async lookup(key) {
      let res;
      try {
        res = await fetch(`${url}/payments/${key}`);
      } catch {
        return 'unknown';
      }
      if (res.status === 404) return 'absent';
      if (!res.ok) return 'unknown';
      return { found: await res.json() };
    },
  };
}
