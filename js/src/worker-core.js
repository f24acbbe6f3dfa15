// The workerd instance of the API (see core.js): the pure component, as in the
// browser entry (world `pure`: keys, claims, http, schema and the sans-I/O flows;
// no store or destination imports). workerd does not compile WebAssembly from
// bytes at run time, so the core modules are static .wasm imports
// (vendor/pure/core-modules-static.js, written by the build), which workerd and
// wrangler's bundler hand over as compiled WebAssembly.Modules. Randomness comes
// from crypto.getRandomValues, which a Worker may only use while handling a
// request: the component is instantiated on the first call, never at import.
// Shared by the workerd entry and the workerd build of intentkey/fetch.
import { createApi } from './core.js';
import { instantiate } from '../vendor/pure/intentkey.js';
import { compiledModules } from '../vendor/pure/core-modules-static.js';

function getCoreModule(name) {
  const module = compiledModules.get(name);
  if (!(module instanceof WebAssembly.Module)) {
    throw new Error(
      `intentkey: the core module ${name} was not imported as a compiled WebAssembly.Module; ` +
        'in workerd a static .wasm import is one (bundlers need a CompiledWasm rule for .wasm files)',
    );
  }
  return module;
}

export const api = createApi({ instantiate, getCoreModule, world: 'pure' });
