// A real agent loop: the official `openai` client's tool-calling loop against a
// local OpenAI-compatible server that samples a different remittance text, amount
// spelling and tool_call_id every time (examples/agent/fake-openai.mjs), paying
// through a bank that does not deduplicate (examples/agent/bank.mjs). Each run is
// its own process (examples/agent/agent.mjs):
//   1. the run crashes (SIGKILL) right after the payment, before anything records it;
//   2. it is resumed from the journal: the resumed run sees the recorded completion
//      (same tool_call_id and text as the crashed run's, and no new sample), the
//      bank's look-up settles the payment, and the run finishes;
//   3. a second, separate run of the same intent samples the model anew (other
//      text, other tool_call_id) and is recognized as the same intent: no payment;
//   4. another intent with the same request pays once more (runs never collide).
// The bank ends with exactly two payments. On SQLite (a file the processes
// share), PostgreSQL and Redis (each skipped outside CI when its server is
// absent, failing under CI=true). The negative control: the same loop
// without intentkey, keyed by the model's tool_call_id, pays twice.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeOpenAI } from '../examples/agent/fake-openai.mjs';
import { startBank } from '../examples/agent/bank.mjs';
import { freshSchema, pgAvailability } from './support/pg.js';
import { freshPrefix, redisAvailability } from './support/redis.js';

const { skip: pgSkip } = await pgAvailability('agent.test.js');
const { skip: redisSkip } = await redisAvailability('agent.test.js');
const AGENT = fileURLToPath(new URL('../examples/agent/agent.mjs', import.meta.url));
const SECRET = '6a'.repeat(32);
const STALE = 2;

/** Runs one agent process; resolves with its events and exit signal. */
function agent(config) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      const events = out
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
      resolve({ code, signal, events, stderr: err });
    });
  });
}

const only = (events, kind) => events.filter((e) => e.event === kind);

function agentScenario(name, makeStore) {
  describe(`an agent run, crashed and resumed, on ${name}`, () => {
    let llm;
    let bank;
    let store;
    before(async () => {
      llm = await startFakeOpenAI();
      bank = await startBank();
      store = await makeStore.open();
    });
    after(async () => {
      await llm?.close();
      await bank?.close();
      await makeStore.close?.();
    });

    test('the payment runs once; the resume replays the recorded completion; the same intent is recognized', async () => {
      const base = { llmUrl: llm.url, bankUrl: bank.url, store, secretHex: SECRET, staleAfterSeconds: STALE };
      const run = { tenantId: 'acme', intentId: `rent-2026-03-${name}`, intentEpoch: 1_764_547_200 };

      // 1. The run crashes right after the bank took the payment.
      const crashed = await agent({ ...base, run, session: 'session-1', crashAfterPayment: true });
      assert.equal(crashed.signal, 'SIGKILL', crashed.stderr);
      const [sampled] = only(crashed.events, 'completion');
      assert.equal(sampled.source, 'sampled');
      assert.equal(only(crashed.events, 'payment').length, 1);
      assert.equal(bank.payments().length, 1);
      assert.equal(llm.requests(), 1);

      // 2. Resumed from the journal, its clock past the crashed claim's staleness.
      const resumed = await agent({ ...base, run, session: 'session-1', clockOffsetSeconds: STALE + 1 });
      assert.equal(resumed.code, 0, JSON.stringify(resumed.events) + resumed.stderr);
      const [replayed, final] = only(resumed.events, 'completion');
      assert.equal(replayed.source, 'journal', 'the resumed run sees the recorded completion');
      assert.equal(replayed.toolCallId, sampled.toolCallId);
      assert.deepEqual(replayed.arguments, sampled.arguments);
      assert.equal(final.source, 'sampled');
      const recovered = only(resumed.events, 'recovered');
      assert.deepEqual(
        recovered.map((e) => e.kind),
        ['tool-call'],
        'the bank’s look-up settled the payment',
      );
      assert.equal(only(resumed.events, 'payment').length, 0, 'the payment did not run again');
      assert.equal(only(resumed.events, 'tool-call')[0].source, 'journal');
      assert.equal(bank.payments().length, 1);
      assert.equal(llm.requests(), 2, 'one new sample: the final answer');
      assert.match(only(resumed.events, 'done')[0].answer, /pay_1/);

      // 3. A separate run of the same intent: the model is sampled anew.
      const separate = await agent({ ...base, run, session: 'session-2' });
      assert.equal(separate.code, 0, JSON.stringify(separate.events) + separate.stderr);
      const [resample] = only(separate.events, 'completion');
      assert.equal(resample.source, 'sampled');
      assert.notEqual(resample.toolCallId, sampled.toolCallId, 'a new tool_call_id');
      assert.equal(only(separate.events, 'tool-call')[0].source, 'journal', 'recognized as the same intent');
      assert.deepEqual(only(separate.events, 'tool-call')[0].result, { payment: 'pay_1' });
      assert.equal(bank.payments().length, 1, 'still one payment');

      // 4. Another intent, the same request: its own payment.
      const other = await agent({ ...base, run: { ...run, intentId: `${run.intentId}-b` }, session: 'session-1' });
      assert.equal(other.code, 0, JSON.stringify(other.events) + other.stderr);
      assert.equal(only(other.events, 'tool-call')[0].source, 'ran');
      assert.equal(bank.payments().length, 2, 'two intents: two payments');
    });
  });
}

{
  const dir = mkdtempSync(join(tmpdir(), 'intentkey-agent-'));
  agentScenario('SQLite', {
    open: async () => ({ kind: 'sqlite', path: join(dir, 'journal.db') }),
    close: () => rmSync(dir, { recursive: true, force: true }),
  });
}

describe('on PostgreSQL', { skip: pgSkip }, () => {
  let schema;
  agentScenario('PostgreSQL', {
    open: async () => {
      schema = await freshSchema();
      return { kind: 'pg', config: schema.config };
    },
    close: async () => schema?.drop(),
  });
});

describe('on Redis', { skip: redisSkip }, () => {
  let prefix;
  agentScenario('Redis', {
    open: async () => {
      prefix = await freshPrefix();
      return { kind: 'redis', url: prefix.url };
    },
    close: async () => prefix?.drop(),
  });
});

describe('the negative control: the same agent without intentkey', () => {
  test('keyed by the model’s tool_call_id, a crashed and resumed run pays twice', async () => {
    const llm = await startFakeOpenAI();
    const bank = await startBank();
    try {
      const base = { llmUrl: llm.url, bankUrl: bank.url, naive: true };
      const crashed = await agent({ ...base, crashAfterPayment: true });
      assert.equal(crashed.signal, 'SIGKILL', crashed.stderr);
      const resumed = await agent(base);
      assert.equal(resumed.code, 0, resumed.stderr);
      const payments = bank.payments();
      assert.equal(payments.length, 2, 'the resumed run resampled and paid again');
      assert.notEqual(payments[0].key, payments[1].key, 'each sample brought its own tool_call_id');
    } finally {
      await llm.close();
      await bank.close();
    }
  });
});
