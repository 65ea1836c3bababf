import type * as undici from 'undici';
import DispatcherClass from 'undici/lib/dispatcher/dispatcher.js';
import AgentClass from 'undici/lib/dispatcher/agent.js';
import PoolClass from 'undici/lib/dispatcher/pool.js';
import apiRequest from 'undici/lib/api/api-request.js';

/**
 * undici's `Agent` and `Pool`, and nothing else of undici. The package's entry point loads all of it (fetch,
 * WebSocket, EventSource, the cache and mock agents), and one of those modules reads the global `Headers`,
 * which makes Node load its own bundled copy of undici too: two HTTP clients, some 4-5 MB of resident memory in
 * a sidecar (one per agent pod) that needs one Agent and one Pool (bench/sidecar.ts; issue 20, point 6). These
 * are the classes the entry point exports, with `request` put on their prototype as the entry point puts it;
 * a process that also loads the entry point (the API) shares them. test/unit/undici-dispatchers.test.ts holds
 * the paths to the package's layout, so that an upgrade that moves them fails there.
 *
 * Static imports (CommonJS modules, whose `module.exports` is the default export), so that the sidecar's bundle
 * (package.json's `build:sidecar`) holds them: lib/undici-internals.d.ts types them.
 */
if (typeof DispatcherClass.prototype.request !== 'function') DispatcherClass.prototype.request = apiRequest;

export const Agent = AgentClass;
export type Agent = undici.Agent;
export const Pool = PoolClass;
export type Pool = undici.Pool;
