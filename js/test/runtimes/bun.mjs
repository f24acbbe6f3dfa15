// The package in Bun (the npm package bun's binary): the packed package installed
// into a temporary project, imported by name from main.mjs, which runs the key
// vectors and the HTTP conformance vectors (suite.js). Prints `bun: N/N key
// vectors, …`; exits 1 on any failure. If Bun cannot run here: SKIPPED: (fails
// under CI=true).
import { binPath, probe, runMain, unavailable } from './support.mjs';

const bun = binPath('bun');
const version = probe(bun);
if (version === null) unavailable('bun', `${bun} does not run here (npm ci installs it with the npm package bun)`);
runMain('bun', `bun ${version}`, (app) => [bun, ['main.mjs', 'bun']]);
