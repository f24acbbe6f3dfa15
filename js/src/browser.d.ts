// Types for the browser and workerd entries of the intentkey package
// (src/browser.js, src/worker.js): the pure component's API (keys, claims, the
// HTTP endpoint, init). The guard and the SQL stores are Node only; the memory
// store is intentkey/stores/memory and the fetch adapter intentkey/fetch.
export * from './api.js';
