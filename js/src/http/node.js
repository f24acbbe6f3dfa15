// The HTTP pipeline over the Node component, for the Node adapters (Express and
// node:http, Fastify, and fetch on Node).
import { api, createGuard } from '../node-core.js';
import { pipelineFactory } from './pipeline.js';

export const createPipeline = pipelineFactory({ createEndpoint: api.createEndpoint, createGuard });
export const { init } = api;
