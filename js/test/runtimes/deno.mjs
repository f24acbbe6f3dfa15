// The package in Deno (the npm package deno's binary): the packed package installed
// into a temporary project's node_modules (Deno uses it, as it does for any
// project with a package.json), imported by name from main.mjs, which runs the key
// vectors and the HTTP conformance vectors (suite.js). Deno may read the project
// and nothing else. Prints `deno: N/N key vectors, …`; exits 1 on any failure. If
// Deno cannot run here: SKIPPED: (fails under CI=true).
import { binPath, probe, runMain, unavailable } from './support.mjs';

const deno = binPath('deno');
const version = probe(deno);
if (version === null) unavailable('deno', `${deno} does not run here (npm ci installs it with the npm package deno)`);
runMain('deno', version, (app) => [deno, ['run', '--no-prompt', `--allow-read=${app}`, 'main.mjs', 'deno']]);
