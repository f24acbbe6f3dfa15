// The Worker of the workerd test (workerd.mjs): a module Worker that imports the
// package as a Worker project would, by name, through the package's `workerd`
// export conditions (intentkey, intentkey/fetch, intentkey/stores/memory). POST
// /suite with the vector files runs suite.js inside workerd; GET /key derives one
// key (the cold start workerd.mjs reports).
//
// The HTTP vector runner takes a guard, and the package's guard (createGuard) is
// exported by its Node entry only: on workerd it is the one intentkey/fetch builds
// over the pure component. The runner gets that same guard the way the Chromium
// page gets it (test/browser/http-vectors-page.js): guardFactory over the workerd
// instance of the API, from the installed package's files.
import * as intentkey from 'intentkey';
import * as fetchAdapter from 'intentkey/fetch';
import { memoryStore } from 'intentkey/stores/memory';
import { api as workerApi } from './node_modules/intentkey/src/worker-core.js';
import { guardFactory } from './node_modules/intentkey/src/guard.js';
import { runSuite } from './suite.js';

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method === 'GET' && url.pathname === '/key') {
      // The first key of a fresh Worker (workerd.mjs times this request: the cold start).
      const keyer = intentkey.createKeyer({ secret: '5c'.repeat(32) });
      const key = keyer.derive({ tenantId: 't', actionType: 'pix.send', intentEpoch: 1700000000, payload: '{"amount":"10.50"}' });
      return new Response(key);
    }
    if (request.method !== 'POST' || url.pathname !== '/suite') return new Response('not found', { status: 404 });
    const { keyVectors, httpVectors } = await request.json();
    try {
      const failures = [];
      if (intentkey.createEndpoint !== workerApi.createEndpoint) {
        failures.push('the workerd entry and worker-core.js are not one instance of the API');
      }
      const httpApi = { createEndpoint: intentkey.createEndpoint, createGuard: guardFactory(workerApi), memoryStore };
      const result = await runSuite('workerd', intentkey, {
        entry: 'worker',
        keyVectors,
        httpVectors,
        httpApi,
        fetchAdapter,
        memoryStore,
      });
      result.failures.unshift(...failures);
      return Response.json(result);
    } catch (e) {
      return Response.json({ line: 'workerd: the suite threw', failures: [String(e && e.stack ? e.stack : e)] }, { status: 500 });
    }
  },
};
