import type { z } from 'zod';
import type { catalogueEntryOut } from '../integrations.schemas.js';
import { codeHostAdapter } from './code-host.js';
import { DISCOVERY_KIND, type Adapter } from './contract.js';
import { directoryAdapter } from './directory.js';
import { mcpAdapter } from './mcp.js';
import { MOCK_ADAPTERS } from './mock/mock-adapters.js';
import { modelVendorAAdapter } from './model-vendor-a.js';
import { modelVendorBAdapter } from './model-vendor-b.js';

/**
 * The adapter catalogue: every adapter Tollgate has, one live and one mock per discovery kind (the
 * `webhook` kind discovers nothing and has none). Integrations name an adapter by kind and mode;
 * `GET /integrations/catalogue` shows this list.
 */

/** Every adapter, by discovery kind (the spec's order), live before mock. */
export const ADAPTERS: readonly Adapter[] = [modelVendorAAdapter, modelVendorBAdapter, mcpAdapter, directoryAdapter, codeHostAdapter, ...MOCK_ADAPTERS].sort(
  (a, b) => DISCOVERY_KIND.indexOf(a.kind) - DISCOVERY_KIND.indexOf(b.kind) || (a.mode === b.mode ? 0 : a.mode === 'live' ? -1 : 1),
);

/** The adapter of a kind in a mode, or undefined (`webhook`, or a kind or mode Tollgate does not know). */
export function adapterFor(kind: string, mode: string): Adapter | undefined {
  return ADAPTERS.find((a) => a.kind === kind && a.mode === mode);
}

/** One line of `GET /integrations/catalogue`. */
export type CatalogueEntry = z.output<typeof catalogueEntryOut>;

/** The catalogue as the API shows it: key, kind, mode, description, configuration keys, status, whether a secret is needed. */
export function catalogue(): CatalogueEntry[] {
  return ADAPTERS.map((a) => ({
    key: a.key,
    kind: a.kind,
    mode: a.mode,
    description: a.description,
    config_keys: [...a.configKeys],
    status: a.status,
    needs_secret: a.needsSecret,
  }));
}

export type { Adapter } from './contract.js';
