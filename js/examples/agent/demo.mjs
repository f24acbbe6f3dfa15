// `npm run demo:agent`: the agent story as a timeline. A model samples a
// remittance, the agent pays, the process is killed before it records
// anything, the run is resumed from the journal, and the bank holds one
// payment. Then a separate run of the same intent samples a new remittance
// and a new tool_call_id, and is recognized as the same intent.
//
// Everything is local: an OpenAI-compatible fake model, a bank that does not
// deduplicate, and a SQLite journal in a temporary directory. Each run of the
// agent is its own process (agent.mjs), driven by the official `openai` client.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFakeOpenAI } from './fake-openai.mjs';
import { startBank } from './bank.mjs';

const AGENT = fileURLToPath(new URL('./agent.mjs', import.meta.url));
const STALE = 2;

function agent(config, onEvent) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let buffered = '';
    child.stdout.setEncoding('utf8').on('data', (d) => {
      buffered += d;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        onEvent(JSON.parse(buffered.slice(0, nl)));
        buffered = buffered.slice(nl + 1);
      }
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
}

const started = Date.now();
const line = (what) => console.log(`  ${String(((Date.now() - started) / 1000).toFixed(2)).padStart(6)} s  ${what}`);
const short = (key) => `${key.slice(0, 12)}…`;

function narrate(event) {
  switch (event.event) {
    case 'completion':
      if (event.toolCallId === null) line(`model (${event.source}): "${event.text}"`);
      else
        line(
          `model (${event.source === 'journal' ? 'replayed from the journal' : 'sampled'}): send_pix ${event.arguments.amount} ${event.arguments.currency}` +
            ` to ${event.arguments.pix_key}, remittance "${event.arguments.remittance}", tool_call_id ${event.toolCallId}`,
        );
      break;
    case 'payment':
      line(`bank: payment ${event.payment} made with key ${short(event.key)}`);
      break;
    case 'crash':
      line('CRASH: the process is killed before it records the payment');
      break;
    case 'recovered':
      line(`journal: the payment was in flight; the bank, asked with key ${short(event.key)}, found it: recorded, not re-run`);
      break;
    case 'tool-call':
      line(`tool call: ${event.source === 'ran' ? 'ran' : 'answered from the journal'} → ${JSON.stringify(event.result)}`);
      break;
    case 'done':
      line(`agent: "${event.answer}"`);
      break;
    case 'error':
      line(`agent error ${event.code}: ${event.message}`);
      break;
    default:
      break;
  }
}

const llm = await startFakeOpenAI();
const bank = await startBank();
const dir = mkdtempSync(join(tmpdir(), 'intentkey-agent-demo-'));
try {
  const base = {
    llmUrl: llm.url,
    bankUrl: bank.url,
    store: { kind: 'sqlite', path: join(dir, 'journal.db') },
    // A demo secret; real deployments load 32+ random bytes from a secret store.
    secretHex: '6a'.repeat(32),
    staleAfterSeconds: STALE,
  };
  const run = { tenantId: 'acme', intentId: 'rent-2026-03', intentEpoch: 1_764_547_200 };
  console.log(`intentkey: an agent pays the rent; the run's intent is ${run.intentId}\n`);

  console.log('run 1, session 1: the model proposes a payment and the process dies right after it');
  const first = await agent({ ...base, run, session: 'session-1', crashAfterPayment: true }, narrate);
  line(`process exited by ${first.signal}`);

  console.log(`\nrun 1, session 1 resumed (its clock ${STALE + 1} s on, past the claim's staleness)`);
  await agent({ ...base, run, session: 'session-1', clockOffsetSeconds: STALE + 1 }, narrate);

  console.log('\nrun 2 of the same intent, a new session: the model samples a new remittance and tool_call_id');
  await agent({ ...base, run, session: 'session-2' }, narrate);

  const payments = bank.payments();
  console.log(`\nthe bank holds ${payments.length} payment(s); the model was sampled ${llm.requests()} time(s)`);
  for (const p of payments) console.log(`  ${p.payment}: ${p.amount} ${p.currency} to ${p.pix_key}, key ${short(p.key)}`);
  if (payments.length !== 1) {
    console.error('intentkey demo agent: expected exactly one payment');
    process.exitCode = 1;
  }
} finally {
  await llm.close();
  await bank.close();
  rmSync(dir, { recursive: true, force: true });
}
