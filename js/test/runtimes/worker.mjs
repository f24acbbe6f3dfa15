// The Worker of the workerd test (workerd.mjs): a module Worker that imports the
// package as a Worker project would, by name, through the package's `workerd`
// export condition. POST /suite with the vector files runs suite.js inside workerd.
import * as intentkey from 'intentkey';
import { runSuite } from './suite.js';

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method !== 'POST' || url.pathname !== '/suite') return new Response('not found', { status: 404 });
    const { keyVectors, httpVectors } = await request.json();
    let runHttpVectors;
    if (httpVectors !== null) ({ runHttpVectors } = await import('./http-suite.js'));
    try {
      const result = await runSuite('workerd', intentkey, { entry: 'worker', keyVectors, httpVectors, runHttpVectors });
      return Response.json(result);
    } catch (e) {
      return Response.json({ line: 'workerd: the suite threw', failures: [String(e && e.stack ? e.stack : e)] }, { status: 500 });
    }
  },
};
