// Whether a test server answers, and what a test file does when it does not:
// with CI=true the file FAILS loudly; outside CI its tests are skipped, with a
// `SKIPPED: <file>: <why>` line that the skips reporter (skips.mjs) counts.

/**
 * `{ skip: false }` when `why` is null (the server answered), else, outside CI,
 * `{ skip: message }` and a `SKIPPED: <file>: <message>` line; with CI=true it throws.
 * @param {string} file the test file, for the SKIPPED line
 * @param {string} what the server, e.g. "Redis"
 * @param {string} where where it was looked for (no credentials)
 * @param {string | null} why why it did not answer
 * @param {string} hint how to start one
 */
export function availability(file, what, where, why, hint) {
  if (why === null) return { skip: false };
  if (process.env.CI === 'true') {
    throw new Error(`${what} at ${where} is unreachable (${why}) and CI=true: the ${what} tests cannot run. ${hint}`);
  }
  const message = `${what} at ${where} is unreachable (${why}); ${what} tests SKIPPED (outside CI; with CI=true they fail)`;
  console.log(`SKIPPED: ${file}: ${message}`);
  return { skip: `SKIPPED: ${message}` };
}
