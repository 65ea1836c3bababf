import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../support/processes.js';

/**
 * charts/tollgate without helm: every value of values.yaml is declared in values.schema.json and listed in the
 * values table of docs/helm.md, and the schema declares nothing values.yaml lacks. (Rendering and installing
 * the chart is test/k8s/helm.test.ts.)
 */

const CHART = path.join(ROOT, 'charts', 'tollgate');
const values = parse(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
const schema = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as Schema;
const docs = readFileSync(path.join(ROOT, 'docs', 'helm.md'), 'utf8');

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
}

/** Maps whose content is free (Kubernetes fields, labels): documented and checked as one value. */
const FREE = new Set(['resources', 'readinessProbe', 'podSecurityContext', 'containerSecurityContext', 'podLabels', 'podAnnotations', 'annotations', 'issuerRef', 'matchLabels', 'nodeSelector', 'affinity', 'commonLabels']);

function leaves(obj: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(obj).flatMap(([key, value]) => {
    const p = prefix ? `${prefix}.${key}` : key;
    const isMap = value !== null && typeof value === 'object' && !Array.isArray(value);
    return isMap && !FREE.has(key) && Object.keys(value).length > 0 ? leaves(value as Record<string, unknown>, p) : [p];
  });
}

function schemaAt(p: string): Schema | undefined {
  let s: Schema | undefined = schema;
  for (const key of p.split('.')) s = s?.properties?.[key];
  return s;
}

function schemaLeaves(s: Schema, prefix = ''): string[] {
  return Object.entries(s.properties ?? {}).flatMap(([key, sub]) => {
    const p = prefix ? `${prefix}.${key}` : key;
    return sub.properties && !FREE.has(key) ? schemaLeaves(sub, p) : [p];
  });
}

describe('charts/tollgate values', () => {
  const paths = leaves(values);

  it('are all declared in values.schema.json, which refuses unknown keys', () => {
    expect(paths.length).toBeGreaterThan(80);
    expect(paths.filter((p) => !schemaAt(p))).toEqual([]);
    expect(schema.additionalProperties).toBe(false);
  });

  it('and the schema declares nothing that values.yaml lacks (but `global`, which Helm adds to a subchart)', () => {
    const declared = schemaLeaves(schema).filter((p) => p !== 'global');
    const known = new Set(paths);
    expect(declared.filter((p) => !known.has(p) && !paths.some((v) => v.startsWith(`${p}.`) || p.startsWith(`${v}.`)))).toEqual([]);
  });

  it('are all in the values table of docs/helm.md', () => {
    const table = docs.slice(docs.indexOf('## Values'), docs.indexOf('## Tests and the helm binary'));
    expect(table).toContain('| Value | Default | Meaning |');
    expect(paths.filter((p) => !table.includes(`\`${p}\``))).toEqual([]);
  });
});
