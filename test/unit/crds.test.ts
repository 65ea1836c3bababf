import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import { agentIn } from '../../api/modules/agents/agents.schemas.js';
import { constraintsSchema } from '../../api/modules/agents/bindings.schemas.js';
import { mcpServerIn, mcpServerOut, toolIn } from '../../api/modules/inventory/inventory.schemas.js';
import { policyIn } from '../../api/modules/policies/policies.schemas.js';
import { PRINCIPAL_TYPE } from '../../api/modules/shared/enums.js';
import { toCamel, toSnake } from '../../controller/kinds.js';
import { crdDocuments, crdFile, renderCrd, type CrdDocument } from '../../scripts/gen-crds.js';
import { ROOT } from '../support/processes.js';

type Node = Record<string, unknown>;
const docs = crdDocuments();
const kindOf = (d: CrdDocument) => (d.spec.names as { kind: string }).kind;
const rootOf = (d: CrdDocument) =>
  ((d.spec.versions as { schema: { openAPIV3Schema: Node } }[])[0]!.schema.openAPIV3Schema);

/** Every schema node of a CRD with its path (`spec.owners[].ownerType`). */
function* walk(node: Node, p = ''): Generator<[string, Node]> {
  yield [p, node];
  for (const [name, child] of Object.entries((node.properties as Record<string, Node> | undefined) ?? {})) {
    yield* walk(child, p ? `${p}.${name}` : name);
  }
  if (node.items) yield* walk(node.items as Node, `${p}[]`);
}

/** The API's JSON Schema (request side) a CRD path stands for, by kind: the longest matching prefix wins. */
const json = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Node;
const API: Record<string, Record<string, Node>> = {
  Agent: {
    spec: json(agentIn),
    'spec.tools[].constraints': json(constraintsSchema),
    // The delegation body (bindings.schemas.ts) takes its enum from the shared ones.
    'spec.delegations[].principalType': json(z.enum(PRINCIPAL_TYPE)),
  },
  Tool: { spec: json(toolIn) },
  MCPServer: { spec: json(mcpServerIn), 'status.trustState': json(mcpServerOut.shape.trust_state) },
  Policy: { spec: json(policyIn) },
};
/** Renamed fields (CRD -> API); every other name maps by toSnake. */
const RENAMED: Record<string, Record<string, string>> = { Policy: { 'spec.displayName': 'name' } };
/** Enums of Kubernetes' own shapes, not the API's. */
const KUBERNETES_ENUMS: Record<string, string[]> = { 'status.conditions[].status': ['True', 'False', 'Unknown'] };

function unwrap(n: Node): Node {
  const anyOf = n.anyOf as Node[] | undefined;
  return anyOf ? anyOf.find((b) => b.type !== 'null')! : n;
}

function apiNode(kind: string, crdPath: string): Node | undefined {
  const prefix = Object.keys(API[kind]!)
    .filter((k) => crdPath === k || crdPath.startsWith(`${k}.`) || crdPath.startsWith(`${k}[`))
    .sort((a, b) => b.length - a.length)[0];
  if (prefix === undefined) return undefined;
  let node: Node | undefined = API[kind]![prefix];
  let sofar = prefix;
  for (const seg of crdPath.slice(prefix.length).match(/\[\]|[^.[\]]+/g) ?? []) {
    if (!node) return undefined;
    node = unwrap(node);
    if (seg === '[]') {
      node = node.items as Node | undefined;
      sofar += '[]';
    } else {
      sofar += `.${seg}`;
      const name = RENAMED[kind]?.[sofar] ?? toSnake(seg);
      node = (node.properties as Record<string, Node> | undefined)?.[name];
    }
  }
  return node && unwrap(node);
}

describe('the CRDs (crds/)', () => {
  it('are the generator output, checked in', () => {
    for (const doc of docs) {
      const file = crdFile(doc);
      let onDisk = '';
      try {
        onDisk = readFileSync(path.join(ROOT, file), 'utf8');
      } catch {
        // missing: reported below
      }
      expect(onDisk, `${file} is stale or missing: run \`make docs\``).toBe(renderCrd(doc));
    }
    const yamls = readdirSync(path.join(ROOT, 'crds')).filter((f) => /\.ya?ml$/.test(f)).sort();
    expect(yamls, 'crds/ holds a YAML file the generator does not write: run `make docs` or remove it').toEqual(
      docs.map((d) => path.basename(crdFile(d))).sort(),
    );
  });

  it('declare Agent, Tool, MCPServer and Policy in tollgate.dev/v1alpha1, namespaced, with status, names and columns', () => {
    expect(docs.map(kindOf)).toEqual(['Agent', 'Tool', 'MCPServer', 'Policy']);
    for (const doc of docs) {
      const spec = doc.spec as Node & { names: Node; versions: Node[] };
      expect(spec.group).toBe('tollgate.dev');
      expect(spec.scope).toBe('Namespaced');
      expect(spec.names.categories).toEqual(['tollgate']);
      expect(doc.metadata.name).toBe(`${spec.names.plural as string}.tollgate.dev`);
      const v = spec.versions[0]!;
      expect(v).toMatchObject({ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} } });
      const columns = (v.additionalPrinterColumns as { name: string; jsonPath: string }[]).map((c) => c.name);
      expect(columns[0]).toBe('Ready');
      expect(columns.slice(-2)).toEqual(['Registry ID', 'Age']);
      const status = (rootOf(doc).properties as Record<string, Node>).status!.properties as Record<string, Node>;
      expect(Object.keys(status)).toEqual(expect.arrayContaining(['observedGeneration', 'registryId', 'conditions']));
    }
    expect(docs.map((d) => (d.spec.names as { shortNames: string[] }).shortNames)).toEqual([['tgagent'], ['tgtool'], ['tgmcp'], ['tgpolicy']]);
  });

  it("carry the API's enums, every one, and no other", () => {
    let compared = 0;
    for (const doc of docs) {
      const kind = kindOf(doc);
      const crdEnums = new Map<string, unknown>();
      for (const [p, node] of walk(rootOf(doc))) if (node.enum) crdEnums.set(p, node.enum);
      for (const [p, values] of crdEnums) {
        if (KUBERNETES_ENUMS[p]) {
          expect(values, `${kind} ${p}`).toEqual(KUBERNETES_ENUMS[p]);
          continue;
        }
        const api = apiNode(kind, p);
        expect(api?.enum, `${kind} ${p}: no enum at the API's counterpart`).toBeDefined();
        expect(values, `${kind} ${p}`).toEqual(api!.enum);
        compared++;
      }
      // The other way round: every enum of the API's schemas is in the CRD, at the converted path.
      for (const [prefix, schema] of Object.entries(API[kind]!)) {
        for (const [p, node] of walk(unwrapTree(schema), prefix)) {
          if (!node.enum) continue;
          const crdPath = p.split('.').map((s, i) => (i === 0 ? s : camelSegment(kind, s))).join('.');
          expect(crdEnums.get(crdPath), `${kind}: the API's enum at ${p} is missing from the CRD (${crdPath})`).toEqual(node.enum);
        }
      }
    }
    expect(compared).toBeGreaterThanOrEqual(15); // the walk found them: 9 Agent, 2 Tool, 3 MCPServer, 1 Policy
  });

  it('are structural: a type on every node, no forbidden keywords, a description on every field, bounded strings and arrays', () => {
    const forbidden = ['$schema', '$ref', '$defs', 'anyOf', 'oneOf', 'allOf', 'not', 'additionalProperties', 'propertyNames', 'const'];
    const freeForm = ['spec.rules[].conditions[].value'];
    for (const doc of docs) {
      const kind = kindOf(doc);
      for (const [p, node] of walk(rootOf(doc))) {
        const at = `${kind} ${p || '(root)'}`;
        for (const k of forbidden) expect(node, `${at} has ${k}`).not.toHaveProperty([k]);
        if (node.type === undefined) {
          expect(freeForm, `${at} has no type`).toContain(p);
          expect(node['x-kubernetes-preserve-unknown-fields'], at).toBe(true);
        }
        if (!/^(spec|status)\b/.test(p)) continue; // apiVersion, kind, metadata: Kubernetes' own
        expect(typeof node.description === 'string' && node.description.length > 0, `${at} has no description`).toBe(true);
        if (node.type === 'string') {
          expect(node.maxLength !== undefined || node.enum !== undefined || node.format === 'date-time', `${at}: unbounded string`).toBe(true);
        }
        if (node.type === 'array') expect(node.maxItems, `${at}: unbounded array`).toBeTypeOf('number');
        if (typeof node.pattern === 'string') expect(() => RE2JS.compile(node.pattern as string), `${at}: pattern not RE2`).not.toThrow();
        if (node.default !== undefined && node.enum) expect(node.enum, at).toContain(node.default);
      }
    }
  });

  it('check the rules that span fields with CEL', () => {
    const rules = (kind: string, p: string) => {
      const doc = docs.find((d) => kindOf(d) === kind)!;
      const node = [...walk(rootOf(doc))].find(([q]) => q === p)![1];
      return ((node['x-kubernetes-validations'] as { rule: string }[] | undefined) ?? []).map((v) => v.rule);
    };
    expect(rules('Agent', 'spec').join()).toMatch(/production.*owners.*purpose.*dataClassification/);
    expect(rules('Policy', 'spec.rules[]').join()).toMatch(/require_approval.*obligations/);
    expect(rules('Policy', 'spec.rules').join()).toMatch(/exists_one/);
  });
});

describe('the examples (examples/)', () => {
  const example = (name: string) =>
    parse(readFileSync(path.join(ROOT, 'examples', `${name}.yaml`), 'utf8')) as { kind: string; metadata: { name: string }; spec: Node };

  it('are valid API request bodies once mapped back (camelCase -> snake_case, metadata.name -> slug/key)', () => {
    const agent = example('agent');
    const { tools, delegations, ...agentRest } = snakeKeys(agent.spec) as Node & { tools: Node[]; delegations: Node[] };
    expect(agentIn.safeParse({ ...agentRest, slug: agent.metadata.name }).error).toBeUndefined();
    expect(tools.length).toBeGreaterThan(0);
    for (const t of tools) expect(constraintsSchema.safeParse(t.constraints).error).toBeUndefined();
    expect(delegations.length).toBeGreaterThan(0);
    expect(agentRest.environment).toBe('production');

    const tool = example('tool');
    const { mcp_server_ref: ref, ...toolRest } = snakeKeys(tool.spec, ['input_schema']) as Node & { mcp_server_ref: { name: string } };
    expect(toolIn.safeParse(toolRest).error).toBeUndefined();
    const server = example('mcpserver');
    expect(ref.name).toBe(server.metadata.name);
    expect(mcpServerIn.safeParse({ ...(snakeKeys(server.spec) as Node), name: server.metadata.name }).error).toBeUndefined();

    const policy = example('policy');
    const { display_name, ...policyRest } = snakeKeys(policy.spec, ['value']) as Node;
    expect(policyIn.safeParse({ ...policyRest, name: display_name, key: policy.metadata.name }).error).toBeUndefined();
    expect(JSON.stringify(policy.spec)).toContain('"op":"cel"');
  });

  it('the camelCase conversion is reversible on every API field name', () => {
    for (const schema of [agentIn, toolIn, mcpServerIn, policyIn, constraintsSchema]) {
      for (const [p] of walk(json(schema))) {
        const last = p.split('.').pop()!.replace('[]', '');
        if (last) expect(toSnake(toCamel(last))).toBe(last);
      }
    }
  });
});

/** snake_case keys of a CRD spec, leaving the contents of free-form fields alone. */
function snakeKeys(v: unknown, freeForm: string[] = []): unknown {
  if (Array.isArray(v)) return v.map((x) => snakeKeys(x, freeForm));
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => {
      const key = toSnake(k);
      return [key, freeForm.includes(key) ? x : snakeKeys(x, freeForm)];
    }),
  );
}

/** An API JSON Schema with every `X | null` replaced by X, for walking. */
function unwrapTree(n: Node): Node {
  const u = { ...unwrap(n) };
  if (u.properties) {
    u.properties = Object.fromEntries(Object.entries(u.properties as Record<string, Node>).map(([k, c]) => [k, unwrapTree(c)]));
  }
  if (u.items) u.items = unwrapTree(u.items as Node);
  return u;
}

function camelSegment(kind: string, seg: string): string {
  const renamed = Object.entries(RENAMED[kind] ?? {}).find(([, api]) => api === seg);
  const bare = seg.replace(/\[\]$/, '');
  const suffix = seg.slice(bare.length);
  return (renamed ? renamed[0].split('.').pop()! : toCamel(bare)) + suffix;
}
