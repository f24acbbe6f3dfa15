// intentkey/fetch on Node (and on Bun and Deno, which take the package's Node
// entries): the fetch adapter over the Node component.
import { createPipeline, init } from '../http/node.js';
import { fetchAdapter } from './fetch.js';

export { init };
export const { withIdempotency, idempotency, idempotencyOf } = fetchAdapter(createPipeline);
