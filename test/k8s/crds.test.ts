import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { installCrds, kubectlRaw } from '../support/kubectl.js';
import { ROOT } from '../support/processes.js';

const EXAMPLES = ['mcpserver', 'tool', 'agent', 'policy'].map((e) => path.join(ROOT, 'examples', `${e}.yaml`));

let cluster: KubeCluster | undefined;

/** kubectl's output; its warnings (stderr of a command that succeeded) are collected in `warnings`. */
const warnings: string[] = [];
async function kubectl(...args: string[]): Promise<string> {
  if (!cluster) throw new Error('no cluster');
  const { stdout, stderr } = await kubectlRaw(cluster, args);
  if (stderr.trim()) warnings.push(`kubectl ${args.join(' ')}: ${stderr.trim()}`);
  return stdout;
}

/** Writes a manifest (JSON, which kubectl reads as YAML) into the cluster's temp dir. */
function manifest(name: string, body: object): string {
  const file = path.join(cluster!.dir, name);
  writeFileSync(file, JSON.stringify(body));
  return file;
}

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec: Record<string, unknown> };
const example = (name: string) => parse(readFileSync(path.join(ROOT, 'examples', `${name}.yaml`), 'utf8')) as Manifest;

describe('the tollgate.dev CRDs on a real Kubernetes API server', () => {
  beforeAll(async () => {
    cluster = await startKube();
    warnings.push(...(await installCrds(cluster)));
  }, 30 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('accepts every CRD without warnings and applies the examples cleanly', async () => {
    for (const file of EXAMPLES) {
      const out = await kubectl('apply', '-f', file);
      expect(out).toMatch(/created|configured|unchanged/);
    }
    expect(warnings).toEqual([]);
    const agent = JSON.parse(await kubectl('get', 'agents.tollgate.dev', 'payments-assistant', '-o', 'json')) as Manifest;
    expect(agent.spec).toMatchObject({ environment: 'production', dataClassification: 'confidential' });
    // Defaults apply as in the API.
    const owners = agent.spec.owners as { ownerType: string }[];
    expect(owners.map((o) => o.ownerType)).toEqual(['accountable', 'technical']);
    const tool = JSON.parse(await kubectl('get', 'tools.tollgate.dev', 'payments-transfer', '-o', 'json')) as Manifest;
    expect(tool.spec.inputSchema).toMatchObject({ type: 'object', properties: { amount: { type: 'number' } } });
    const policy = JSON.parse(await kubectl('get', 'policies.tollgate.dev', 'payments-limits', '-o', 'json')) as Manifest;
    const rules = policy.spec.rules as { conditions: { value: unknown }[] }[];
    expect(rules[1]!.conditions[1]!.value).toEqual(['EUR', 'USD']);
  });

  it('kubectl explain prints the field descriptions', async () => {
    const out = await kubectl('explain', 'agents.spec.environment', '--api-version=tollgate.dev/v1alpha1');
    expect(out).toContain('The environment the agent runs in');
    expect(out).toMatch(/ENUM:[\s\S]*production/);
  });

  it('refuses a production Agent without owners, with the CEL message', async () => {
    const a = example('agent');
    const bad = manifest('no-owners.json', { ...a, metadata: { ...a.metadata, name: 'no-owners' }, spec: { ...a.spec, owners: [] } });
    await expect(kubectl('apply', '-f', bad)).rejects.toThrow(/production agents need at least one owner/);
    const { owners: _o, purpose: _p, dataClassification: _d, ...bare } = a.spec;
    const worse = manifest('bare.json', { ...a, metadata: { ...a.metadata, name: 'bare' }, spec: bare });
    await expect(kubectl('apply', '-f', worse)).rejects.toThrow(
      /production agents need at least one owner, a non-empty purpose, a dataClassification/,
    );
    // The same agent in development is fine.
    const dev = manifest('dev.json', { ...a, metadata: { ...a.metadata, name: 'dev' }, spec: { ...bare, environment: 'development' } });
    expect(await kubectl('apply', '-f', dev)).toContain('agent.tollgate.dev/dev created');
  });

  it('refuses an Agent with an unknown environment, naming the field', async () => {
    const a = example('agent');
    const bad = manifest('moon.json', { ...a, metadata: { ...a.metadata, name: 'moon' }, spec: { ...a.spec, environment: 'moon' } });
    await expect(kubectl('apply', '-f', bad)).rejects.toThrow(/spec\.environment: Unsupported value: "moon"/);
  });

  it('refuses a Policy with obligations on a deny rule, and duplicate rule ids', async () => {
    const p = example('policy');
    const rules = p.spec.rules as Record<string, unknown>[];
    const denyWithObligations = { ...rules[1]!, obligations: { approvalsRequired: 2 } };
    const bad = manifest('deny-obligations.json', { ...p, metadata: { ...p.metadata, name: 'bad-obligations' }, spec: { ...p.spec, rules: [denyWithObligations] } });
    await expect(kubectl('apply', '-f', bad)).rejects.toThrow(/spec\.rules\[0\]\.obligations: Invalid value.*obligations are allowed on require_approval rules only/);
    const dup = manifest('dup.json', { ...p, metadata: { ...p.metadata, name: 'dup-ids' }, spec: { ...p.spec, rules: [rules[1], rules[1]] } });
    await expect(kubectl('apply', '-f', dup)).rejects.toThrow(/rule ids must be unique within the policy/);
  });

  it('kubectl get tgagent prints the printer columns', async () => {
    const out = await kubectl('get', 'tgagent', 'payments-assistant');
    const [header, row] = out.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'READY', 'ENVIRONMENT', 'CRITICALITY', 'REGISTRY ID', 'AGE']);
    expect(row).toMatch(/^payments-assistant\s+production\s+high\s+\S+$/); // no status yet: Ready and Registry ID empty
    expect(await kubectl('get', 'tgtool')).toMatch(/^NAME\s+READY\s+TOOL KEY\s+PRIVILEGE\s+REGISTRY ID\s+AGE\n.*payments\.transfer\s+financial/);
    expect(await kubectl('get', 'tgmcp')).toMatch(/^NAME\s+READY\s+ENDPOINT\s+TRUST\s+REGISTRY ID\s+AGE\n.*https:\/\/mcp\.payments\.example\.com\/mcp/);
    expect(await kubectl('get', 'tgpolicy')).toMatch(/^NAME\s+READY\s+PUBLISHED\s+LATEST\s+REGISTRY ID\s+AGE\n/);
  });

  it('has a status subresource: a status patch is kept, and a spec write does not change it', async () => {
    const status = {
      observedGeneration: 1,
      registryId: '0b6f3c1e-8d1a-4b7e-9a55-3f1f0f6c2a10',
      conditions: [
        { type: 'Ready', status: 'True', reason: 'Registered', message: 'registered in Tollgate', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 1 },
      ],
    };
    await kubectl('patch', 'agents.tollgate.dev', 'payments-assistant', '--subresource=status', '--type=merge', '-p', JSON.stringify({ status }));
    const got = JSON.parse(await kubectl('get', 'agents.tollgate.dev', 'payments-assistant', '-o', 'json')) as { status: unknown };
    expect(got.status).toEqual(status);
    const out = await kubectl('get', 'tgagent', 'payments-assistant');
    expect(out).toMatch(/payments-assistant\s+True\s+production\s+high\s+0b6f3c1e-8d1a-4b7e-9a55-3f1f0f6c2a10\s+\S+/);

    // Policy and MCPServer statuses carry their own fields.
    await kubectl('patch', 'policies.tollgate.dev', 'payments-limits', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { latestVersion: 2, publishedVersion: 1, publishState: "draft awaiting a second person's publication" } }));
    expect(await kubectl('get', 'tgpolicy', 'payments-limits')).toMatch(/payments-limits\s+1\s+2\s+/);
    await kubectl('patch', 'mcpservers.tollgate.dev', 'payments-mcp', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { trustState: 'approved' } }));
    expect(await kubectl('get', 'tgmcp', 'payments-mcp')).toMatch(/payments-mcp\s+https:\S+\s+approved/);
    await expect(kubectl('patch', 'mcpservers.tollgate.dev', 'payments-mcp', '--subresource=status', '--type=merge', '-p',
      JSON.stringify({ status: { trustState: 'trusted' } }))).rejects.toThrow(/status\.trustState: Unsupported value/);

    // A status written through the main resource is ignored.
    await kubectl('patch', 'agents.tollgate.dev', 'payments-assistant', '--type=merge', '-p', JSON.stringify({ status: { registryId: 'other' } }));
    const again = JSON.parse(await kubectl('get', 'agents.tollgate.dev', 'payments-assistant', '-o', 'json')) as { status: { registryId: string } };
    expect(again.status.registryId).toBe(status.registryId);
  });

  it('refuses an MCPServer endpoint that is not an https, http or stdio URL', async () => {
    const m = example('mcpserver');
    const bad = manifest('ftp.json', { ...m, metadata: { ...m.metadata, name: 'ftp-server' }, spec: { ...m.spec, endpoint: 'ftp://files.example.com' } });
    await expect(kubectl('apply', '-f', bad)).rejects.toThrow(/spec\.endpoint: Invalid value.*a URL \(https, http, stdio\)/);
  });
});
