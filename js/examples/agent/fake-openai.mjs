// A local, OpenAI-compatible chat completions server that answers like a model
// does: non-deterministically. Asked to pay, it proposes the `send_pix` tool
// call with a freshly sampled remittance text, amount spelling and
// `tool_call_id` every time; once the conversation holds the tool's result, it
// answers in text. It counts every request, so a caller can tell a recorded
// completion (replayed from the journal) from a new sample.
import { createServer } from 'node:http';
import { randomBytes, randomInt } from 'node:crypto';

const REMITTANCES = ['Rent for March', 'march rent', 'Rent - March 2026', 'Aluguel de março', 'rent (march) :)'];
const AMOUNTS = ['150.00', '150', '150.0'];

const pick = (list) => list[randomInt(list.length)];

/** A chat.completion with one choice. */
function completion(model, finishReason, message) {
  return {
    id: `chatcmpl-${randomBytes(6).toString('hex')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, finish_reason: finishReason, message: { role: 'assistant', refusal: null, ...message } }],
  };
}

/** One sampled completion for the conversation `messages`. */
function sample(model, messages) {
  const toolResult = [...messages].reverse().find((m) => m.role === 'tool');
  if (toolResult !== undefined) {
    const result = JSON.parse(toolResult.content);
    return completion(model, 'stop', { content: `Done: payment ${result.payment} sent.` });
  }
  const args = {
    amount: pick(AMOUNTS),
    currency: pick(['BRL', 'brl']),
    pix_key: pick(['ana@example.com', 'Ana@Example.com']),
    remittance: `${pick(REMITTANCES)} #${randomBytes(2).toString('hex')}`,
  };
  return completion(model, 'tool_calls', {
    content: null,
    tool_calls: [
      {
        id: `call_${randomBytes(8).toString('hex')}`,
        type: 'function',
        function: { name: 'send_pix', arguments: JSON.stringify(args) },
      },
    ],
  });
}

/**
 * Starts the server on 127.0.0.1 (a free port).
 * @returns {Promise<{ url: string, requests: () => number, close: () => Promise<void> }>}
 */
export async function startFakeOpenAI() {
  let requests = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      requests++;
      const { model, messages } = JSON.parse(body);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(sample(model, messages)));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests: () => requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
