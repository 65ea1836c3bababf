import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RE2JS } from 're2js';
import { stringify } from 'yaml';
import { z } from 'zod';
import { MCP_ENDPOINT_SCHEMES } from '../api/modules/inventory/inventory.schemas.js';
import { GROUP, KIND_NAMES, KINDS, toCamel, VERSION, type Kind } from '../controller/kinds.js';

/**
 * The CustomResourceDefinitions of the tollgate.dev API group (crds/), generated from the kinds of
 * controller/kinds.ts: their names, printer columns, and spec and status schemas (built there from the zod
 * schemas the API validates its request bodies with). `make docs` rewrites crds/; test/unit/crds.test.ts
 * fails when they drift. What only the API server needs is added here: descriptions, CEL rules, bounds.
 *
 * Field names: snake_case -> camelCase (`toCamel`: every `_x` becomes `X`, e.g. data_classification ->
 * dataClassification), applied to every property name and `required` entry; enum values are left alone.
 *
 * zod's JSON Schema (`io: 'input'`) is made structural: `.nullable()` (anyOf [X, null]) becomes X with
 * `nullable: true`, `$schema` and `additionalProperties: false` go (the API server prunes unknown fields),
 * free-form values (`z.unknown()`, records of unknown) keep unknown fields, every pattern must compile as
 * RE2 (the API server's regular expressions; a date-time's pattern is left to Kubernetes' own date-time
 * format check), and every field gets a description (`kubectl explain`): the
 * zod `.describe()` text, else the sentence in DESCRIPTIONS below.
 */

type Json = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------------------
// Descriptions (kubectl explain) of the fields whose zod schema has none, by kind and camelCase path
// ("[]" stands for the items of an array). The generator fails when a field has neither.

const CONDITION_DESCRIPTIONS = {
  'status.conditions': 'The latest observations of the object, by type (Ready: registered in Tollgate and up to date).',
  'status.conditions[]': 'One condition (the metav1.Condition shape).',
  'status.conditions[].type': 'The condition type in CamelCase or foo.example.com/CamelCase, e.g. Ready.',
  'status.conditions[].status': 'True, False or Unknown.',
  'status.conditions[].reason': "A programmatic identifier of the condition's last transition, in CamelCase.",
  'status.conditions[].message': 'A human-readable message about the transition; may be empty.',
  'status.conditions[].lastTransitionTime': 'When the condition last changed from one status to another.',
  'status.conditions[].observedGeneration': 'The .metadata.generation the condition was set for.',
  'status.observedGeneration': 'The .metadata.generation the controller last acted on.',
};

const DESCRIPTIONS: Record<Kind, Record<string, string>> = {
  Agent: {
    '': 'An AI agent in the Tollgate registry: who owns it, what it is for, what it may touch. metadata.name is its slug.',
    spec: 'The agent as the registry records it (POST /agents), plus its tool permissions and delegations.',
    'spec.name': 'Display name of the agent, 2-200 characters.',
    'spec.description': 'What the agent is, in free text.',
    'spec.purpose': 'What the agent is for; required (non-empty) in production.',
    'spec.framework': 'The agent framework it is built with, e.g. langgraph, crewai or custom.',
    'spec.environment':
      'The environment the agent runs in: production, staging or development. Production agents need at least one owner, a purpose and a dataClassification.',
    'spec.businessUnit': 'The business unit accountable for the agent, if any.',
    'spec.criticality': 'How critical the agent is to the business: low, medium, high or critical.',
    'spec.dataClassification': 'The most sensitive class of data the agent handles; required in production.',
    'spec.internetExposure': 'How far the agent is reachable from the internet: none, controlled or public.',
    'spec.codeExecution': 'Whether the agent executes code: none, sandboxed or privileged.',
    'spec.persistentMemory': 'Whether the agent keeps memory between sessions: none, bounded or unbounded.',
    'spec.humanApprovalCoverage': 'How much of what the agent does a person approves: strong, partial or none.',
    'spec.tags': 'Free labels for searching and grouping, each 1-64 characters.',
    'spec.tags[]': 'One tag.',
    'spec.owners': 'The people accountable for the agent; production agents need at least one.',
    'spec.owners[]': 'One owner.',
    'spec.owners[].name': "The owner's name.",
    'spec.owners[].email': "The owner's e-mail address.",
    'spec.owners[].ownerType': 'The kind of ownership: accountable, technical or business.',
    'spec.tools': 'The tools the agent may call (permission bindings), each with the actions allowed and their constraints.',
    'spec.tools[]': 'A permission on one tool.',
    'spec.tools[].tool': 'The tool key (a Tool\'s spec.toolKey), e.g. payments.transfer.',
    'spec.tools[].actions': 'The operations the agent may invoke on the tool, at least one.',
    'spec.tools[].actions[]': 'One operation, e.g. invoke.',
    'spec.tools[].constraints': 'Limits on every call under this permission; unknown keys are refused.',
    'spec.tools[].constraints.allowedTargets[]': 'One glob pattern.',
    'spec.delegations': 'The principals (people, groups, services) the agent may act on behalf of, within scopes.',
    'spec.delegations[]': 'One delegation.',
    'spec.delegations[].principalRef': 'The principal, e.g. an e-mail address or a group or service name (3-320 characters).',
    'spec.delegations[].displayName': "The principal's display name.",
    'spec.delegations[].principalType': 'The kind of principal: user, group or service.',
    'spec.delegations[].scopes': 'The scopes the agent may use on behalf of the principal.',
    'spec.delegations[].scopes[]': 'One scope, e.g. payments:write.',
    'spec.delegations[].expiresAt': 'When the delegation ends (RFC 3339); none for no end.',
    status: 'What the Tollgate controller observed and recorded.',
    'status.registryId': "The agent's id in the Tollgate registry.",
  },
  Tool: {
    '': 'A tool agents can call through the Tollgate gateway. spec.toolKey is its key (metadata.name is free).',
    spec: 'The tool as the registry records it (POST /tools).',
    'spec.toolKey': 'The tool key agents call it by: lower-case letters, digits and . _ : -, e.g. payments.transfer.',
    'spec.name': 'Display name of the tool, 2-200 characters.',
    'spec.description': 'What the tool does.',
    'spec.operations': 'The operations the tool offers, e.g. invoke or refund.',
    'spec.operations[]': 'One operation.',
    'spec.privilegeClass': 'What a call can do: read, write, destructive, financial or admin.',
    'spec.approvalClass': 'How many people must approve a call: none, single or dual.',
    'spec.idempotent': 'Whether repeating a call has no further effect.',
    'spec.inputSchema': "The JSON Schema of the tool's parameters; any JSON object.",
    'spec.mcpServerRef': 'The MCP server that serves the tool: an MCPServer in the same namespace. None for a tool of its own.',
    'spec.mcpServerRef.name': 'The metadata.name of the MCPServer.',
    status: 'What the Tollgate controller observed and recorded.',
    'status.registryId': "The tool's id in the Tollgate registry.",
  },
  MCPServer: {
    '': 'A Model Context Protocol server whose tools agents call through Tollgate. metadata.name is its name.',
    spec: 'The MCP server as the registry records it (POST /mcp-servers).',
    'spec.endpoint': 'The URL of the server: https, http or stdio, 8-500 characters.',
    'spec.transport': 'The MCP transport: streamable_http, sse or stdio.',
    'spec.authType': 'How Tollgate authenticates to the server: oauth, api_key, mtls or none.',
    'spec.publisher': 'Who publishes the server, if known.',
    status: 'What the Tollgate controller observed and recorded.',
    'status.registryId': "The MCP server's id in the Tollgate registry.",
    'status.trustState':
      'The trust state a reviewer set in Tollgate: approved, unknown, unsigned or quarantined (set through the API, not here).',
  },
  Policy: {
    '': 'A Tollgate policy: rules the gateway evaluates on every agent action. metadata.name is its key.',
    spec: 'The policy as POST /policies takes it; every change becomes a new draft version that a second person publishes.',
    'spec.displayName': 'Display name of the policy, 3-200 characters (the API\'s name).',
    'spec.rules': 'The rules, 1-200, ids unique within the policy.',
    'spec.rules[]': 'One rule: when every condition holds, the effect applies.',
    'spec.rules[].id': 'The rule id, unique within the policy: letters, digits and . _ : -, at most 100.',
    'spec.rules[].description': 'What the rule is for.',
    'spec.rules[].effect': 'What the rule decides when its conditions hold: allow, deny or require_approval.',
    'spec.rules[].reasonCode': 'The reason code decisions report, UPPER_SNAKE_CASE, 3-100 characters.',
    'spec.rules[].conditions[]': 'One condition: a field, an operator and an operand, or a CEL expression (op: cel).',
    'spec.rules[].obligations.approvalsRequired': 'How many distinct people must approve, 1-5.',
    'spec.description': 'What the policy is for.',
    'spec.critical': 'A critical policy can only be deactivated with a confirmation and a reason.',
    'spec.changeNote': 'The change note of the version a change of this object creates.',
    status: 'What the Tollgate controller observed and recorded.',
    'status.registryId': "The policy's id in Tollgate.",
    'status.latestVersion': 'The number of the newest version (draft or published).',
    'status.publishedVersion': 'The number of the version in force; none until a version is published.',
    'status.publishState':
      "Where publication stands, e.g. \"draft awaiting a second person's publication\" or \"published\".",
  },
};

/**
 * Bounds the API implies but its JSON Schema does not carry (a length inside a pattern): the CEL cost
 * estimator needs a maxLength on every string a rule reads.
 */
const BOUNDS: Record<Kind, Record<string, Json>> = {
  Agent: {
    'spec.tools[].constraints.currency': { maxLength: 3 }, // ^[A-Z]{3}$
  },
  Tool: {},
  MCPServer: {},
  Policy: {
    'spec.rules[].id': { maxLength: 100 }, // ^[A-Za-z0-9._:-]{1,100}$
    'spec.rules[].reasonCode': { maxLength: 100 }, // ^[A-Z][A-Z0-9_]{2,99}$
  },
};

// ---------------------------------------------------------------------------------------------------------
// Rules that span fields (CEL), names, printer columns.

type Validation = { rule: string; message?: string; messageExpression?: string; reason?: string; fieldPath?: string };

/** Transition rules (`self == oldSelf`) for fields that Tollgate does not change once the record exists. */
function fixedOnceRegistered(...paths: string[]): Record<string, Validation[]> {
  return Object.fromEntries(
    paths.map((p) => [
      p,
      [{ rule: 'self == oldSelf', message: `${p.slice('spec.'.length)} cannot change once registered in Tollgate`, reason: 'FieldValueForbidden' }],
    ]),
  );
}

const VALIDATIONS: Record<Kind, Record<string, Validation[]>> = {
  Agent: {
    '': [
      {
        rule: "size(self.metadata.name) <= 100 && !self.metadata.name.contains('.')",
        message: "metadata.name is the agent's slug: at most 100 lower-case letters, digits and inner hyphens, no dots",
      },
    ],
    spec: [
      {
        // checkProductionRequirements (agents.service.ts).
        rule: "self.environment != 'production' || (size(self.owners) > 0 && size(self.purpose.trim()) > 0 && has(self.dataClassification))",
        message: 'production agents need at least one owner, a non-empty purpose and a dataClassification',
        // The missing ones, as the API's production_requirements error names them. Concatenation, not
        // join(): the API server's cost estimator deems join() unbounded even on a literal list.
        messageExpression: [
          "'production agents need '",
          "(size(self.owners) == 0 ? 'at least one owner' : '')",
          "(size(self.owners) == 0 && (size(self.purpose.trim()) == 0 || !has(self.dataClassification)) ? ', ' : '')",
          "(size(self.purpose.trim()) == 0 ? 'a non-empty purpose' : '')",
          "(size(self.purpose.trim()) == 0 && !has(self.dataClassification) ? ', ' : '')",
          "(has(self.dataClassification) ? '' : 'a dataClassification')",
        ].join(' + '),
        reason: 'FieldValueRequired',
      },
      {
        // Tollgate adds owners (POST /agents/{id}/owners) and has no operation that removes one.
        rule: 'oldSelf.owners.all(o, self.owners.exists(n, n.email == o.email && n.ownerType == o.ownerType))',
        message: "owners can be added, not removed: Tollgate keeps an agent's owners",
        reason: 'FieldValueForbidden',
        fieldPath: '.owners',
      },
    ],
  },
  // Tollgate changes a tool's classes only (PATCH /tools/{id}); the other fields are fixed once registered.
  Tool: {
    spec: [
      {
        rule: 'has(self.mcpServerRef) == has(oldSelf.mcpServerRef) && (!has(self.mcpServerRef) || self.mcpServerRef.name == oldSelf.mcpServerRef.name)',
        message: 'mcpServerRef cannot change once the tool is registered: declare a new Tool',
        reason: 'FieldValueForbidden',
      },
    ],
    ...fixedOnceRegistered('spec.toolKey', 'spec.name', 'spec.description', 'spec.operations', 'spec.idempotent', 'spec.inputSchema'),
  },
  MCPServer: {
    '': [
      {
        rule: 'size(self.metadata.name) >= 2 && size(self.metadata.name) <= 200',
        message: "metadata.name is the MCP server's name: 2-200 characters",
      },
    ],
    // Tollgate has no operation that edits a registered MCP server (only its trust state).
    spec: [
      {
        rule: 'self == oldSelf',
        message: "an MCPServer's spec cannot change once registered: declare a new MCPServer",
        reason: 'FieldValueForbidden',
      },
    ],
    // The API's url() refinement (inventory.schemas.ts), which JSON Schema cannot carry.
    'spec.endpoint': [
      {
        rule: `isURL(self) && url(self).getScheme() in [${MCP_ENDPOINT_SCHEMES.map((x) => `'${x}'`).join(', ')}]`,
        message: `a URL (${MCP_ENDPOINT_SCHEMES.join(', ')})`,
      },
    ],
  },
  Policy: {
    '': [
      {
        rule: 'size(self.metadata.name) >= 3 && size(self.metadata.name) <= 100',
        message: "metadata.name is the policy's key: 3-100 characters",
      },
    ],
    // A change of the rules is a new draft version; the policy's own fields have no operation that edits them.
    ...fixedOnceRegistered('spec.displayName', 'spec.description', 'spec.critical'),
    'spec.rules': [
      {
        rule: 'self.all(r, self.exists_one(s, s.id == r.id))',
        message: 'rule ids must be unique within the policy',
      },
    ],
    'spec.rules[]': [
      {
        rule: "self.effect == 'require_approval' || !has(self.obligations)",
        message: 'obligations are allowed on require_approval rules only',
        fieldPath: '.obligations',
      },
    ],
  },
};

// ---------------------------------------------------------------------------------------------------------
// zod JSON Schema -> structural schema.

const KEY_ORDER = [
  'description', 'type', 'format', 'nullable', 'enum', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum',
  'minItems', 'maxItems', 'default', 'items', 'properties', 'required',
];
const KEPT = new Set([...KEY_ORDER]);

interface Ctx {
  kind: Kind;
  descriptions: Record<string, string>;
  used: Set<string>;
}

const childPath = (path: string, key: string) => (path ? `${path}.${key}` : key);

/** One node of zod's JSON Schema, made structural, with its properties renamed to camelCase. */
function structural(node: Json, path: string, ctx: Ctx): Json {
  let n: Json = { ...node };
  delete n.$schema;
  let nullable = false;
  if (Array.isArray(n.anyOf)) {
    const branches = n.anyOf as Json[];
    const rest = branches.filter((b) => b.type !== 'null');
    if (branches.length !== 2 || rest.length !== 1) throw new Error(`${ctx.kind} ${path}: anyOf other than X | null is not structural`);
    const { anyOf: _anyOf, ...outer } = n;
    n = { ...rest[0], ...outer };
    nullable = true;
  }
  for (const k of ['oneOf', 'allOf', 'not', '$ref', '$defs']) {
    if (k in n) throw new Error(`${ctx.kind} ${path}: ${k} is not structural`);
  }

  const out: Json = {};
  const description = (n.description as string | undefined) ?? ctx.descriptions[path];
  if (description === undefined) throw new Error(`${ctx.kind} ${path || '(root)'}: no description (add one to DESCRIPTIONS)`);
  if (ctx.descriptions[path] !== undefined) ctx.used.add(path);
  out.description = description;

  const freeForm = n.type === undefined && n.properties === undefined && n.items === undefined;
  const record = n.type === 'object' && n.properties === undefined && n.additionalProperties !== undefined;
  if (freeForm) {
    // Any JSON value (z.unknown()): the one place a node has no type.
    out['x-kubernetes-preserve-unknown-fields'] = true;
    if (n.default !== undefined) out.default = n.default;
    return out;
  }
  if (typeof n.type !== 'string') throw new Error(`${ctx.kind} ${path}: no type`);
  out.type = n.type;
  if (nullable) out.nullable = true;
  if (record) {
    out['x-kubernetes-preserve-unknown-fields'] = true;
    if (n.default !== undefined) out.default = n.default;
    return out;
  }

  for (const key of KEY_ORDER) {
    const v = n[key];
    if (v === undefined || key === 'description' || key === 'type') continue;
    if (key === 'pattern') {
      try {
        RE2JS.compile(v as string);
      } catch (err) {
        throw new Error(`${ctx.kind} ${path}: pattern ${String(v)} is not RE2: ${(err as Error).message}`);
      }
    }
    // Kubernetes checks date-time itself (RFC 3339): zod's long equivalent pattern would only add noise.
    if (key === 'pattern' && n.format === 'date-time') continue;
    if ((key === 'maximum' && v === Number.MAX_SAFE_INTEGER) || (key === 'minimum' && v === Number.MIN_SAFE_INTEGER)) continue;
    if (key === 'items') out.items = structural(v as Json, `${path}[]`, ctx);
    else if (key === 'properties') {
      const props: Json = {};
      for (const [name, child] of Object.entries(v as Record<string, Json>)) {
        const camel = toCamel(name);
        props[camel] = structural(child, childPath(path, camel), ctx);
      }
      out.properties = props;
    } else if (key === 'required') {
      if ((v as string[]).length > 0) out.required = (v as string[]).map(toCamel);
    } else out[key] = v;
  }
  for (const key of Object.keys(n)) {
    if (!KEPT.has(key) && key !== 'additionalProperties' && key !== 'propertyNames' && key !== '$schema') {
      throw new Error(`${ctx.kind} ${path}: zod produced ${key}, which the generator does not map`);
    }
  }
  if (n.type === 'integer' && out.format === undefined) out.format = 'int64';
  Object.assign(out, BOUNDS[ctx.kind][path] ?? {});
  const validations = VALIDATIONS[ctx.kind][path];
  if (validations) out['x-kubernetes-validations'] = validations;
  return out;
}

/** A node's keys in a stable, readable order (description first, as kubectl explain reads). */
function ordered(node: Json): Json {
  const out: Json = {};
  for (const k of [...KEY_ORDER, ...Object.keys(node).sort()]) if (k in node && !(k in out)) out[k] = node[k];
  return out;
}

function jsonSchema(schema: z.ZodType): Json {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw' }) as Json;
}

function objectSchema(kind: Kind): Json {
  const info = KINDS[kind];
  const ctx: Ctx = { kind, descriptions: { ...CONDITION_DESCRIPTIONS, ...DESCRIPTIONS[kind] }, used: new Set() };
  const spec = structural(jsonSchema(info.spec), 'spec', ctx);
  const status = structural(jsonSchema(info.status), 'status', ctx);
  const conditions = (status.properties as Json).conditions as Json;
  conditions['x-kubernetes-list-type'] = 'map';
  conditions['x-kubernetes-list-map-keys'] = ['type'];
  (status.properties as Json).conditions = ordered(conditions);
  const unused = Object.keys(ctx.descriptions).filter((p) => p !== '' && !ctx.used.has(p));
  if (unused.length) throw new Error(`${kind}: DESCRIPTIONS of no field: ${unused.join(', ')}`);
  const root: Json = {
    description: DESCRIPTIONS[kind][''],
    type: 'object',
    required: ['spec'],
    properties: {
      apiVersion: { description: 'APIVersion defines the versioned schema of this representation of an object.', type: 'string' },
      kind: { description: 'Kind is a string value representing the REST resource this object represents.', type: 'string' },
      metadata: { type: 'object' },
      spec,
      status,
    },
  };
  if (VALIDATIONS[kind]['']) root['x-kubernetes-validations'] = VALIDATIONS[kind][''];
  return root;
}

/** Sorts every schema node's keys (recursively) into KEY_ORDER. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy);
  if (node === null || typeof node !== 'object') return node;
  const o = ordered(node as Json);
  for (const [k, v] of Object.entries(o)) {
    if (k === 'properties') o[k] = Object.fromEntries(Object.entries(v as Json).map(([p, c]) => [p, tidy(c)]));
    else if (k === 'items') o[k] = tidy(v);
  }
  return o;
}

export interface CrdDocument {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string> };
  spec: Json;
}

/** The four CRDs, as objects (what crds/<plural>.tollgate.dev.yaml hold). */
export function crdDocuments(): CrdDocument[] {
  return KIND_NAMES.map((kind) => {
    const info = KINDS[kind];
    return {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${info.plural}.${GROUP}`, labels: { 'app.kubernetes.io/part-of': 'tollgate' } },
      spec: {
        group: GROUP,
        names: {
          kind,
          listKind: `${kind}List`,
          plural: info.plural,
          singular: kind.toLowerCase(),
          shortNames: [info.shortName],
          categories: ['tollgate'],
        },
        scope: 'Namespaced',
        versions: [
          {
            name: VERSION,
            served: true,
            storage: true,
            subresources: { status: {} },
            additionalPrinterColumns: [
              {
                name: 'Ready',
                type: 'string',
                jsonPath: '.status.conditions[?(@.type=="Ready")].status',
                description: 'Whether Tollgate holds the object as declared',
              },
              ...info.columns,
              { name: 'Registry ID', type: 'string', jsonPath: '.status.registryId', description: "The object's id in Tollgate" },
              { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
            ],
            schema: { openAPIV3Schema: tidy(objectSchema(kind)) },
          },
        ],
      },
    };
  });
}

/** The file a CRD is written to, relative to the repository root. */
export const crdFile = (doc: CrdDocument) => `crds/${doc.metadata.name}.yaml`;

/** The YAML text of one CRD file. */
export function renderCrd(doc: CrdDocument): string {
  const header =
    '# Generated by scripts/gen-crds.ts from the API\'s zod schemas: do not edit, run `make docs`.\n' +
    '# docs/kubernetes.md describes the fields, validations and printer columns.\n';
  return header + stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = new URL('../', import.meta.url);
  for (const doc of crdDocuments()) {
    writeFileSync(new URL(crdFile(doc), root), renderCrd(doc));
    process.stdout.write(`wrote ${crdFile(doc)}\n`);
  }
}
