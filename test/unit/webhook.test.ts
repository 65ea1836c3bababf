import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { injectSidecar, type AgentView } from '../../controller/webhook/inject.js';
import { ROOT } from '../support/processes.js';

/**
 * Golden files of the injection webhook: test/fixtures/webhook/<case>.input.json holds a pod and the
 * Agent it names; <case>.expected.json the stored pod after the webhook's patch, or the refusal.
 * `UPDATE_GOLDEN=1 npx vitest run test/unit/webhook.test.ts` rewrites the expected files (review the
 * diff before committing).
 */
const DIR = path.join(ROOT, 'test', 'fixtures', 'webhook');
const SETTINGS = { image: 'registry.example.com/tollgate:0.1.0', apiUrl: 'http://tollgate-api.tollgate.svc:8080' };
const cases = readdirSync(DIR)
  .filter((f) => f.endsWith('.input.json'))
  .map((f) => f.replace('.input.json', ''))
  .sort();

interface Input {
  about: string;
  pod: V1Pod;
  agent: AgentView | null;
}

describe('sidecar injection (golden files)', () => {
  it('has cases', () => expect(cases.length).toBeGreaterThanOrEqual(8));

  it.each(cases)('%s', (name) => {
    const input = JSON.parse(readFileSync(path.join(DIR, `${name}.input.json`), 'utf8')) as Input;
    const answer = injectSidecar(input.pod, input.agent ?? undefined, SETTINGS);
    const actual = answer.allowed
      ? { allowed: true, pod: jsonpatch.applyPatch(structuredClone(input.pod), answer.patch as jsonpatch.Operation[], true, false).newDocument }
      : { allowed: false, message: answer.message };
    const file = path.join(DIR, `${name}.expected.json`);
    if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, `${JSON.stringify(actual, null, 2)}\n`);
    expect(existsSync(file), `${name}.expected.json is missing: run with UPDATE_GOLDEN=1 and review it`).toBe(true);
    expect(actual).toEqual(JSON.parse(readFileSync(file, 'utf8')));

    // Idempotent: the webhook on its own output changes nothing (a reinvocation, a re-applied pod).
    if (actual.allowed) expect(injectSidecar(actual.pod as V1Pod, input.agent ?? undefined, SETTINGS)).toEqual({ allowed: true, patch: [] });
  });
});
