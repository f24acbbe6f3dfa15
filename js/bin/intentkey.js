#!/usr/bin/env node
// intentkey derive --jsonl: the JSON-lines batch contract of the Rust command-line
// tool, on the same WebAssembly component. Every answer line comes from the core's
// answer-lines export; this file only reads bytes, splits them into lines, and
// writes the answers in order.
import { createReadStream, openSync, readFileSync } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { once } from 'node:events';
import { IntentkeyError, answerLines, unreadableLineAnswer } from '../src/index.js';

const USAGE = `usage: intentkey derive --jsonl [--input FILE] [--policy FILE] [--quiet]

Reads one JSON request per line (id, secret_hex, tenant_id, action_type, payload,
intent_epoch) from stdin or FILE and writes one JSON answer per line, in order:
{"id":...,"key":"<64 hex>"} or {"id":...,"error":{"code":"...","message":"..."}}.
Lines split on "\\n" only. A summary goes to stderr (--quiet turns it off).
The exit status is 0 when every line was answered. --policy uses your own policy
(JSON) instead of the built-in payments policy.`;

const BATCH_LINES = 1000;
const BATCH_BYTES = 4 << 20;

function fail(message, status = 2) {
  process.stderr.write(`intentkey: ${message}\n${USAGE}\n`);
  process.exitCode = status;
}

function parseArgs(argv) {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') return { help: true };
  if (command !== 'derive') return { error: command ? `unknown command ${JSON.stringify(command)}` : 'no command' };
  const opts = { jsonl: false, quiet: false, input: undefined, policy: undefined };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--jsonl') opts.jsonl = true;
    else if (arg === '--quiet' || arg === '-q') opts.quiet = true;
    else if (arg === '--input') {
      if (i + 1 >= rest.length) return { error: '--input needs a file' };
      opts.input = rest[++i];
    } else if (arg.startsWith('--input=')) opts.input = arg.slice('--input='.length);
    else if (arg === '--policy') {
      if (i + 1 >= rest.length) return { error: '--policy needs a file' };
      opts.policy = rest[++i];
    } else if (arg.startsWith('--policy=')) opts.policy = arg.slice('--policy='.length);
    else if (arg === '--help' || arg === '-h') return { help: true };
    else return { error: `unsupported argument ${JSON.stringify(arg)} (this tool runs derive --jsonl only)` };
  }
  if (!opts.jsonl) return { error: 'derive needs --jsonl (single derivations: use the library API)' };
  return opts;
}

async function write(stream, text) {
  if (!stream.write(text)) await once(stream, 'drain');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (opts.error) {
    fail(opts.error);
    return;
  }

  // The policy is read and validated (by the core) before any line is answered.
  let policy;
  if (opts.policy !== undefined) {
    try {
      policy = new TextDecoder('utf-8', { fatal: true }).decode(readFileSync(opts.policy));
    } catch (e) {
      process.stderr.write(`intentkey: cannot read policy ${opts.policy}: ${e.message}\n`);
      process.exitCode = 2;
      return;
    }
    try {
      answerLines([], { policy });
    } catch (e) {
      if (!(e instanceof IntentkeyError)) throw e;
      process.stderr.write(`intentkey: policy ${opts.policy}: ${e.code}: ${e.message}\n`);
      process.exitCode = 2;
      return;
    }
  }

  let input = process.stdin;
  if (opts.input !== undefined) {
    try {
      input = createReadStream('', { fd: openSync(opts.input, 'r') });
    } catch (e) {
      process.stderr.write(`intentkey: cannot open ${opts.input}: ${e.message}\n`);
      process.exitCode = 2;
      return;
    }
  }
  const out = process.stdout;
  let lines = 0;
  let keys = 0;

  // Lines of the current batch, as bytes; `partial` holds a line not yet ended by "\n".
  let batch = [];
  let batchBytes = 0;
  let partial = [];

  async function flush() {
    if (batch.length === 0) return;
    const texts = new Array(batch.length);
    const bad = [];
    for (let i = 0; i < batch.length; i++) {
      const bytes = batch[i];
      if (isUtf8(bytes)) texts[i] = bytes.toString('utf8');
      else bad.push(i);
    }
    let answers;
    if (bad.length === 0) {
      answers = answerLines(texts, { policy });
    } else {
      const skip = new Set(bad);
      const good = answerLines(texts.filter((_, i) => !skip.has(i)), { policy });
      answers = new Array(batch.length);
      for (let i = 0, j = 0; i < batch.length; i++) answers[i] = skip.has(i) ? unreadableLineAnswer() : good[j++];
    }
    if (answers.length !== batch.length) {
      throw new Error(`the component answered ${answers.length} of ${batch.length} lines`);
    }
    for (const answer of answers) {
      // A key answer ends `"key":"<hex>"}`, an error answer ends `"message":"..."}}`.
      if (!answer.endsWith('}}')) keys++;
    }
    lines += batch.length;
    batch = [];
    batchBytes = 0;
    await write(out, `${answers.join('\n')}\n`);
  }

  async function addLine(bytes) {
    batch.push(bytes);
    batchBytes += bytes.length;
    if (batch.length >= BATCH_LINES || batchBytes >= BATCH_BYTES) await flush();
  }

  for await (const chunk of input) {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) break;
      let line = chunk.subarray(start, nl);
      if (partial.length > 0) {
        partial.push(line);
        line = Buffer.concat(partial);
        partial = [];
      }
      await addLine(line);
      start = nl + 1;
    }
    if (start < chunk.length) partial.push(chunk.subarray(start));
  }
  if (partial.length > 0) await addLine(Buffer.concat(partial));
  await flush();

  if (!opts.quiet) {
    process.stderr.write(`intentkey: answered ${lines} lines: ${keys} keys, ${lines - keys} errors\n`);
  }
}

// Like the Rust tool: a run that cannot finish (unreadable input, closed output) exits 2.
process.stdout.on('error', (e) => {
  process.stderr.write(`intentkey: writing output: ${e.message}\n`);
  process.exit(2);
});

main().catch((e) => {
  process.stderr.write(`intentkey: ${e instanceof Error ? e.message : e}\n`);
  process.exitCode = 2;
});
