// The Node instance of the API (see core.js) over the full component (world
// `intentkey`: the store and gateway imports, the guard export). The core modules
// are read and compiled synchronously on first use, so importing costs nothing
// until then. Shared by the entry (index.js), the guard and the stores.
import { readFileSync } from 'node:fs';
import { instantiate } from '../vendor/intentkey.js';
import { createApi } from './core.js';

const vendor = new URL('../vendor/', import.meta.url);
const modules = new Map();

function getCoreModule(name) {
  let module = modules.get(name);
  if (module === undefined) {
    module = new WebAssembly.Module(readFileSync(new URL(name, vendor)));
    modules.set(name, module);
  }
  return module;
}

export const api = createApi({ instantiate, getCoreModule, world: 'intentkey' });
export const { claims, internal } = api;
