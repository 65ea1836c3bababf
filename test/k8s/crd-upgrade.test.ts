import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, kubectlRaw } from '../support/kubectl.js';
import { ROOT } from '../support/processes.js';

/**
 * CRD upgrades, which `helm upgrade` does not do (Helm installs crds/ on the first install only): the command of
 * docs/helm.md, "Upgrading: CRDs first", read from the docs and run as written on a real API server holding the
 * CRDs of an earlier release (taken from git). The new schema is then served (fields that release lacked are
 * explained and accepted, values it refused are accepted, the printer columns are the new ones), objects created
 * under the old schema survive, a second run changes nothing, and CRDs first installed by Helm itself (field
 * manager `helm`) need the `--force-conflicts` the docs name.
 */

const exec = promisify(execFile);
/** The last commit before tool keys kept MCP's case: its Tool CRD refuses upper-case keys. */
const PREVIOUS = '796c160';
const CHART_CRDS = path.join(ROOT, 'charts', 'tollgate', 'crds');
const FILES = readdirSync(CHART_CRDS).filter((f) => f.endsWith('.yaml')).sort();

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const crdOf = (text: string): Json => parse(text);
const current = Object.fromEntries(FILES.map((f) => [f, crdOf(readFileSync(path.join(CHART_CRDS, f), 'utf8'))]));

/** The documented command, from the code block of docs/helm.md's "Upgrading: CRDs first". */
function documentedCommand(): { argv: string[]; section: string } {
  const docs = readFileSync(path.join(ROOT, 'docs', 'helm.md'), 'utf8');
  const start = docs.indexOf('## Upgrading: CRDs first');
  expect(start, 'docs/helm.md has the section "Upgrading: CRDs first"').toBeGreaterThan(-1);
  const section = docs.slice(start, docs.indexOf('\n## ', start + 1));
  const line = section.split('\n').find((l) => l.startsWith('kubectl apply'));
  expect(line, 'a kubectl apply line in the section').toBeDefined();
  const words = line!.replace(/#.*$/, '').trim().split(/\s+/);
  return { argv: words.slice(1), section };
}

/** Property paths of an openAPIV3Schema, e.g. status.riskBand. */
function propertyPaths(schema: Json, prefix = ''): string[] {
  return Object.entries((schema?.properties ?? {}) as Record<string, Json>).flatMap(([k, v]) => {
    const p = prefix ? `${prefix}.${k}` : k;
    return [p, ...propertyPaths(v.type === 'array' ? v.items : v, p)];
  });
}

describe('CRD upgrades with the command of docs/helm.md', () => {
  let kube: KubeCluster;
  let oldDir = '';
  let previous: Record<string, Json> = {};
  const { argv: documented, section } = documentedCommand();
  // The docs' paths are relative to the checkout.
  const command = documented.map((a) => (a.includes('/') ? path.join(ROOT, a) : a));

  const kubectl = async (...args: string[]) => (await kubectlRaw(kube, args)).stdout;
  const apply = async (o: Json, ...flags: string[]) => (await kubectlRaw(kube, ['apply', ...flags, '-f', '-'], JSON.stringify(o))).stdout;
  const served = async (name: string): Promise<Json> => JSON.parse(await kubectl('get', 'crd', name, '-o', 'json'));
  const names = () => FILES.map((f) => current[f].metadata.name as string);
  const crdVersions = async () => Object.fromEntries(await Promise.all(names().map(async (n) => [n, (await served(n)).metadata.resourceVersion])));

  const tool = (name: string, toolKey: string) => ({
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'Tool',
    metadata: { name, namespace: 'default' },
    spec: { ...parse(readFileSync(path.join(ROOT, 'examples', 'tool.yaml'), 'utf8')).spec, toolKey },
  });

  beforeAll(async () => {
    // The binaries are built (or found cached) here, so that no case pays for it.
    await startKube().then((k) => k.stop());
    oldDir = mkdtempSync(path.join(tmpdir(), 'tollgate-crds-previous-'));
    for (const f of FILES) {
      const { stdout } = await exec('git', ['show', `${PREVIOUS}:crds/${f}`], { cwd: ROOT, maxBuffer: 16 << 20 }).catch((err: Error) => {
        throw new Error(`the previous release's CRDs come from git (${PREVIOUS}): ${err.message}`);
      });
      writeFileSync(path.join(oldDir, f), stdout);
      previous[f] = crdOf(stdout);
    }
  }, 30 * 60_000);

  afterAll(async () => {
    await kube?.stop();
    if (oldDir) rmSync(oldDir, { recursive: true, force: true });
  }, 60_000);

  /** A case starts an API server and installs the earlier release's CRDs before it runs the command: its waits allow for that. */
  const CASE_TIMEOUT_MS = 180_000;
  /**
   * Each case starts from an API server of its own holding the earlier release's CRDs, applied `how`. (Not
   * by deleting the CRDs a case before left: a CRD's deletion waits for its instances' cleanup, which on a
   * loaded machine sometimes outlasted kubectl's minute, and that was not what these cases are about.)
   */
  const installPrevious = async (...how: string[]) => {
    await kube?.stop();
    kube = await startKube();
    await kubectl(...how, '-f', oldDir);
    // kubectl wait fails instead of waiting while a just-created CRD has no conditions yet.
    await eventually(() => kubectl('wait', '--for=condition=Established', '--timeout=60s', ...names().map((n) => `crd/${n}`)), 60_000, 'the CRDs Established');
    // Discovery may lag the Established condition a moment.
    await eventually(async () => (await kubectl('get', 'tools.tollgate.dev', '-A')) !== undefined, 10_000, 'tools served');
  };
  it('the earlier release differs from this one (the test would prove nothing otherwise)', () => {
    const differs = FILES.filter((f) => JSON.stringify(previous[f].spec) !== JSON.stringify(current[f].spec));
    expect(differs).toContain('tools.tollgate.dev.yaml');
    expect(documented).toEqual(['apply', '--server-side', '-f', 'charts/tollgate/crds/']);
  });

  it('CRDs applied server-side by the earlier release: the command serves the new schema, keeps the objects, and a second run changes nothing', async () => {
    await installPrevious('apply', '--server-side');
    // Under the old schema: a lower-case key is accepted, an MCP-cased one refused, the new fields unknown.
    await apply(tool('lookup', 'payments.lookup'));
    const agent = parse(readFileSync(path.join(ROOT, 'examples', 'agent.yaml'), 'utf8'));
    await apply(agent);
    await expect(apply(tool('cased', 'Payments.Lookup'), '--dry-run=server')).rejects.toThrow(/toolKey/);
    const newFields = FILES.flatMap((f) => {
      const old = new Set(propertyPaths(previous[f].spec.versions[0].schema.openAPIV3Schema));
      return propertyPaths(current[f].spec.versions[0].schema.openAPIV3Schema)
        .filter((p) => !old.has(p))
        .map((p) => `${current[f].spec.names.plural}.${p}`);
    });
    for (const field of newFields) await expect(kubectl('explain', field), field).rejects.toThrow(/does not exist|couldn't find/);
    const before = {
      tool: JSON.parse(await kubectl('get', 'tools.tollgate.dev', 'lookup', '-n', 'default', '-o', 'json')),
      agent: JSON.parse(await kubectl('get', 'agents.tollgate.dev', agent.metadata.name, '-n', agent.metadata.namespace ?? 'default', '-o', 'json')),
    };

    const { stderr } = await kubectlRaw(kube, command);
    expect(stderr.trim()).toBe('');

    // The new schema is served: the CRDs as checked in, printer columns included.
    for (const f of FILES) {
      const crd = await served(current[f].metadata.name);
      expect(crd.spec.versions.map((v: Json) => v.schema.openAPIV3Schema), f).toEqual(current[f].spec.versions.map((v: Json) => v.schema.openAPIV3Schema));
      expect(crd.spec.versions.map((v: Json) => v.additionalPrinterColumns ?? []), f).toEqual(
        current[f].spec.versions.map((v: Json) => v.additionalPrinterColumns ?? []),
      );
    }
    await eventually(async () => apply(tool('cased', 'Payments.Lookup')), 15_000, 'an MCP-cased tool key accepted');
    // The API server republishes its OpenAPI document a moment after the CRD changed.
    for (const field of newFields) expect(await eventually(() => kubectl('explain', field), 15_000, `kubectl explain ${field}`), field).toContain('FIELD:');

    // The objects created under the old schema are the same objects, unchanged.
    const after = {
      tool: JSON.parse(await kubectl('get', 'tools.tollgate.dev', 'lookup', '-n', 'default', '-o', 'json')),
      agent: JSON.parse(await kubectl('get', 'agents.tollgate.dev', agent.metadata.name, '-n', agent.metadata.namespace ?? 'default', '-o', 'json')),
    };
    for (const k of ['tool', 'agent'] as const) {
      expect(after[k].metadata.uid).toBe(before[k].metadata.uid);
      expect(after[k].spec).toEqual(before[k].spec);
    }

    // Again: nothing changes (same resourceVersion on every CRD).
    const versions = await crdVersions();
    await kubectlRaw(kube, command);
    expect(await crdVersions()).toEqual(versions);

    await kubectl('delete', 'tools.tollgate.dev', '--all', '-n', 'default');
    await kubectl('delete', 'agents.tollgate.dev', '--all', '-A');
  }, CASE_TIMEOUT_MS);

  it('CRDs installed by Helm (field manager helm) conflict, and the --force-conflicts the docs name takes them over', async () => {
    // What Helm's first install does with the chart's crds/: a create by the field manager `helm`.
    await installPrevious('create', '--field-manager=helm');
    await expect(kubectlRaw(kube, command)).rejects.toThrow(/conflict with "helm"/);
    expect(section).toContain('--force-conflicts');
    expect(section).toMatch(/installed by Helm|created by Helm|first `helm install`/);

    await kubectlRaw(kube, [...command, '--force-conflicts']);
    const crd = await served('tools.tollgate.dev');
    expect(crd.spec.versions[0].schema.openAPIV3Schema).toEqual(current['tools.tollgate.dev.yaml'].spec.versions[0].schema.openAPIV3Schema);
    // Taken over: from now on the documented command alone works, and changes nothing.
    const versions = await crdVersions();
    await kubectlRaw(kube, command);
    expect(await crdVersions()).toEqual(versions);
  }, CASE_TIMEOUT_MS);

  it('CRDs first applied client-side (kubectl apply without --server-side): kubectl moves them over, no conflict', async () => {
    await installPrevious('apply');
    const { stderr } = await kubectlRaw(kube, command);
    expect(stderr.trim()).toBe('');
    const crd = await served('tools.tollgate.dev');
    expect(crd.spec.versions[0].schema.openAPIV3Schema).toEqual(current['tools.tollgate.dev.yaml'].spec.versions[0].schema.openAPIV3Schema);
  }, CASE_TIMEOUT_MS);
});
