import { emptyResult, type Adapter, type DiscoveryKind, type DiscoveryResult } from '../contract.js';
import { MOCK_CODE_HOST_AGENTS, MOCK_CODE_HOST_WARNINGS } from './code-host.data.js';
import { MOCK_DIRECTORY_AGENTS } from './directory.data.js';
import { MOCK_MCP_SERVERS } from './mcp.data.js';
import { MOCK_VENDOR_A_AGENTS, MOCK_VENDOR_A_MODELS, MOCK_VENDOR_A_WARNINGS } from './model-vendor-a.data.js';
import { MOCK_VENDOR_B_MODELS } from './model-vendor-b.data.js';
import { MOCK_RESOURCES } from './resources.data.js';

/**
 * The `mock` adapters (behaviour.md, "Adapter modes": fictional data, always available), one per discovery
 * kind, key `mock.<kind>`. They read nothing and need no secret; each answers the same result every time
 * (no randomness, no clock), fresh copies so that a caller may change what it gets. The data describe
 * Aldergrove Mutual, a fictional insurer, and live in one file per kind beside this one.
 */

type MockData = Omit<DiscoveryResult, 'adapter' | 'mode'>;

/** A deep copy of the data (they are plain JSON), so no caller can alter the next run's answer. */
const fresh = <T>(value: T): T => structuredClone(value);

function mockAdapter(kind: DiscoveryKind, description: string, data: () => Partial<MockData>): Adapter {
  const key = `mock.${kind}`;
  return {
    key,
    kind,
    mode: 'mock',
    description,
    configKeys: [],
    status: 'GA',
    needsSecret: false,
    validateConfig: () => [],
    discover: async () => ({ ...emptyResult(key, 'mock'), ...fresh(data()) }),
  };
}

/** The resources the given agents are granted (so a mock's grants land without another mock having run first). */
function resourcesGranted(agents: readonly { resource_grants: string[] }[]) {
  const names = new Set(agents.flatMap((a) => a.resource_grants));
  return MOCK_RESOURCES.filter((r) => names.has(r.name));
}

export const mockModelVendorAAdapter = mockAdapter(
  'model_vendor_a',
  'Fictional data: ten managed agents (assistants) and eight models of vendor A.',
  () => ({ agents: [...MOCK_VENDOR_A_AGENTS], models: [...MOCK_VENDOR_A_MODELS], warnings: [...MOCK_VENDOR_A_WARNINGS] }),
);

export const mockModelVendorBAdapter = mockAdapter('model_vendor_b', 'Fictional data: seven models of vendor B.', () => ({
  models: [...MOCK_VENDOR_B_MODELS],
}));

export const mockMcpAdapter = mockAdapter(
  'mcp',
  'Fictional data: six MCP servers and their tools (payments, files, SQL, identity, CRM, an unsigned community server with a poisoned tool) and the resources they touch.',
  () => ({ mcp_servers: [...MOCK_MCP_SERVERS], resources: [...MOCK_RESOURCES] }),
);

export const mockDirectoryAdapter = mockAdapter(
  'directory',
  'Fictional data: ten service principals tagged svc-agent, with their identities and delegations.',
  () => ({ agents: [...MOCK_DIRECTORY_AGENTS] }),
);

export const mockCodeHostAdapter = mockAdapter(
  'code_host',
  'Fictional data: twelve agent manifests of an organisation\'s repositories, with tool and resource grants.',
  () => ({ agents: [...MOCK_CODE_HOST_AGENTS], resources: resourcesGranted(MOCK_CODE_HOST_AGENTS), warnings: [...MOCK_CODE_HOST_WARNINGS] }),
);

/** The five mock adapters, in the order of the discovery kinds. */
export const MOCK_ADAPTERS: readonly Adapter[] = [
  mockModelVendorAAdapter,
  mockModelVendorBAdapter,
  mockMcpAdapter,
  mockDirectoryAdapter,
  mockCodeHostAdapter,
];
