// Big and hostile inputs through the npm package: every answer stays small and
// typed, nothing crashes, nothing hangs (the figures: bench/resources.mjs and
// bench/RESOURCES.md). Outcomes only, never timings.
//
// - the npm API: 100,000 unclassified fields and a 1 MB field name give an
//   error that names the first fields and the count, under 2 KiB, through
//   derive, deriveMany, fingerprint and answerLines; 10,000-deep nesting
//   gives invalid-payload (JSON text or a JS value) and the keyer goes on;
//   deriveMany and answerLines, which hand long lists to the component in
//   batches, answer each item as it is answered alone, in order;
// - Express, node:http and Fastify over a real socket: a body far past
//   maxBodyBytes gets the core's 413 and the rest of it is read and dropped,
//   so the same connection serves the next request (it used to stall until
//   the keep-alive timeout closed it: the adapter had read the body's start,
//   so Node no longer discarded the rest, and the client could neither finish
//   sending nor have its next request answered).
// (A 10,000-deep JSON body through every adapter: support/adapter-suite.js.)
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { IntentkeyError, answerLines, createKeyer, memoryStore } from '../src/index.js';
import { idempotency } from '../src/adapters/express.js';
import intentkey from '../src/adapters/fastify.js';
import { serve } from './support/http.js';

const SECRET = '5c'.repeat(32);
const EPOCH = 1_700_000_000;
const KiB = 1024;
const utf8 = (s) => Buffer.byteLength(s, 'utf8');
const intent = (payload) => ({ tenantId: 't', actionType: 'pix.send', payload, intentEpoch: EPOCH });
const line = (payloadJson) =>
  `{"id":"r-1","secret_hex":"${SECRET}","tenant_id":"t","action_type":"pix.send","payload":${payloadJson},"intent_epoch":${EPOCH}}`;

/** `n` fields the built-in payments policy does not classify: f000000, f000001, … */
const unclassified = (n) => `{${Array.from({ length: n }, (_, i) => `"f${String(i).padStart(6, '0')}":1`).join(',')}}`;

/** The IntentkeyError `fn` throws. */
function thrown(fn) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof IntentkeyError, `an IntentkeyError, not ${e?.constructor?.name}: ${e?.message}`);
    return e;
  }
  assert.fail('no error was thrown');
}

describe('the npm API: big inputs get small, typed answers', () => {
  const keyer = createKeyer({ secret: SECRET });
  const fields = unclassified(100_000);

  test('100,000 unclassified fields: unclassified-fields, naming the first 20 and the count, under 2 KiB', () => {
    for (const e of [
      thrown(() => keyer.derive(intent(fields))),
      thrown(() => keyer.fingerprint('t', 'pix.send', fields)),
      keyer.deriveMany([intent(fields)])[0].error,
    ]) {
      assert.equal(e.code, 'unclassified-fields');
      assert.ok(utf8(e.message) < 2 * KiB, `the message is ${utf8(e.message)} bytes`);
      assert.ok(utf8(e.field ?? '') < 2 * KiB, `the field is ${utf8(e.field ?? '')} bytes`);
      assert.match(e.message, /"f000000"/);
      assert.match(e.message, /"f000019"/);
      assert.doesNotMatch(e.message, /"f000020"/, 'only the first 20 names');
      assert.match(e.message, /100000/, 'the count');
    }
    const [answer] = answerLines([line(fields)]);
    assert.ok(utf8(answer) < 2 * KiB, `the answer line is ${utf8(answer)} bytes`);
    assert.equal(JSON.parse(answer).error.code, 'unclassified-fields');
  });

  test('a 1 MB field name: unclassified-fields, the name cut, under 2 KiB', () => {
    const payload = `{"${'n'.repeat(1 << 20)}":1}`;
    const e = thrown(() => keyer.derive(intent(payload)));
    assert.equal(e.code, 'unclassified-fields');
    assert.ok(utf8(e.message) < 2 * KiB, `the message is ${utf8(e.message)} bytes`);
    const [answer] = answerLines([line(payload)]);
    assert.ok(utf8(answer) < 2 * KiB, `the answer line is ${utf8(answer)} bytes`);
  });

  test('10,000-deep nesting: invalid-payload as JSON text and as a JS value, a typed answer line, and the keyer goes on', () => {
    const depth = 10_000;
    const text = `{"remittance":${'['.repeat(depth)}1${']'.repeat(depth)}}`;
    let value = 1;
    for (let i = 0; i < depth; i++) value = [value];
    for (const payload of [text, { remittance: value }]) {
      const e = thrown(() => keyer.derive(intent(payload)));
      assert.equal(e.code, 'invalid-payload');
      assert.ok(utf8(e.message) < 2 * KiB);
    }
    const [answer] = answerLines([line(text)]);
    assert.ok(utf8(answer) < 2 * KiB, `the answer line is ${utf8(answer)} bytes`);
    assert.equal(typeof JSON.parse(answer).error.code, 'string');
    assert.match(keyer.derive(intent('{"creditor_key":"a@b.c","amount":"1","currency":"BRL"}')), /^[0-9a-f]{64}$/);
  });

  test('long lists go to the component in batches: the same answers, in order, as one item at a time', () => {
    const payload = (i, note = `Fatura ${i}`) => `{"creditor_key":"123.456.789-09","amount":"${i}.5","currency":"brl","remittance":"${note}"}`;
    // 2,500 small items (three batches of at most 1,000), an error among them,
    // then three 2 MiB items (cut by size: about 4 Mi characters a batch).
    const payloads = Array.from({ length: 2_500 }, (_, i) => (i === 1_234 ? '{"amount":"x"}' : payload(i)));
    for (let i = 0; i < 3; i++) payloads.push(payload(i, 'y'.repeat(2 << 20)));
    const many = keyer.deriveMany(payloads.map((p) => intent(p)));
    assert.equal(many.length, payloads.length);
    payloads.forEach((p, i) => {
      if (i === 1_234) assert.ok(many[i].error instanceof IntentkeyError, `#${i}`);
      else assert.equal(many[i].key, keyer.derive(intent(p)), `#${i}`);
    });
    const lines = payloads.map((p, i) => line(p).replace('"r-1"', `"r-${i}"`));
    const answers = answerLines(lines);
    assert.equal(answers.length, lines.length);
    lines.forEach((l, i) => assert.equal(answers[i], answerLines([l])[0], `line ${i}`));
    assert.deepEqual(answerLines([]), []);
  });
});

/**
 * Two requests on one TCP connection, each written whole (as a client without
 * Expect: 100-continue does), the second right after the first. Resolves with
 * the statuses answered and whether the server closed the connection, once
 * both are answered, the connection closes, or `waitMs` passes (a hang).
 */
function twoOnOneConnection(port, first, second, waitMs = 10_000) {
  const bytes = ({ key, body }) =>
    Buffer.concat([
      Buffer.from(
        'POST /orders/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
          `Idempotency-Key: "${key}"\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
        'latin1',
      ),
      Buffer.from(body),
    ]);
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    let closed = false;
    const statuses = () => [...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ statuses: statuses(), closed });
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (statuses().length >= 2) done();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closed = true;
      done();
    });
    socket.write(bytes(first));
    socket.write(bytes(second));
  });
}

describe('Node servers: a body far past maxBodyBytes does not take the connection down with it', () => {
  const BIG = { key: 'big-1', body: JSON.stringify({ note: 'x'.repeat(1 << 20) }) };
  const SMALL = { key: 'small-1', body: '{"sku":"A1"}' };
  const options = () => ({ secret: SECRET, store: memoryStore(), maxBodyBytes: 1000, onError: () => {} });

  async function check(port, state) {
    const { statuses, closed } = await twoOnOneConnection(port, BIG, SMALL);
    assert.equal(statuses[0], 413, `the first answer: ${statuses}`);
    assert.deepEqual(statuses, [413, 201], closed ? 'the server closed the connection' : 'the connection hung');
    assert.equal(state.runs, 1, 'only the small request ran');
  }

  test('Express 5', async () => {
    const state = { runs: 0 };
    const app = express();
    const guarded = idempotency(options());
    app.post('/orders/:id', guarded, express.json(), (req, res) => {
      state.runs++;
      res.status(201).json({ ok: true });
    });
    app.use(guarded.onError);
    const server = await serve(app);
    try {
      await check(server.port, state);
    } finally {
      await server.close();
    }
  });

  test('node:http (next is the handler)', async () => {
    const state = { runs: 0 };
    const guarded = idempotency(options());
    const server = await serve((req, res) =>
      guarded(req, res, async () => {
        for await (const _ of req);
        state.runs++;
        res.statusCode = 201;
        res.end('{"ok":true}');
      }),
    );
    try {
      await check(server.port, state);
    } finally {
      await server.close();
    }
  });

  test('Fastify 5', async () => {
    const state = { runs: 0 };
    const app = Fastify();
    await app.register(intentkey, options());
    app.post('/orders/:id', async (request, reply) => {
      state.runs++;
      reply.code(201);
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await check(app.server.address().port, state);
    } finally {
      await app.close();
    }
  });
});
