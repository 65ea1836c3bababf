import type { KubernetesObject } from '@kubernetes/client-node';
import { z } from 'zod';
import { agentIn } from '../api/modules/agents/agents.schemas.js';
import { bindingActions, constraintsSchema, delegationIn } from '../api/modules/agents/bindings.schemas.js';
import { mcpServerIn, mcpServerOut, toolIn } from '../api/modules/inventory/inventory.schemas.js';
import { policyIn } from '../api/modules/policies/policies.schemas.js';

/**
 * The kinds of the tollgate.dev API group, described once: group, version, names, printer columns and the
 * zod schemas of their spec and status. The controller watches them by these names, its TypeScript types
 * derive from these schemas, and scripts/gen-crds.ts generates crds/ from them (adding only descriptions,
 * CEL rules and bounds that matter to the API server alone).
 *
 * The specs are built from the zod schemas the API validates its request bodies with, so that a
 * kubectl-applied object and an API call accept the same fields, enums and bounds. They keep the API's
 * snake_case names; a CRD field is the camelCase of its API field (`toCamel`), and `CamelKeys` gives the
 * objects' types the same renaming.
 */

export const GROUP = 'tollgate.dev';
export const VERSION = 'v1alpha1';

/** snake_case -> camelCase: the one renaming rule between the API's fields and the CRDs' (docs/kubernetes.md). */
export const toCamel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
/** camelCase -> snake_case, its inverse on the API's names. */
export const toSnake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** `toCamel` on a string type. */
type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;
/** A type with every object key renamed by `toCamel`, at every depth (free-form records keep `string` keys). */
export type CamelKeys<T> = T extends readonly (infer U)[]
  ? CamelKeys<U>[]
  : T extends object
    ? { [K in keyof T as K extends string ? CamelCase<K> : K]: CamelKeys<T[K]> }
    : T;

// ---------------------------------------------------------------------------------------------------------
// Specs: the API's bodies, reshaped for Kubernetes. The record's slug or key is metadata.name (Agent: slug,
// MCPServer: name, Policy: key, its `name` becoming `display_name`); a Tool keeps tool_key (tool keys may hold
// dots and colons). Server-assigned ids are dropped: a Tool names its MCP server as mcp_server_ref.name (an
// MCPServer of the same namespace); api_resource_id, data_resource_id and credential_ref_id have no
// counterpart yet.

/** A Kubernetes object name (DNS-1123 subdomain), as a reference to another object. */
const objectName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);

const agentSpec = agentIn.omit({ slug: true }).extend({
  tools: z
    .array(
      z.object({
        tool: toolIn.shape.tool_key,
        actions: bindingActions,
        constraints: constraintsSchema.default({}),
      }),
    )
    .max(100)
    .default([]),
  delegations: z.array(delegationIn()).max(50).default([]),
});

const toolSpec = toolIn
  .omit({ mcp_server_id: true, api_resource_id: true, data_resource_id: true, credential_ref_id: true })
  .extend({ mcp_server_ref: z.object({ name: objectName }).optional() });

const mcpServerSpec = mcpServerIn.omit({ name: true });

const { key: _policyKey, name: policyName, ...policyRest } = policyIn.shape;
const policySpec = z.object({ display_name: policyName, ...policyRest });

// ---------------------------------------------------------------------------------------------------------
// Statuses: what the controller records.

/** metav1.Condition. */
const condition = z.object({
  type: z
    .string()
    .min(1)
    .max(316)
    .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/),
  message: z.string().max(32768),
  last_transition_time: z.iso.datetime({ offset: true }),
  observed_generation: z.number().int().min(0).optional(),
});

/** Why Tollgate refuses every call of an agent: its status, or its gateway access turned off. */
export const CONTAINMENT = ['suspended', 'revoked', 'gateway_access_off'] as const;

const baseStatus = z.object({
  observed_generation: z.number().int().min(0).optional(),
  registry_id: z.string().max(64).optional(),
  conditions: z.array(condition).max(16).optional(),
});

// ---------------------------------------------------------------------------------------------------------
// The kinds.

/** An `additionalPrinterColumns` entry of the CRD (kubectl get), between Ready and Registry ID. */
export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description: string;
  priority?: number;
}

export interface KindDefinition {
  group: string;
  version: string;
  plural: string;
  shortName: string;
  columns: PrinterColumn[];
  spec: z.ZodType;
  status: z.ZodType;
}

/** A kind of tollgate.dev/v1alpha1. */
const tollgate = <D extends Omit<KindDefinition, 'group' | 'version'>>(d: D) => ({ group: GROUP, version: VERSION, ...d });

export const KINDS = {
  Agent: tollgate({
    plural: 'agents',
    shortName: 'tgagent',
    columns: [
      { name: 'Environment', type: 'string', jsonPath: '.spec.environment', description: 'The environment the agent runs in' },
      { name: 'Criticality', type: 'string', jsonPath: '.spec.criticality', description: 'How critical the agent is' },
      { name: 'Risk', type: 'string', jsonPath: '.status.riskBand', description: "The agent's risk band in Tollgate", priority: 1 },
      { name: 'Last Decision', type: 'date', jsonPath: '.status.lastDecisionAt', description: 'When Tollgate last decided on a call of the agent', priority: 1 },
    ],
    spec: agentSpec,
    status: baseStatus.extend({
      identity_secret: z
        .string()
        .max(253)
        .optional()
        .describe("The Secret of this namespace holding the agent's workload identity (client-id, client-secret), which the injected sidecar mounts"),
      identity_id: z.string().max(36).optional().describe('The registry id of that workload identity'),
      // Strings, not enums: test/unit/crds.test.ts holds every CRD enum to be one of the API's request schemas.
      risk_band: z
        .string()
        .max(16)
        .optional()
        .describe("The agent's risk band in Tollgate (low, medium, high, critical), once scored; read every status poll"),
      last_decision_at: z.iso
        .datetime({ offset: true })
        .optional()
        .describe('When Tollgate last decided on a call of the agent (allow, deny or approval), once it has; read every status poll'),
      containment: z
        .string()
        .max(32)
        .optional()
        .describe('Why Tollgate refuses every call of the agent, when it does: suspended, revoked, or gateway_access_off; absent otherwise'),
    }),
  }),
  Tool: tollgate({
    plural: 'tools',
    shortName: 'tgtool',
    columns: [
      { name: 'Tool Key', type: 'string', jsonPath: '.spec.toolKey', description: 'The tool key agents call it by' },
      { name: 'Privilege', type: 'string', jsonPath: '.spec.privilegeClass', description: 'The privilege class of a call' },
    ],
    spec: toolSpec,
    status: baseStatus,
  }),
  MCPServer: tollgate({
    plural: 'mcpservers',
    shortName: 'tgmcp',
    columns: [
      { name: 'Endpoint', type: 'string', jsonPath: '.spec.endpoint', description: 'The URL of the server' },
      { name: 'Trust', type: 'string', jsonPath: '.status.trustState', description: 'The trust state set in Tollgate' },
    ],
    spec: mcpServerSpec,
    status: baseStatus.extend({ trust_state: mcpServerOut.shape.trust_state.optional() }),
  }),
  Policy: tollgate({
    plural: 'policies',
    shortName: 'tgpolicy',
    columns: [
      { name: 'Published', type: 'integer', jsonPath: '.status.publishedVersion', description: 'The version in force' },
      { name: 'Latest', type: 'integer', jsonPath: '.status.latestVersion', description: 'The newest version' },
    ],
    spec: policySpec,
    status: baseStatus.extend({
      latest_version: z.number().int().min(0).optional(),
      published_version: z.number().int().min(0).nullable().optional(),
      publish_state: z.string().max(200).optional(),
    }),
  }),
} satisfies Record<string, KindDefinition>;

export type Kind = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as Kind[];

// ---------------------------------------------------------------------------------------------------------
// The objects' types, derived from the schemas: what a client may leave out (z.input), in camelCase.

export type SpecOf<K extends Kind> = CamelKeys<z.input<(typeof KINDS)[K]['spec']>>;
export type StatusOf<K extends Kind> = CamelKeys<z.input<(typeof KINDS)[K]['status']>>;

export type AgentSpec = SpecOf<'Agent'>;
export type ToolSpec = SpecOf<'Tool'>;
export type MCPServerSpec = SpecOf<'MCPServer'>;
export type PolicySpec = SpecOf<'Policy'>;
export type AgentStatus = StatusOf<'Agent'>;
export type MCPServerStatus = StatusOf<'MCPServer'>;
export type PolicyStatus = StatusOf<'Policy'>;

/** metav1.Condition */
export type Condition = CamelKeys<z.input<typeof condition>>;
/** What every kind's status holds. */
export type Status = CamelKeys<z.input<typeof baseStatus>>;

/** A tollgate.dev object as the informers cache it. */
export interface TollgateObject<Spec = unknown, S extends Status = Status> extends KubernetesObject {
  spec: Spec;
  status?: S;
}

/** An object of one kind, with its spec and status types. */
export type KindObject<K extends Kind> = TollgateObject<SpecOf<K>, StatusOf<K>>;
