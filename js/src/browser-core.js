// The browser instance of the API (see core.js): the pure component (world
// `pure`: keys, claims, http, schema and the sans-I/O flows; no store or
// destination imports). The core modules are fetched and compiled when this
// module loads (top-level await); after that the API is synchronous. Shared by
// the browser entry and the browser build of intentkey/fetch.
import { createApi } from './core.js';
import { instantiate } from '../vendor/pure/intentkey.js';
import { coreModules } from '../vendor/pure/core-modules.js';

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

const modules = new Map(await Promise.all(coreModules.map(async (name) => [name, await compile(name)])));

function getCoreModule(name) {
  const module = modules.get(name);
  if (module === undefined) throw new Error(`intentkey: no core module ${name} in vendor/pure/`);
  return module;
}

/** The modules are compiled at load: init() has nothing left to do but instantiate. */
export const api = createApi({ instantiate, getCoreModule, world: 'pure' });
