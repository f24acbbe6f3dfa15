// An agent that pays a bill with the official `openai` client's tool-calling
// loop, made safe to retry with intentkey's journal:
//   - each completion is a journaled step: sampled once per run and recorded,
//     so a resumed run sees the recorded completion, not a new sample;
//   - the model's tool call is validated by the orchestrator and keyed by the
//     run's intent and the normalized arguments (never the model's remittance
//     text or its tool_call_id), then claimed before the payment runs;
//   - a payment left in flight by a crash is settled by asking the bank with
//     the same key: found is recorded, the payment never runs twice.
//
// Run as a process: `node agent.mjs '<json config>'` prints one JSON line per
// event (the test and the demo read them). The config names the model server,
// the bank, the store, the run, and whether to crash right after the payment.
import OpenAI from 'openai';
import { createJournal, createKeyer, pgStore, redisStore, sqliteStore } from '../../src/index.js';
import { bankClient } from './bank.mjs';

/** The tools the orchestrator allows: the model's name → the action type, and the arguments it requires. */
export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'send_pix',
      description: 'Send a Pix payment.',
      parameters: {
        type: 'object',
        properties: {
          amount: { type: 'string', description: 'Decimal amount, e.g. 150.00' },
          currency: { type: 'string', description: 'ISO 4217 code' },
          pix_key: { type: 'string', description: 'The creditor’s Pix key' },
          remittance: { type: 'string', description: 'Free text for the creditor' },
        },
        required: ['amount', 'currency', 'pix_key'],
      },
    },
  },
];
const ACTIONS = new Map([['send_pix', { actionType: 'pix.send', required: ['amount', 'currency', 'pix_key'] }]]);

/**
 * The policy the tool calls are keyed under: the tools allowed (action types)
 * and every argument classified. The model's free text (`remittance`) is
 * ignored, so a resampled text is the same action.
 */
export const TOOL_POLICY = {
  version: 1,
  actionTypes: ['pix.send'],
  fields: {
    amount: { class: 'key', normalizer: 'decimal', scale: 2 },
    currency: { class: 'key', normalizer: 'currency' },
    pix_key: { class: 'key', normalizer: 'pix-key' },
    remittance: { class: 'ignored' },
  },
};

/** The orchestrator's validation of a tool call the model proposed: { tool, arguments }, or it throws. */
export function validateToolCall(call) {
  const action = call.type === 'function' ? ACTIONS.get(call.function.name) : undefined;
  if (action === undefined) throw new Error(`the model asked for a tool that is not offered: ${call.function?.name}`);
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    throw new Error('the model’s tool arguments are not JSON');
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new Error('the tool arguments must be an object');
  for (const field of action.required) {
    if (typeof args[field] !== 'string' || args[field] === '') throw new Error(`the tool call lacks ${field}`);
  }
  return { tool: action.actionType, arguments: args };
}

/**
 * The tool-calling loop. `session` names this conversation's steps: a run
 * resumed after a crash keeps its session (and replays its completions); a
 * separate run of the same intent starts a new one (and samples anew).
 */
export async function runAgent({ openai, journal, run, session, bank, emit, crashAfterPayment = false }) {
  const messages = [
    { role: 'system', content: 'You pay bills with the send_pix tool.' },
    { role: 'user', content: 'Pay Ana the March rent: 150.00 BRL to the Pix key ana@example.com.' },
  ];
  for (let turn = 1; turn <= 4; turn++) {
    const name = `${session}/completion-${turn}`;
    let sampled = false;
    const completion = await journal.step(
      run,
      name,
      () => {
        sampled = true;
        return openai.chat.completions.create({ model: 'fake-model', messages, tools: TOOLS });
      },
      { input: messages },
    );
    const message = completion.choices[0].message;
    const call = message.tool_calls?.[0];
    emit({
      event: 'completion',
      step: name,
      source: sampled ? 'sampled' : 'journal',
      toolCallId: call?.id ?? null,
      arguments: call ? JSON.parse(call.function.arguments) : null,
      text: message.content,
    });
    messages.push(message);
    if (!message.tool_calls?.length) return { answer: message.content };
    for (const proposed of message.tool_calls) {
      const toolCall = validateToolCall(proposed);
      let paid = false;
      const result = await journal.toolCall(
        run,
        toolCall,
        async (key) => {
          const payment = await bank.pay(key, toolCall.arguments);
          paid = true;
          emit({ event: 'payment', key, payment: payment.payment });
          if (crashAfterPayment) {
            emit({ event: 'crash', after: 'payment', key });
            process.kill(process.pid, 'SIGKILL');
            await new Promise(() => {});
          }
          return { payment: payment.payment };
        },
        {
          // The bank is asked with the same key; what it found is recorded as the
          // tool's result, in the shape the effect returns.
          lookup: async (key) => {
            const answer = await bank.lookup(key);
            return typeof answer === 'object' ? { found: { payment: answer.found.payment } } : answer;
          },
          readYourWrites: true,
        },
      );
      emit({ event: 'tool-call', tool: toolCall.tool, toolCallId: proposed.id, source: paid ? 'ran' : 'journal', result });
      messages.push({ role: 'tool', tool_call_id: proposed.id, content: JSON.stringify(result) });
    }
  }
  throw new Error('the model did not finish in 4 turns');
}

/**
 * The same loop without intentkey, the way agents are often written: nothing is
 * journaled, and the payment's idempotency key is the model's tool_call_id. A
 * resumed run samples the model again, gets a new tool_call_id, and pays again.
 */
export async function runNaiveAgent({ openai, bank, emit, crashAfterPayment = false }) {
  const messages = [
    { role: 'system', content: 'You pay bills with the send_pix tool.' },
    { role: 'user', content: 'Pay Ana the March rent: 150.00 BRL to the Pix key ana@example.com.' },
  ];
  for (let turn = 1; turn <= 4; turn++) {
    const completion = await openai.chat.completions.create({ model: 'fake-model', messages, tools: TOOLS });
    const message = completion.choices[0].message;
    const call = message.tool_calls?.[0];
    emit({ event: 'completion', step: `naive/completion-${turn}`, source: 'sampled', toolCallId: call?.id ?? null, text: message.content });
    messages.push(message);
    if (!message.tool_calls?.length) return { answer: message.content };
    for (const proposed of message.tool_calls) {
      const { arguments: args } = validateToolCall(proposed);
      const payment = await bank.pay(proposed.id, args);
      emit({ event: 'payment', key: proposed.id, payment: payment.payment });
      if (crashAfterPayment) {
        emit({ event: 'crash', after: 'payment', key: proposed.id });
        process.kill(process.pid, 'SIGKILL');
        await new Promise(() => {});
      }
      messages.push({ role: 'tool', tool_call_id: proposed.id, content: JSON.stringify({ payment: payment.payment }) });
    }
  }
  throw new Error('the model did not finish in 4 turns');
}

/** The store a config names: { kind: 'sqlite', path }, { kind: 'pg', config } or { kind: 'redis', url }. */
export async function openStore(store) {
  if (store.kind === 'sqlite') return sqliteStore(store.path);
  if (store.kind === 'pg') return pgStore(store.config);
  if (store.kind === 'redis') return redisStore({ url: store.url });
  throw new Error(`unknown store kind ${store.kind}`);
}

async function main() {
  const config = JSON.parse(process.argv[2]);
  const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
  if (config.naive === true) {
    const openai = new OpenAI({ apiKey: 'sk-local-fake', baseURL: config.llmUrl, maxRetries: 2 });
    const bank = bankClient(config.bankUrl);
    const out = await runNaiveAgent({ openai, bank, emit, crashAfterPayment: config.crashAfterPayment === true });
    emit({ event: 'done', answer: out.answer });
    return;
  }
  const store = await openStore(config.store);
  const keyer = createKeyer({ secret: config.secretHex, policy: TOOL_POLICY });
  const journal = createJournal({
    store,
    keyer,
    staleAfterSeconds: config.staleAfterSeconds,
    // A resumed run may pass the clock forward, past the crashed claim's staleness.
    now: () => Math.floor(Date.now() / 1000) + (config.clockOffsetSeconds ?? 0),
    observe: (e) => {
      if (e.outcome === 'recovered') emit({ event: 'recovered', kind: e.kind, name: e.name, key: e.key });
    },
  });
  const openai = new OpenAI({ apiKey: 'sk-local-fake', baseURL: config.llmUrl, maxRetries: 2 });
  try {
    const out = await runAgent({
      openai,
      journal,
      run: config.run,
      session: config.session,
      bank: bankClient(config.bankUrl),
      emit,
      crashAfterPayment: config.crashAfterPayment === true,
    });
    emit({ event: 'done', answer: out.answer });
  } catch (e) {
    emit({ event: 'error', code: e.code ?? null, message: e.message, dueAt: e.dueAt ?? null });
    process.exitCode = 1;
  } finally {
    await store.close?.();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
