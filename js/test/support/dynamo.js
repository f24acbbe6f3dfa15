// DynamoDB for the tests: the local endpoint `bash scripts/dynalite.sh start`
// runs (dynalite on 127.0.0.1:4567; INTENTKEY_DYNAMODB overrides, as
// dynamodb://HOST:PORT, the variable the Rust tests read). Every test works in
// a table of its own (ik-js-<random>) and deletes it at the end: other suites
// use the same endpoint at the same time.
//
// When the endpoint cannot be reached: with CI=true the tests FAIL, outside CI
// they are skipped with a message saying so.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteTableCommand, DynamoDBClient, GetItemCommand, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { availability } from './availability.js';
import { lineChild } from './line-child.js';
import { killTrials } from './kill-trials.js';
import { jsonResponse } from '../../src/index.js';

export const DYNAMODB = (process.env.INTENTKEY_DYNAMODB ?? 'dynamodb://127.0.0.1:4567').replace(/\/+$/, '');

/** The endpoint's HOST:PORT. */
const host = () => DYNAMODB.replace(/^dynamodb:\/\//, '');

/** A low-level client of the test's own on the endpoint (destroy() it). */
export function endpointClient() {
  return new DynamoDBClient({
    region: 'us-east-1',
    endpoint: `http://${host()}`,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler: { requestTimeout: 10_000, connectionTimeout: 5_000 },
  });
}

/**
 * What the DynamoDB tests do here: `{ skip: false }` to run, `{ skip: message }`
 * outside CI when the endpoint does not answer ListTables (and a `SKIPPED:`
 * line); with CI=true it throws, failing the test file loudly.
 * @param {string} file the test file, for the SKIPPED line
 */
export async function dynamoAvailability(file) {
  const client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: `http://${host()}`,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
    requestHandler: { requestTimeout: 5_000, connectionTimeout: 5_000 },
  });
  let why = null;
  try {
    await client.send(new ListTablesCommand({ Limit: 1 }));
  } catch (e) {
    why = e instanceof Error ? e.message || e.name : String(e);
  } finally {
    client.destroy();
  }
  return availability(file, 'DynamoDB', DYNAMODB, why, 'Start dynalite (bash scripts/dynalite.sh start) or set INTENTKEY_DYNAMODB.');
}

/** A fresh table name: ik-js-<random>. */
export const freshTableName = () => `ik-js-${randomBytes(6).toString('hex')}`;

/**
 * A table of the test's own (made by the store that opens it): `name`, `url`
 * (the store URL naming it), `client` (the test's own, to read it directly);
 * drop() deletes the table (if it was made) and destroys the client.
 */
export async function freshTable() {
  const name = freshTableName();
  const client = endpointClient();
  return {
    name,
    url: `${DYNAMODB}/${name}`,
    client,
    async drop() {
      try {
        await client.send(new DeleteTableCommand({ TableName: name }));
      } catch (e) {
        if (e?.name !== 'ResourceNotFoundException') throw e;
      } finally {
        client.destroy();
      }
    },
  };
}

/** The raw item of `key` in `table` as the SDK reads it (bytes as Uint8Array), or undefined. */
export async function rawItem(client, table, key) {
  return (await client.send(new GetItemCommand({ TableName: table, Key: { key: { S: key } }, ConsistentRead: true }))).Item;
}

/**
 * Effects recorded in a file of the test's own, one line `key who` each,
 * appended synchronously (O_APPEND: whole lines, from any process), so a
 * process killed right after its effect leaves it recorded. drop() removes it.
 */
export function effectsFile() {
  const dir = mkdtempSync(join(tmpdir(), 'ik-dynamo-effects-'));
  const path = join(dir, 'effects');
  appendFileSync(path, '');
  const lines = () =>
    readFileSync(path, 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const at = l.lastIndexOf(' ');
        return { key: l.slice(0, at), who: l.slice(at + 1) };
      });
  return {
    path,
    record: (key, who) => appendFileSync(path, `${key} ${who}\n`),
    lines,
    count: (key) => lines().filter((e) => e.key === key).length,
    drop: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** How long a dead client's unanswered request is waited for. */
const LINGER_MS = 5_000;

/**
 * Where a connection is in the HTTP/1.1 requests it carries (framed by
 * Content-Length, as the SDK sends them): feed(chunk) each chunk the client
 * sent; missing() is how many body bytes of the current request have not come.
 */
function requestFraming() {
  let head = Buffer.alloc(0);
  let remaining = 0;
  return {
    feed(chunk) {
      let rest = chunk;
      while (rest.length > 0) {
        if (remaining > 0) {
          const n = Math.min(remaining, rest.length);
          remaining -= n;
          rest = rest.subarray(n);
          continue;
        }
        head = Buffer.concat([head, rest]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head.subarray(0, end).toString('latin1'));
        remaining = length === null ? 0 : Number(length[1]);
        rest = head.subarray(end + 4);
        head = Buffer.alloc(0);
      }
    },
    missing: () => remaining,
    /** Whether a request's header block has begun and not ended (the server has no request yet). */
    midHeaders: () => head.length > 0,
  };
}

/**
 * A TCP proxy to the endpoint for processes a test kills. dynalite (4.0.0)
 * dies when a connection closes in the middle of a request's body (its request
 * handler rethrows the `aborted` error), which a SIGKILLed client may do; the
 * server would drop such a request and carry out a whole one whose answer
 * nobody reads. Here, when a client is gone, a body it left unfinished is
 * completed with spaces (no longer JSON: the endpoint refuses it and writes
 * nothing, as DynamoDB would never see it), and the connection stays open to
 * the endpoint until the request it carried has been answered (HTTP/1.1
 * without pipelining: a request, then its answer); then it is closed.
 * `port`; `settled()` resolves once no dead client's request awaits its answer
 * (what the table holds is then final); `close()` stops it. An answer that
 * never comes is given up after LINGER_MS.
 */
export async function lingeringProxy() {
  const at = host().lastIndexOf(':');
  const target = { host: host().slice(0, at).replace(/^\[|\]$/g, ''), port: Number(host().slice(at + 1)) };
  const conns = new Set();
  let waiters = [];
  const check = () => {
    if ([...conns].some((c) => c.clientGone && c.awaiting)) return;
    for (const c of conns) if (c.clientGone) c.upstream.destroy();
    for (const w of waiters) w();
    waiters = [];
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    const framing = requestFraming();
    const c = { upstream, clientGone: false, awaiting: false };
    conns.add(c);
    client.on('data', (d) => {
      c.awaiting = true;
      framing.feed(d);
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      c.awaiting = false;
      if (!client.destroyed) client.write(d);
      if (c.clientGone) check();
    });
    const gone = () => {
      if (c.clientGone) return;
      c.clientGone = true;
      client.destroy();
      if (framing.missing() > 0) upstream.write(Buffer.alloc(framing.missing(), 0x20));
      else if (framing.midHeaders()) c.awaiting = false;
      setTimeout(() => {
        c.awaiting = false;
        check();
      }, LINGER_MS).unref();
      check();
    };
    client.on('end', gone);
    client.on('error', gone);
    client.on('close', gone);
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => {
      conns.delete(c);
      client.destroy();
      check();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    settled: () =>
      new Promise((resolve) => {
        waiters.push(resolve);
        check();
      }),
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const c of conns) c.upstream.end();
      await closed;
    },
  };
}

const faultScript = fileURLToPath(new URL('./dynamo-fault-child.js', import.meta.url));

/**
 * The kill trials (support/kill-trials.js) on a DynamoDB store in `table` (a
 * freshTable): each owner is a child process (support/dynamo-fault-child.js)
 * with a store of its own, through a lingeringProxy, its effect appended to
 * `effects` (an effectsFile), SIGKILLed at a random moment; `store` checks and
 * recovers once every request the child sent has been carried out.
 */
export async function dynamoKillTrials(t, { trials, table, store, effects }) {
  const proxy = await lingeringProxy();
  const url = `dynamodb://127.0.0.1:${proxy.port}/${table.name}`;
  try {
    await runKillTrials(t, { trials, url, store, effects, proxy });
  } finally {
    await proxy.close();
  }
}

async function runKillTrials(t, { trials, url, store, effects, proxy }) {
  await killTrials(t, {
    trials,
    store,
    spawn: (key, pauseMs) => lineChild(faultScript, [url, effects.path, key, pauseMs], key),
    async kill(c) {
      c.child.kill('SIGKILL');
      await c.exited;
      await proxy.settled();
    },
    effects: async (key) => effects.count(key),
    effect: (who) => async (k) => {
      effects.record(k, who);
      return jsonResponse(201, {});
    },
  });
}
