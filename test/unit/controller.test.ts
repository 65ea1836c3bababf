import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { controllerConfig } from '../../controller/main.js';
import { setCondition } from '../../controller/objects.js';
import type { AgentSpec, TollgateObject, ToolSpec } from '../../controller/kinds.js';
import { agentBody, differing, sameJson, snakeKeys, toolBody } from '../../controller/resources.js';
import { agentIn } from '../../api/modules/agents/agents.schemas.js';
import { toolIn } from '../../api/modules/inventory/inventory.schemas.js';

const agent = (spec: AgentSpec): TollgateObject<AgentSpec> => ({
  apiVersion: 'tollgate.dev/v1alpha1',
  kind: 'Agent',
  metadata: { name: 'payments-assistant', namespace: 'default' },
  spec,
});

describe('controller: resources to API bodies', () => {
  it('maps an Agent to an AgentIn body the API accepts, with the API defaults for absent fields', () => {
    const body = agentBody(agent({ name: 'Payments', owners: [{ name: 'Al', email: 'al@example.com' }], tools: [{ tool: 'x', actions: ['invoke'] }] }));
    expect(agentIn.parse(body)).toEqual(
      agentIn.parse({ name: 'Payments', slug: 'payments-assistant', business_unit: null, owners: [{ name: 'Al', email: 'al@example.com' }] }),
    );
    expect(body).not.toHaveProperty('tools');
    expect(body).not.toHaveProperty('data_classification'); // absent: the API's default, not compared
    expect(body.owners).toEqual([{ name: 'Al', email: 'al@example.com', owner_type: 'accountable' }]);
  });

  it('maps a Tool to a ToolIn body, leaving the input schema as written', () => {
    const spec: ToolSpec = { toolKey: 'a.b', name: 'Tool', inputSchema: { type: 'object', properties: { max_amount: { type: 'number' } } } };
    const body = toolBody({ apiVersion: 'tollgate.dev/v1alpha1', kind: 'Tool', metadata: { name: 't' }, spec }, null);
    expect(toolIn.safeParse(body).success).toBe(true);
    expect(body.input_schema).toEqual(spec.inputSchema);
  });

  it('renames keys to snake_case except inside free-form fields', () => {
    expect(snakeKeys([{ reasonCode: 'X', conditions: [{ op: 'eq', value: { someKey: 1 } }] }], ['value'])).toEqual([
      { reason_code: 'X', conditions: [{ op: 'eq', value: { someKey: 1 } }] },
    ]);
  });

  it('compares JSON structurally, ignoring key order and undefined members', () => {
    expect(sameJson({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(sameJson({ a: 1, b: undefined }, { a: 1 })).toBe(true);
    expect(sameJson([1, 2], [2, 1])).toBe(false);
    expect(sameJson({ a: null }, { a: 0 })).toBe(false);
    expect(differing({ a: 1, b: 'x', c: null }, { a: 1, b: 'y' }, ['a', 'b', 'c'])).toEqual(['b']);
  });
});

describe('controller: conditions', () => {
  it('moves lastTransitionTime only when the status changes', () => {
    const t1 = new Date('2026-11-23T10:00:00Z');
    const t2 = new Date('2026-11-23T10:05:00Z');
    const first = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'A', message: 'a' }, t1);
    const same = setCondition(first, { type: 'Ready', status: 'False', reason: 'B', message: 'b' }, t2);
    expect(same).toEqual([{ type: 'Ready', status: 'False', reason: 'B', message: 'b', lastTransitionTime: '2026-11-23T10:00:00Z' }]);
    const flipped = setCondition(same, { type: 'Ready', status: 'True', reason: 'C', message: 'c' }, t2);
    expect(flipped[0]!.lastTransitionTime).toBe('2026-11-23T10:05:00Z');
  });
});

describe('controller: configuration', () => {
  const base = { TOLLGATE_API_URL: 'http://tollgate-api:8080', TOLLGATE_CLIENT_ID: 'tgsa_x', TOLLGATE_CLIENT_SECRET: 's' };

  it('reads the credential from a mounted Secret directory', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tg-cred-'));
    writeFileSync(path.join(dir, 'client-id'), 'tgsa_abc\n');
    writeFileSync(path.join(dir, 'client-secret'), 'secret\n');
    const c = controllerConfig({ TOLLGATE_API_URL: base.TOLLGATE_API_URL, TOLLGATE_CREDENTIALS_DIR: dir, POD_NAME: 'ctl-0' });
    const read = c.credentials as () => unknown;
    expect(read()).toEqual({ clientId: 'tgsa_abc', clientSecret: 'secret' });
    writeFileSync(path.join(dir, 'client-secret'), 'rotated\n'); // the Secret updated in place
    expect(read()).toEqual({ clientId: 'tgsa_abc', clientSecret: 'rotated' });
    expect(c.identity).toMatch(/^ctl-0_\d+$/);
    expect(c).toMatchObject({ resyncMs: 300_000, workers: 4, leaseSeconds: 15, claimUnannotated: true });
  });

  it.each([
    [{ ...base, TOLLGATE_API_URL: undefined }, /TOLLGATE_API_URL/],
    [{ ...base, TOLLGATE_API_URL: 'ftp://x' }, /http or https/],
    [{ TOLLGATE_API_URL: base.TOLLGATE_API_URL }, /TOLLGATE_CREDENTIALS_DIR/],
    [{ ...base, TOLLGATE_CREDENTIALS_DIR: '/nonexistent' }, /has no client-id/],
    [{ ...base, TOLLGATE_WORKERS: '0' }, /TOLLGATE_WORKERS/],
    [{ ...base, TOLLGATE_RESYNC_SECONDS: 'soon' }, /TOLLGATE_RESYNC_SECONDS/],
    [{ ...base, TOLLGATE_CLAIM_UNANNOTATED: 'yes' }, /true or false/],
  ])('refuses a bad setting (%#)', (env, message) => {
    expect(() => controllerConfig(env)).toThrow(message);
  });
});
