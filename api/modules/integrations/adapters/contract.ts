import type { OutboundHttpClient } from '../../../platform/outbound.js';

/**
 * The connector contract (behaviour.md, "Connector contract"): an adapter has a key (`mcp`, `mock.mcp`),
 * a kind, a mode, and one operation, `discover(config, secret)`, that reads a source and answers what it
 * found. It never writes to the source. Reconciliation (what the registry does with the result) is not
 * the adapter's business.
 */

export const INTEGRATION_KIND = ['model_vendor_a', 'model_vendor_b', 'mcp', 'directory', 'code_host', 'webhook'] as const;
export type IntegrationKind = (typeof INTEGRATION_KIND)[number];
/** The kinds that have a connector that discovers (webhook is accepted on creation, and discovers nothing). */
export const DISCOVERY_KIND = ['model_vendor_a', 'model_vendor_b', 'mcp', 'directory', 'code_host'] as const;
export type DiscoveryKind = (typeof DISCOVERY_KIND)[number];
export const INTEGRATION_MODE = ['live', 'mock'] as const;
export type IntegrationMode = (typeof INTEGRATION_MODE)[number];

export interface DiscoveredIdentity {
  identity_type: string; // for example service_principal, oauth_client, workload
  subject: string;
  issuer: string | null;
  authentication_strength: 'weak' | 'moderate' | 'strong' | null;
}

export interface DiscoveredAgent {
  /** Stable reference of the agent in its source (matched on by reconciliation). */
  external_ref: string;
  name: string;
  description: string;
  purpose: string;
  framework: string;
  environment: 'production' | 'staging' | 'development';
  /** `provider/model_name` of the model it runs on, when the source says. */
  model: string | null;
  owner_name: string | null;
  owner_email: string | null;
  data_classification: 'public' | 'internal' | 'confidential' | 'personal' | 'regulated' | 'restricted' | null;
  internet_exposure: 'none' | 'controlled' | 'public' | null;
  code_execution: 'none' | 'sandboxed' | 'privileged' | null;
  persistent_memory: 'none' | 'bounded' | 'unbounded' | null;
  human_approval_coverage: 'strong' | 'partial' | 'none' | null;
  business_unit: string | null;
  identities: DiscoveredIdentity[];
  /** Tool keys the agent is granted in its source; bound when the tools exist in the registry. */
  tool_grants: string[];
  /** Names of resources it reaches. */
  resource_grants: string[];
  delegations: { principal_ref: string; display_name: string; principal_type: 'user' | 'group' | 'service'; scopes: string[] }[];
}

export interface DiscoveredTool {
  /** `<tool_prefix>.<name>` for MCP tools. */
  tool_key: string;
  name: string;
  /** The title the server gives, when it gives one. */
  title: string | null;
  description: string;
  /** What the source claims; the service classifies on its own and keeps its own class. */
  privilege_class: 'read' | 'write' | 'destructive' | 'financial' | 'admin' | null;
  input_schema: Record<string, unknown>;
  /** The server's `annotations.readOnlyHint`, as declared (null when it says nothing). */
  read_only_hint: boolean | null;
  operations: string[];
  /** Name of the data or API resource it touches, when known. */
  resource: string | null;
  idempotent: boolean | null;
}

export interface DiscoveredMCPServer {
  name: string;
  endpoint: string;
  transport: 'streamable_http' | 'sse' | 'stdio';
  auth_type: 'oauth' | 'api_key' | 'mtls' | 'none';
  publisher: string | null;
  /** `unknown` unless the source vouches otherwise; `unsigned` when it says the server is not signed. */
  trust_state: 'unknown' | 'unsigned';
  protocol_version: string | null;
  tools: DiscoveredTool[];
}

export interface DiscoveredModel {
  provider: string;
  model_name: string;
  model_version: string | null;
  hosting: 'saas' | 'private' | 'customer_hosted';
  data_policy: 'unknown' | 'no_training' | 'zero_retention' | 'training_allowed';
}

export interface DiscoveredResource {
  name: string;
  kind: 'data' | 'api';
  system: string;
  classification: 'public' | 'internal' | 'confidential' | 'personal' | 'regulated' | 'restricted' | null;
  contains_personal_data: boolean | null;
  base_url: string | null;
}

export interface DiscoveryResult {
  /** The adapter's key. */
  adapter: string;
  mode: IntegrationMode;
  agents: DiscoveredAgent[];
  models: DiscoveredModel[];
  mcp_servers: DiscoveredMCPServer[];
  resources: DiscoveredResource[];
  /** What the run should tell a person without failing (a page it skipped, a manifest it could not read). */
  warnings: string[];
}

/**
 * An expected failure of a source (a missing credential, the provider answering 401, an answer that is not
 * what its format says): the run is recorded `failed` with this message. The message is shown to people:
 * it never carries a secret or a whole answer body.
 */
export class ConnectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConnectorError';
  }
}

/**
 * How a live adapter reaches the network: only through this, which refuses private, loopback, link-local
 * and metadata addresses (pinned to the address it checked), follows no redirect, bounds the answer's size
 * (`maxBytes`, default 2 MB) and the whole exchange's time (`timeoutMs`, default 15 s), and never logs the
 * secret. A 3xx is answered as is. Implemented by `OutboundHttp` in `api/platform/outbound.ts`; it rejects
 * with an `OutboundError` (code and a message safe to show), which fails the run with that message as a
 * ConnectorError does.
 */
export type Http = OutboundHttpClient;

export interface DiscoverContext {
  http: Http;
  /** The integration's configuration: non-secret settings (validated by the adapter). */
  config: Record<string, unknown>;
  /** The resolved secret of the integration's credential reference; null in mock mode or without one. */
  secret: string | null;
  /** The run's clock for anything dated. */
  now: Date;
}

export interface Adapter {
  /** `mcp`, `mock.mcp`, … */
  key: string;
  kind: DiscoveryKind;
  mode: IntegrationMode;
  /** The catalogue's words: what it reads, its configuration keys, its status (`GA`, `Beta`, `Preview`). */
  description: string;
  configKeys: readonly string[];
  status: 'GA' | 'Beta' | 'Preview';
  /** Whether a secret is needed (live adapters that authenticate). */
  needsSecret: boolean;
  /** Configuration problems found before any request (422 on creation, failed run at run time). */
  validateConfig(config: Record<string, unknown>): string[];
  discover(ctx: DiscoverContext): Promise<DiscoveryResult>;
}

/** Configuration keys refused on every integration: a secret has no place in configuration. */
export const FORBIDDEN_CONFIG_KEYS = ['secret', 'password', 'api_key', 'token', 'client_secret'] as const;

/** An empty result, for adapters to fill. */
export function emptyResult(adapter: string, mode: IntegrationMode): DiscoveryResult {
  return { adapter, mode, agents: [], models: [], mcp_servers: [], resources: [], warnings: [] };
}
