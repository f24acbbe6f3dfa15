// A node --test reporter that counts what was skipped: one `SKIPPED: <file>: …`
// line per test file that skipped anything (with the reason), then a summary
// line. Node 20's own summary counts skipped tests but not skipped suites, and
// says nothing of why; a skip must never pass unnoticed. npm test runs it beside
// the TAP reporter.
//
// A file that skips says so on its stdout (`SKIPPED: <name>: <why>`, see
// support/pg.js); its skipped tests carry the same <why> as their skip reason, so
// they are counted against the file that ran them even when the suite is defined
// in a shared module.
import { relative } from 'node:path';

export default async function* skips(source) {
  const fileOfReason = new Map();
  const counts = new Map(); // reason -> { count, file }
  for await (const event of source) {
    if (event.type === 'test:stdout' && typeof event.data.message === 'string') {
      for (const line of event.data.message.split('\n')) {
        const m = /^SKIPPED: [^:]+: (.*)$/.exec(line);
        if (m !== null && event.data.file !== undefined) fileOfReason.set(m[1], relative(process.cwd(), event.data.file));
      }
    }
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.skip !== undefined && event.data.skip !== false) {
      const reason = typeof event.data.skip === 'string' ? event.data.skip.replace(/^SKIPPED: /, '') : '(no reason given)';
      const entry = counts.get(reason) ?? { count: 0, file: event.data.file };
      entry.count++;
      counts.set(reason, entry);
    }
  }
  const byFile = new Map();
  for (const [reason, { count, file }] of counts) {
    const name = fileOfReason.get(reason) ?? (file === undefined ? '(unknown file)' : relative(process.cwd(), file));
    const entry = byFile.get(name) ?? { count: 0, reasons: [] };
    entry.count += count;
    entry.reasons.push(reason);
    byFile.set(name, entry);
  }
  let total = 0;
  for (const [file, { count, reasons }] of [...byFile].sort()) {
    total += count;
    yield `SKIPPED: ${file}: ${count} test${count === 1 ? '' : 's'} or suite${count === 1 ? '' : 's'}: ${reasons.join('; ')}\n`;
  }
  yield total === 0
    ? 'skipped: nothing (every test and suite ran)\n'
    : `SKIPPED: ${total} tests or suites in ${byFile.size} file${byFile.size === 1 ? '' : 's'} (see above)\n`;
}
