// intentkey for browsers: the pure component (world `pure`: keys, claims, schema and
// the sans-I/O flows; no store or destination imports), built from the same core
// as the Node entry's. The core modules are fetched and compiled when this module
// loads (top-level await); after that the API is synchronous. Randomness comes
// from crypto.getRandomValues.
import { createApi } from './core.js';
import { instantiate } from '../vendor/pure/intentkey.js';
import { coreModules } from '../vendor/pure/core-modules.js';

export { IntentkeyError, IntentkeyTrapError } from './core.js';

const vendor = new URL('../vendor/pure/', import.meta.url);

async function compile(name) {
  const url = new URL(name, vendor);
  const response = await fetch(url);
  if (!response.ok) throw new Error(`intentkey: cannot fetch ${url}: HTTP ${response.status}`);
  if (typeof WebAssembly.compileStreaming === 'function') {
    try {
      return await WebAssembly.compileStreaming(response.clone());
    } catch {
      // A server that sends no application/wasm type: compile from the bytes instead.
    }
  }
  return WebAssembly.compile(await response.arrayBuffer());
}

const modules = new Map(
  await Promise.all(coreModules.map(async (name) => [name, await compile(name)])),
);

function getCoreModule(name) {
  const module = modules.get(name);
  if (module === undefined) throw new Error(`intentkey: no core module ${name} in vendor/pure/`);
  return module;
}

const api = createApi({ instantiate, getCoreModule, world: 'pure' });

export const { createKeyer, newUuidKey, uuidKey, answerLines, unreadableLineAnswer, claims } = api;
