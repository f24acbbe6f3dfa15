// intentkey/fetch in browsers (a service worker, say): the fetch adapter over the
// pure component of the browser entry. Nothing here imports from Node; the memory
// store (intentkey/stores/memory) runs here too, driven through the core's flows.
import { api } from '../browser-core.js';
import { guardFactory } from '../guard.js';
import { pipelineFactory } from '../http/pipeline.js';
import { fetchAdapter } from './fetch.js';

export const { init } = api;
export const { withIdempotency, idempotency, idempotencyOf } = fetchAdapter(
  pipelineFactory({ createEndpoint: api.createEndpoint, createGuard: guardFactory(api) }),
);
