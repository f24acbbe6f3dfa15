// intentkey for Node: the Rust core as one WebAssembly component (see core.js).
// The core modules are read and compiled synchronously on first use, so the API
// is synchronous and importing the package costs nothing until it is used.
import { readFileSync } from 'node:fs';
import { createApi } from './core.js';

export { IntentkeyError, IntentkeyTrapError } from './core.js';

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

const api = createApi(getCoreModule);

export const { createKeyer, newUuidKey, uuidKey, answerLines, unreadableLineAnswer } = api;
