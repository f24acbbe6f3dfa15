// intentkey/fetch on workerd (Cloudflare Workers): the fetch adapter over the
// pure component with static core modules (worker-core.js). Nothing here imports
// from Node; the memory store (intentkey/stores/memory) runs here too, driven
// through the core's flows.
import { api } from '../worker-core.js';
import { guardFactory } from '../guard.js';
import { pipelineFactory } from '../http/pipeline.js';
import { fetchAdapter } from './fetch.js';

export const { init } = api;
export const { withIdempotency, idempotency, idempotencyOf } = fetchAdapter(
  pipelineFactory({ createEndpoint: api.createEndpoint, createGuard: guardFactory(api) }),
);
