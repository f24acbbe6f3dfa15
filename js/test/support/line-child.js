// A child Node process whose stdout is read line by line: the race and fault
// tests' contenders print `ready`, wait for a line on stdin, then report.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * Starts `node script ...args`. `next()` resolves with the next stdout line, and
 * rejects (with the child's stderr) if it exits first.
 * @param {string} script
 * @param {string[]} args
 * @param {string} [label] names the child in the early-exit error
 */
export function lineChild(script, args, label = 'child') {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const lines = createInterface({ input: child.stdout });
  const queue = [];
  const waiting = [];
  lines.on('line', (l) => (waiting.length ? waiting.shift().resolve(l) : queue.push(l)));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  exited.then(({ code, signal }) => {
    const e = new Error(`${label} exited (${code ?? signal}) early: ${stderr}`);
    while (waiting.length) waiting.shift().reject(e);
  });
  const next = () =>
    queue.length ? Promise.resolve(queue.shift()) : new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  return { child, next, exited, stderr: () => stderr };
}
