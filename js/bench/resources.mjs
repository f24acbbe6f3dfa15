#!/usr/bin/env node
// npm run bench:resources [-- --lines N --list-sizes N,N,… --only WORDS]
//
// Big and hostile inputs through the component in Node (the npm API and the
// package's intentkey bin) and through the HTTP adapters (Express 5, Fastify 5,
// Hono on @hono/node-server), the Node half of bench/resources.py (which runs
// the CLI, native and in wasmtime). Each case runs in a fresh process, so a
// peak RSS (getrusage's ru_maxrss, i.e. process.resourceUsage().maxRSS or GNU
// time's %M) belongs to that case alone.
//
//   npm API        a child process loads the package, makes one small call (so
//                  the component is compiled and instantiated), notes its RSS,
//                  builds the input, notes its RSS again, then times the one
//                  call and reports: the outcome (a key, or the IntentkeyError
//                  code), the size of the answer (the key, or the error's
//                  message plus its field, in UTF-8 bytes), the call's time and
//                  the process's peak RSS.
//   intentkey bin  `node bin/intentkey.js derive --jsonl --quiet --input FILE`
//                  under /usr/bin/time: the whole process (start-up, reading,
//                  answering in batches of 1,000 lines, writing).
//   HTTP           a server child (one adapter, the memory store, a handler that
//                  counts its runs and answers 201 with a small JSON) takes one
//                  small warm-up request; then this process sends the case's
//                  request with undici (a real HTTP/1.1 client over TCP), times
//                  it to the last byte of the answer, asks the server for its
//                  handler runs and peak RSS, and sends one more small request
//                  to see that the server still answers (through the same
//                  connection pool; when that fails, once more on a new
//                  connection).
//
// Options: --lines N, the long JSON-lines batch through the bin (default
// 1,000,000; the short one is N/100); --list-sizes, the lengths of the
// answerLines and deriveMany arrays (default 10000,100000,1000000); --only
// WORDS, comma-separated, the cases whose name holds one of them.
//
// Every request has a 60 s timeout: a case that hangs is reported as a timeout,
// never waited for. Figures and commands: bench/RESOURCES.md.
import { fork, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { answerOf } from './ipc.mjs';

const SELF = fileURLToPath(import.meta.url);
const BIN = fileURLToPath(new URL('../bin/intentkey.js', import.meta.url));
const SECRET = '5c'.repeat(32);
const EPOCH = 1_700_000_000;
const MiB = 1 << 20;
const TIMEOUT_MS = 60_000;

const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : fallback;
};

// ---------------------------------------------------------------- inputs

/** A payload of the built-in payments policy with a `remittance` (a text field) of `bytes` bytes. */
const remittance = (bytes) => `{"creditor_key":"a@b.c","amount":"1","currency":"BRL","remittance":"${'x'.repeat(bytes)}"}`;
/** `n` fields the policy does not classify, named as bench/resources.py names them (f000000…). */
const unclassified = (n) => `{${Array.from({ length: n }, (_, i) => `"f${String(i).padStart(6, '0')}":1`).join(',')}}`;
/** A value nested `depth` arrays deep, under a classified field. */
const nested = (depth) => `{"remittance":${'['.repeat(depth)}1${']'.repeat(depth)}}`;
/** The payload of the i-th small request. */
const smallPayload = (i) => `{"creditor_key":"123.456.789-09","amount":${i}.5,"currency":"brl","remittance":"Fatura ${i}"}`;
/** One small JSON-lines request (the same as bench/resources.py's). */
const smallLine = (i) =>
  `{"id":"r-${i}","secret_hex":"${SECRET}","tenant_id":"t","action_type":"pix.send",` +
  `"payload":${smallPayload(i)},"intent_epoch":${EPOCH}}`;
const intent = (payload) => ({ tenantId: 't', actionType: 'pix.send', payload, intentEpoch: EPOCH });

/** The list lengths of the answerLines and deriveMany cases (--list-sizes). */
const LIST_SIZES = arg('--list-sizes', '10000,100000,1000000').split(',').map(Number);

/** The npm API cases: [name, build the input, the call(keyer, input, the package)]. */
const API_CASES = [
  ['payload 1 MB', () => remittance(1 * MiB), (k, p) => k.derive(intent(p))],
  ['payload 5 MB', () => remittance(5 * MiB), (k, p) => k.derive(intent(p))],
  ['payload 10 MB', () => remittance(10 * MiB), (k, p) => k.derive(intent(p))],
  ['10,000 unclassified fields', () => unclassified(10_000), (k, p) => k.derive(intent(p))],
  ['50,000 unclassified fields', () => unclassified(50_000), (k, p) => k.derive(intent(p))],
  ['100,000 unclassified fields', () => unclassified(100_000), (k, p) => k.derive(intent(p))],
  ['100,000 unclassified fields, fingerprint()', () => unclassified(100_000), (k, p) => k.fingerprint('t', 'pix.send', p)],
  ['10,000-deep nesting (JSON text)', () => nested(10_000), (k, p) => k.derive(intent(p))],
  [
    '10,000-deep nesting (a JS value)',
    () => {
      let v = 1;
      for (let i = 0; i < 10_000; i++) v = [v];
      return { remittance: v };
    },
    (k, p) => k.derive(intent(p)),
  ],
  ['a 1 MB field name', () => `{"${'n'.repeat(MiB)}":1}`, (k, p) => k.derive(intent(p))],
  ...LIST_SIZES.map((n) => [
    `answerLines, ${n.toLocaleString('en-US')} lines (one array)`,
    () => Array.from({ length: n }, (_, i) => smallLine(i)),
    (k, lines, m) => m.answerLines(lines),
  ]),
  ...LIST_SIZES.map((n) => [
    `deriveMany, ${n.toLocaleString('en-US')} intents (one array)`,
    () => Array.from({ length: n }, (_, i) => intent(smallPayload(i))),
    (k, intents) => k.deriveMany(intents),
  ]),
];

const utf8 = (s) => Buffer.byteLength(s, 'utf8');
const rssMiB = () => process.memoryUsage().rss / MiB;
const peakMiB = () => process.resourceUsage().maxRSS / 1024;

/** Child: one npm API case; prints one JSON line. */
async function apiCase(name) {
  const m = await import('../src/index.js');
  const [, build, call] = API_CASES.find(([n]) => n === name);
  const keyer = m.createKeyer({ secret: SECRET });
  keyer.derive(intent('{"creditor_key":"a@b.c","amount":"1","currency":"BRL"}'));
  m.answerLines([smallLine(0)]);
  const loaded = rssMiB();
  const input = build();
  const withInput = rssMiB();
  let size = null;
  if (typeof input === 'string') size = utf8(input);
  else if (Array.isArray(input)) size = input.reduce((n, x) => n + utf8(typeof x === 'string' ? x : x.payload) + 1, 0);
  const t0 = performance.now();
  let outcome;
  let answerBytes;
  let longest = null;
  try {
    const out = call(keyer, input, m);
    if (Array.isArray(out)) {
      // answerLines: answer lines (a key answer does not end "}}"); deriveMany: { key } or { error }.
      const texts = out.map((a) => (typeof a === 'string' ? a : (a.key ?? a.error.message)));
      const keys = out.filter((a) => (typeof a === 'string' ? !a.endsWith('}}') : a.key !== undefined)).length;
      outcome = `${out.length.toLocaleString('en-US')} answers, ${keys.toLocaleString('en-US')} keys`;
      answerBytes = texts.reduce((n, a) => n + utf8(a), 0);
      longest = texts.reduce((n, a) => Math.max(n, utf8(a)), 0);
    } else {
      outcome = typeof out === 'string' && /^[0-9a-f]+$/.test(out) ? 'key' : typeof out;
      answerBytes = utf8(String(out));
    }
  } catch (e) {
    if (!(e instanceof m.IntentkeyError)) throw e;
    outcome = `\`${e.code}\``;
    answerBytes = utf8(e.message) + utf8(e.field ?? '');
    longest = e.message.length > 160 ? `${e.message.slice(0, 80)}…${e.message.slice(-80)}` : e.message;
  }
  const ms = performance.now() - t0;
  console.log(JSON.stringify({ size, outcome, answerBytes, longest, ms, loaded, withInput, peak: peakMiB() }));
}

// ---------------------------------------------------------------- the bin

/** Writes `n` small lines to a file; its size. */
async function writeLines(path, n) {
  const out = createWriteStream(path);
  let size = 0;
  for (let i = 0; i < n; i += 1000) {
    let chunk = '';
    for (let j = i; j < Math.min(n, i + 1000); j++) chunk += `${smallLine(j)}\n`;
    size += chunk.length;
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return size;
}

/** Runs the bin over a file under /usr/bin/time: answers, first outcome, longest answer, seconds, peak RSS. */
async function binCase(path) {
  const child = spawn('/usr/bin/time', ['-f', '%e %M', process.execPath, BIN, 'derive', '--jsonl', '--quiet', '--input', path], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  let answers = 0;
  let keys = 0;
  let longest = 0;
  let first = null;
  const killer = setTimeout(() => child.kill('SIGKILL'), 30 * TIMEOUT_MS);
  for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
    answers++;
    if (!line.endsWith('}}')) keys++;
    longest = Math.max(longest, utf8(line));
    if (first === null) first = line;
  }
  const [code] = await once(child, 'close');
  clearTimeout(killer);
  const [seconds, kb] = stderr.trim().split('\n').at(-1).split(' ');
  return { code, answers, keys, longest, seconds: Number(seconds), peak: Number(kb) / 1024 };
}

// ---------------------------------------------------------------- HTTP

const ADAPTERS = ['express', 'fastify', 'hono'];

/** Child: one adapter on 127.0.0.1 with the memory store; answers { type: 'stats' } over IPC. */
async function serve(adapter) {
  const { memoryStore } = await import('../src/stores/memory.js');
  let runs = 0;
  let errors = 0;
  const options = { secret: SECRET, store: memoryStore(), onError: () => errors++ };
  let server;
  if (adapter === 'express') {
    const { default: express } = await import('express');
    const { idempotency } = await import('../src/adapters/express.js');
    const app = express();
    const guarded = idempotency(options);
    app.post('/orders/:id', guarded, async (req, res) => {
      runs++;
      let bytes = 0;
      for await (const c of req) bytes += c.length;
      res.status(201).json({ bytes });
    });
    app.use(guarded.onError);
    server = await new Promise((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', (e) => (e ? reject(e) : resolve(s)));
    });
  } else if (adapter === 'fastify') {
    const { default: Fastify } = await import('fastify');
    const { default: intentkey } = await import('../src/adapters/fastify.js');
    const app = Fastify();
    await app.register(intentkey, options);
    app.post('/orders/:id', async (request, reply) => {
      runs++;
      reply.code(201);
      return { fields: Object.keys(request.body ?? {}).length };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    server = app.server;
  } else if (adapter === 'hono') {
    const { Hono } = await import('hono');
    const { serve: honoServe } = await import('@hono/node-server');
    const { idempotency } = await import('../src/adapters/fetch-node.js');
    const app = new Hono();
    app.post('/orders/:id', idempotency(options), async (c) => {
      runs++;
      const body = await c.req.arrayBuffer();
      return c.json({ bytes: body.byteLength }, 201);
    });
    server = await new Promise((resolve) => {
      const s = honoServe({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
  } else throw new Error(`unknown adapter ${adapter}`);
  process.on('disconnect', () => process.exit(0));
  process.on('message', (msg) => {
    if (msg.type === 'stats') {
      process.send({ type: 'stats', runs, errors, rss: rssMiB(), peak: peakMiB() });
    }
  });
  process.send({ type: 'ready', port: server.address().port });
}


/** The HTTP cases: [name, request, server's extra node options]. */
const HTTP_CASES = [
  ['10 MB body (default limit 1 MiB)', () => ({ key: 'big-1', body: remittance(10 * MiB) })],
  [
    '100,000-field JSON body (under the 1 MiB limit)',
    () => ({ key: 'fields-1', body: `{${Array.from({ length: 100_000 }, (_, i) => `"${i.toString(36)}":1`).join(',')}}` }),
  ],
  ['10,000-deep JSON body', () => ({ key: 'deep-1', body: `${'['.repeat(10_000)}1${']'.repeat(10_000)}` })],
  ['64 KB key header (Node\'s default 16 KiB header limit)', () => ({ key: 'k'.repeat(64 * 1024), body: '{"sku":"A1"}' })],
  [
    '64 KB key header (server run with --max-http-header-size=131072)',
    () => ({ key: 'k'.repeat(64 * 1024), body: '{"sku":"A1"}' }),
    ['--max-http-header-size=131072'],
  ],
];

/** One POST with undici: status, answer bytes, ms (to the answer's last byte), or the error. */
async function post(undici, port, { key, body }, dispatcher = undefined) {
  const t0 = performance.now();
  try {
    const r = await undici.request(`http://127.0.0.1:${port}/orders/1`, {
      dispatcher,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
      body,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const bytes = Buffer.from(await r.body.arrayBuffer());
    const ms = performance.now() - t0;
    let type = null;
    try {
      type = JSON.parse(bytes.toString('utf8')).type ?? null;
    } catch {}
    return { status: r.statusCode, bytes: bytes.length, type, ms };
  } catch (e) {
    return { status: e.name === 'TimeoutError' ? 'timeout' : `${e.code ?? e.name}`, bytes: 0, type: null, ms: performance.now() - t0 };
  }
}

async function httpCase(undici, adapter, [name, build, execArgv = []]) {
  const request = build();
  const child = fork(SELF, ['--serve', adapter], { execArgv, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  try {
    const { port } = await answerOf(child, 'ready');
    const warm = await post(undici, port, { key: 'warm-up', body: '{"sku":"A1"}' });
    if (warm.status !== 201) throw new Error(`${adapter}: the warm-up request got ${warm.status}`);
    const before = await answerOf(child, 'stats', { type: 'stats' });
    const answer = await post(undici, port, request);
    const after = await answerOf(child, 'stats', { type: 'stats' });
    // The next request goes through the same pool (the connection of the case's
    // request, when the server kept it); when that fails, once more on a new one.
    let next = (await post(undici, port, { key: 'after-1', body: '{"sku":"A1"}' })).status;
    if (next !== 201) {
      const fresh = new undici.Agent();
      const again = await post(undici, port, { key: 'after-2', body: '{"sku":"A1"}' }, fresh);
      await fresh.close();
      next = `${next}; on a new connection ${again.status}`;
    }
    return {
      adapter,
      name,
      size: Buffer.byteLength(request.body) + request.key.length,
      ...answer,
      ran: after.runs - before.runs,
      errors: after.errors,
      base: before.peak,
      peak: after.peak,
      next,
      stderr: stderr.trim().slice(0, 300),
    };
  } finally {
    child.kill();
    await once(child, 'exit').catch(() => {});
  }
}

// ---------------------------------------------------------------- the driver

/** Runs a child case; its JSON line, or { failed } when it exits otherwise (killed after 10 minutes). */
function runChild(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SELF, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    const started = performance.now();
    const killer = setTimeout(() => child.kill('SIGKILL'), 10 * TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      const seconds = ((performance.now() - started) / 1000).toFixed(0);
      if (code !== 0) resolve({ failed: `exited ${signal ?? code} after ${seconds} s` });
      else resolve(JSON.parse(out.trim().split('\n').at(-1)));
    });
  });
}

const f1 = (x) => x.toFixed(1);
const int = (x) => x.toLocaleString('en-US');

async function drive() {
  const only = arg('--only', '').toLowerCase().split(',').filter(Boolean);
  const wanted = (name) => only.length === 0 || only.some((w) => name.toLowerCase().includes(w));
  const lines = Number(arg('--lines', 1_000_000));
  const started = performance.now();
  console.log(`node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`);

  console.log('### The npm API (the component in Node)\n');
  console.log('| input | input size | answer | answer size | call time | RSS: loaded → with input → peak (peak − loaded) |');
  console.log('|---|---|---|---|---|---|');
  const messages = [];
  for (const [name] of API_CASES) {
    if (!wanted(name)) continue;
    const r = await runChild(['--api', name, '--list-sizes', LIST_SIZES.join(',')]);
    if (r.failed !== undefined) {
      console.log(`| ${name} | | ${r.failed} | | | |`);
      continue;
    }
    const { size } = r;
    const answerSize = `${int(r.answerBytes)} B${typeof r.longest === 'number' ? ` (longest ${int(r.longest)} B)` : ''}`;
    console.log(
      `| ${name} | ${size === null ? '—' : `${int(size)} B`} | ${r.outcome} | ${answerSize} | ${int(Math.round(r.ms))} ms | ` +
        `${f1(r.loaded)} → ${f1(r.withInput)} → ${f1(r.peak)} MiB (+${f1(r.peak - r.loaded)}) |`,
    );
    if (typeof r.longest === 'string') messages.push(`- ${name}: ${r.longest}`);
  }
  if (messages.length > 0) console.log(`\nError messages (cut in the middle when long):\n\n${messages.join('\n')}`);

  const binCases = [
    [Math.max(1, Math.floor(lines / 100)), 'small lines'],
    [lines, 'small lines'],
  ].filter(([n, what]) => wanted(`bin ${n} ${what}`) || wanted(`${int(n)} ${what}`));
  if (binCases.length > 0) {
    console.log('\n### JSON lines through the bin (`node bin/intentkey.js derive --jsonl --quiet --input FILE`)\n');
    console.log('| input | input size | answers | longest answer | exit | seconds | peak RSS |');
    console.log('|---|---|---|---|---|---|---|');
    const dir = mkdtempSync(join(tmpdir(), 'intentkey-resources-'));
    try {
      for (const [n, what] of binCases) {
        const path = join(dir, `${n}.jsonl`);
        const size = await writeLines(path, n);
        const r = await binCase(path);
        rmSync(path);
        console.log(
          `| ${int(n)} ${what} | ${int(size)} B | ${int(r.answers)} (${int(r.keys)} keys) | ${r.longest} B | ${r.code} | ` +
            `${r.seconds.toFixed(2)} | ${f1(r.peak)} MiB |`,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const httpCases = HTTP_CASES.filter(([name]) => wanted(name) || ADAPTERS.some((a) => wanted(`${a}`)));
  if (httpCases.length > 0) {
    const undici = await import('undici');
    console.log('\n### The HTTP adapters (memory store; undici over TCP)\n');
    console.log('| request | adapter | request size | status | answer type | answer size | time | handler ran | server peak RSS: after warm-up → after | then a small request |');
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    const notes = [];
    for (const c of httpCases) {
      for (const adapter of ADAPTERS) {
        if (only.length > 0 && !wanted(c[0]) && !wanted(adapter)) continue;
        const r = await httpCase(undici, adapter, c);
        const type = r.type === null ? '—' : r.type.replace('https://intentkey.dev/problems/', '');
        console.log(
          `| ${r.name} | ${r.adapter} | ${int(r.size)} B | ${r.status} | ${type} | ${int(r.bytes)} B | ${int(Math.round(r.ms))} ms | ` +
            `${r.ran} | ${f1(r.base)} → ${f1(r.peak)} MiB (+${f1(r.peak - r.base)}) | ${r.next} |`,
        );
        if (r.errors > 0 || r.stderr) notes.push(`- ${r.adapter}, ${r.name}: onError ${r.errors}×; stderr: ${r.stderr || '—'}`);
      }
    }
    if (notes.length > 0) console.log(`\nServer notes:\n\n${notes.join('\n')}`);
  }
  console.log(`\nTotal: ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

if (argv[0] === '--api') await apiCase(argv[1]);
else if (argv[0] === '--serve') await serve(argv[1]);
else await drive();
