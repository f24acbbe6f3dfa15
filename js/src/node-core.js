// The Node instance of the API (see core.js) over the full component (world
// `intentkey`: the store and gateway imports, the guard export). The core modules
// are read and compiled synchronously on first use, so importing costs nothing
// until then; `await init()` reads and compiles them asynchronously instead
// (WebAssembly.compile off the main thread), so the first request does not block
// the event loop. Shared by the Node entries, the guard and the stores.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { instantiate } from '../vendor/intentkey.js';
import { coreModules } from '../vendor/core-modules.js';
import { createApi } from './core.js';
import { guardFactory } from './guard.js';
import { journalFactory } from './journal.js';
import { recordsGaugeFactory, telemetryFactory } from './telemetry.js';

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

/** Reads and compiles every core module not compiled yet, asynchronously. */
async function prepare() {
  await Promise.all(
    coreModules.map(async (name) => {
      if (modules.has(name)) return;
      const module = await WebAssembly.compile(await readFile(new URL(name, vendor)));
      if (!modules.has(name)) modules.set(name, module);
    }),
  );
}

export const api = createApi({ instantiate, getCoreModule, world: 'intentkey', prepare });
export const { claims, internal, init } = api;

/** A guard over the Node component: memory and SQLite through its guard export, PostgreSQL through its flows. */
export const createGuard = guardFactory(api, { telemetry: telemetryFactory(api.internal) });

/** The gauge of records in flight and in needs_reconciliation of a store (OpenTelemetry; see telemetry.js). */
export const observeRecords = recordsGaugeFactory(api.internal);

/** A journal over the Node guard: steps and tool calls run once per run. */
export const createJournal = journalFactory({ claims, createGuard });
