import { createRequire } from 'node:module';
import type * as undici from 'undici';

/**
 * undici's `Agent` and `Pool`, and nothing else of undici. The package's entry point loads all of it (fetch,
 * WebSocket, EventSource, the cache and mock agents), and one of those modules reads the global `Headers`,
 * which makes Node load its own bundled copy of undici too: two HTTP clients, some 4-5 MB of resident memory in
 * a sidecar (one per agent pod) that needs one Agent and one Pool (bench/sidecar.ts; issue 20, point 6). These
 * are the classes the entry point exports, with `request` put on their prototype as the entry point puts it;
 * a process that also loads the entry point (the API) shares them. test/unit/undici-dispatchers.test.ts holds
 * the paths to the package's layout, so that an upgrade that moves them fails there.
 */
const require = createRequire(import.meta.url);

const Dispatcher = require('undici/lib/dispatcher/dispatcher.js') as typeof undici.Dispatcher;
if (typeof Dispatcher.prototype.request !== 'function') {
  Dispatcher.prototype.request = require('undici/lib/api/api-request.js') as undici.Dispatcher['request'];
}

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof undici.Agent;
export type Agent = undici.Agent;
export const Pool = require('undici/lib/dispatcher/pool.js') as typeof undici.Pool;
export type Pool = undici.Pool;
