import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import {
  API_AUTH_TYPE,
  APPROVAL_CLASS,
  CLASSIFICATION,
  CREDENTIAL_PROVIDER,
  CREDENTIAL_TYPE,
  CRITICALITY,
  DATA_POLICY,
  DATA_RESOURCE_KIND,
  MCP_AUTH_TYPE,
  MCP_TRANSPORT,
  MCP_TRUST_STATE,
  MODEL_HOSTING,
  PRIVILEGE_CLASS,
} from '../shared/index.js';
import { looksLikeKeyMaterial } from '../shared/index.js';

const url = (schemes: string[]) =>
  z
    .string()
    .trim()
    .min(8)
    .max(500)
    .refine((v) => {
      try {
        return schemes.includes(new URL(v).protocol.replace(/:$/, ''));
      } catch {
        return false;
      }
    }, `a URL (${schemes.join(', ')})`);

export const idParam = (name: string) => z.object({ [name]: z.uuid() });

/** The schemes an MCP server's endpoint may use (shared with the MCPServer CRD). */
export const MCP_ENDPOINT_SCHEMES = ['https', 'http', 'stdio'];

export const mcpServerIn = z.object({
  name: z.string().trim().min(2).max(200),
  endpoint: url(MCP_ENDPOINT_SCHEMES),
  transport: z.enum(MCP_TRANSPORT).default('streamable_http'),
  auth_type: z.enum(MCP_AUTH_TYPE).default('oauth'),
  publisher: z.string().trim().max(200).nullable().optional(),
});
export const mcpServerPatch = z.object({
  trust_state: z.enum(MCP_TRUST_STATE),
  reason: z.string().trim().min(5).max(2000),
});
export const mcpServerOut = z.object({
  id: z.uuid(),
  name: z.string(),
  endpoint: z.string(),
  transport: z.enum(MCP_TRANSPORT),
  auth_type: z.enum(MCP_AUTH_TYPE),
  publisher: z.string().nullable(),
  trust_state: z.enum(MCP_TRUST_STATE),
  tool_count: z.number().int(),
  source: z.string().describe('who recorded it: `manual` (the API, the Kubernetes controller included) or `discovery`'),
  protocol_version: z.string().nullable().describe('the MCP protocol version the server answered discovery with'),
  capability_hash: z
    .string()
    .nullable()
    .describe('SHA-256 of its tool set as discovery last read it; a change sends an approved server back to unknown'),
  last_seen_at: timestamp.nullable().describe('when discovery last read the server'),
  version: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const modelIn = z.object({
  provider: z.string().trim().min(2).max(64),
  model_name: z.string().trim().min(1).max(200),
  model_version: z.string().trim().max(100).nullable().optional(),
  hosting: z.enum(MODEL_HOSTING).default('saas'),
  data_policy: z.enum(DATA_POLICY).default('unknown'),
});
export const modelPatch = z.object({
  approved: z.boolean().nullable().optional(),
  max_data_classification: z.enum(CLASSIFICATION).nullable().optional(),
  data_policy: z.enum(DATA_POLICY).nullable().optional(),
});
export const modelOut = z.object({
  id: z.uuid(),
  provider: z.string(),
  model_name: z.string(),
  model_version: z.string().nullable(),
  hosting: z.enum(MODEL_HOSTING),
  data_policy: z.enum(DATA_POLICY),
  approved: z.boolean(),
  max_data_classification: z.enum(CLASSIFICATION).nullable(),
  version: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const apiResourceIn = z.object({
  name: z.string().trim().min(2).max(200),
  system: z.string().trim().min(2).max(200),
  base_url: url(['https', 'http']),
  auth_type: z.enum(API_AUTH_TYPE).default('oauth_client_credentials'),
  criticality: z.enum(CRITICALITY).default('medium'),
});
export const dataResourceIn = z.object({
  name: z.string().trim().min(2).max(200),
  system: z.string().trim().min(2).max(200),
  kind: z.enum(DATA_RESOURCE_KIND).default('database'),
  classification: z.enum(CLASSIFICATION).default('internal'),
  contains_personal_data: z.boolean().default(false),
  region: z.string().trim().max(64).nullable().optional(),
});
export const resourceOut = z.object({
  id: z.uuid(),
  resource_type: z.enum(['api', 'data']),
  name: z.string(),
  system: z.string(),
  base_url: z.string().nullable(),
  auth_type: z.string().nullable(),
  criticality: z.string().nullable(),
  kind: z.string().nullable(),
  classification: z.string().nullable(),
  contains_personal_data: z.boolean().nullable(),
  region: z.string().nullable(),
  created_at: timestamp,
});

export const credentialIn = z.object({
  name: z.string().trim().min(2).max(200),
  provider: z.enum(CREDENTIAL_PROVIDER),
  secret_path: z
    .string()
    .trim()
    .min(1)
    .max(500)
    .refine((v) => !looksLikeKeyMaterial(v), 'looks like a secret; give the path of the secret in its store, never the secret'),
  credential_type: z.enum(CREDENTIAL_TYPE).default('api_key'),
  scope: z.string().max(500).default(''),
  shared: z.boolean().default(false),
  rotation_interval_days: z.number().int().min(1).max(730).nullable().optional(),
});
export const credentialOut = z.object({
  id: z.uuid(),
  name: z.string(),
  provider: z.enum(CREDENTIAL_PROVIDER),
  secret_path: z.string(),
  credential_type: z.enum(CREDENTIAL_TYPE),
  scope: z.string(),
  shared: z.boolean(),
  rotation_interval_days: z.number().int().nullable(),
  status: z.enum(['active', 'revoked']),
  last_rotated_at: timestamp.nullable(),
  version: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
});

/** A tool key: MCP's tool-name characters and `:`, case kept and matched exactly (an MCP proxy submits `<prefix>.<name>` verbatim). */
export const TOOL_KEY = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

export const toolIn = z.object({
  tool_key: z.string().trim().min(1).max(200).regex(TOOL_KEY, 'letters, digits and . _ : -, starting with a letter or digit'),
  name: z.string().trim().min(2).max(200),
  description: z.string().max(4000).default(''),
  mcp_server_id: z.uuid().nullable().optional(),
  api_resource_id: z.uuid().nullable().optional(),
  data_resource_id: z.uuid().nullable().optional(),
  operations: z.array(z.string().trim().min(1).max(100)).max(50).default([]),
  privilege_class: z.enum(PRIVILEGE_CLASS).default('read'),
  approval_class: z.enum(APPROVAL_CLASS).default('none'),
  idempotent: z.boolean().default(true),
  input_schema: z.record(z.string(), z.unknown()).default({}),
  credential_ref_id: z.uuid().nullable().optional(),
});
export const toolPatch = z.object({
  privilege_class: z.enum(PRIVILEGE_CLASS).nullable().optional(),
  approval_class: z.enum(APPROVAL_CLASS).nullable().optional(),
  rate_limit_per_minute: z.number().int().min(1).max(10000).nullable().optional(),
  credential_ref_id: z.uuid().nullable().optional(),
});
/** Who set a tool's privilege class; discovery keeps a class staff set (docs/registry.md). */
export const PRIVILEGE_SOURCE = ['declared', 'discovery', 'staff'] as const;

export const toolOut = z.object({
  id: z.uuid(),
  tool_key: z.string(),
  name: z.string(),
  title: z.string().nullable().describe("the MCP server's display title (discovered tools)"),
  description: z.string(),
  mcp_server_id: z.uuid().nullable(),
  api_resource_id: z.uuid().nullable(),
  data_resource_id: z.uuid().nullable(),
  operations: z.array(z.string()),
  privilege_class: z.enum(PRIVILEGE_CLASS),
  privilege_source: z
    .enum(PRIVILEGE_SOURCE)
    .describe('who set privilege_class: declared on registration, classified by discovery, or set by staff (then kept by discovery)'),
  read_only_hint: z.boolean().nullable().describe("the MCP server's readOnlyHint, as declared (Tollgate's class does not follow it)"),
  definition_hash: z
    .string()
    .nullable()
    .describe('sha256 of the canonical JSON of {description, input_schema} as discovery last saw it; null for tools registered by hand'),
  approval_class: z.enum(APPROVAL_CLASS),
  idempotent: z.boolean(),
  input_schema: z.record(z.string(), z.unknown()),
  credential_ref_id: z.uuid().nullable(),
  rate_limit_per_minute: z.number().int().nullable(),
  blocked: z.boolean(),
  builtin: z.boolean(),
  version: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
});
