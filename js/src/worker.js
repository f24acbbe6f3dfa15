// intentkey for workerd (Cloudflare Workers, and what runs on it: wrangler dev,
// miniflare): the pure component with its core modules imported statically (see
// worker-core.js). The API is synchronous; `init()` only instantiates.
import { api } from './worker-core.js';

export { IntentkeyError, IntentkeyTrapError } from './errors.js';

export const { createKeyer, createEndpoint, newUuidKey, uuidKey, answerLines, unreadableLineAnswer, claims, init } = api;
