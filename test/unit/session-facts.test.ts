import { describe, expect, it } from 'vitest';
import { compileRules } from '../../api/modules/gateway/engine/compile.js';
import { afterCall, classificationRank, factsFromJson, factsToJson, MAX_SESSION_TOOLS, noFacts, readsSession, untrustedTool } from '../../api/modules/gateway/engine/session.js';
import type { ToolView } from '../../api/modules/gateway/engine/types.js';
import { onTheInternet } from '../../api/modules/gateway/snapshot.js';

const tool = (over: Partial<ToolView> = {}): ToolView => ({
  id: 't',
  key: 'k',
  privilegeClass: 'read',
  approvalClass: 'none',
  blocked: false,
  mcpServerId: null,
  ...over,
});

describe('session facts (engine/session.ts)', () => {
  it('rank classifications in the spec order, none and unknown as 0', () => {
    expect(['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'].map(classificationRank)).toEqual([1, 2, 3, 4, 5, 6]);
    expect([null, undefined, 'secret'].map(classificationRank)).toEqual([0, 0, 0]);
  });

  it('take an MCP server not approved, or an API on the internet, as an untrusted source', () => {
    expect(untrustedTool(tool({ mcpServerId: 's' }), { trustState: 'approved' })).toBe(false);
    for (const trustState of ['unknown', 'unsigned', 'quarantined'] as const) expect(untrustedTool(tool({ mcpServerId: 's' }), { trustState })).toBe(true);
    // A server the registry does not hold is not approved.
    expect(untrustedTool(tool({ mcpServerId: 's' }), undefined)).toBe(true);
    expect(untrustedTool(tool({ internetFacing: true }), undefined)).toBe(true);
    expect(untrustedTool(tool(), undefined)).toBe(false);
    expect(untrustedTool(undefined, undefined)).toBe(false);
  });

  it('bring the facts forward by one call without changing the facts before it', () => {
    const before = noFacts();
    const one = afterCall(before, 'claims.read', tool({ dataClassification: 'regulated' }), undefined);
    expect(before).toEqual(noFacts());
    expect(one).toEqual({ maxClassification: 'regulated', untrustedContent: false, tools: { 'claims.read': 1 }, calls: 1 });
    const two = afterCall(one, 'web.fetch', tool({ dataClassification: 'public', internetFacing: true }), undefined);
    // A lower classification read later does not lower the highest; untrusted content stays seen.
    expect(two).toEqual({ maxClassification: 'regulated', untrustedContent: true, tools: { 'claims.read': 1, 'web.fetch': 1 }, calls: 2 });
    expect(afterCall(two, 'claims.read', undefined, undefined)).toMatchObject({ tools: { 'claims.read': 2, 'web.fetch': 1 }, calls: 3, untrustedContent: true });
  });

  it('count at most MAX_SESSION_TOOLS keys one by one, and every call in calls', () => {
    let facts = noFacts();
    for (let i = 0; i < MAX_SESSION_TOOLS + 5; i++) facts = afterCall(facts, `tool.${i}`, tool(), undefined);
    facts = afterCall(facts, 'tool.0', tool(), undefined);
    expect(Object.keys(facts.tools)).toHaveLength(MAX_SESSION_TOOLS);
    expect(facts.tools['tool.0']).toBe(2);
    expect(facts.calls).toBe(MAX_SESSION_TOOLS + 6);
  });

  it('read back what they store, and nothing from a malformed document', () => {
    const facts = { maxClassification: 'personal', untrustedContent: true, tools: { a: 2 }, calls: 2 };
    expect(factsFromJson(JSON.parse(JSON.stringify(factsToJson(facts))))).toEqual(facts);
    expect(factsFromJson(null)).toEqual(noFacts());
    expect(factsFromJson({ max_classification: 7, untrusted_content: 'yes', tools: { a: 'x', b: 1 }, calls: '3' })).toEqual({ ...noFacts(), tools: { b: 1 } });
  });

  it('tell rules that read the session from those that do not', () => {
    const rules = (conditions: Array<{ field?: string; op: string; value?: unknown }>) =>
      compileRules([{ id: 'r', effect: 'deny', reason_code: 'TEST_RULE', conditions }]);
    expect(readsSession(rules([{ field: 'tool.key', op: 'eq', value: 'x' }]))).toBe(false);
    expect(readsSession(rules([{ field: 'session.calls', op: 'gt', value: 3 }]))).toBe(true);
    expect(readsSession(rules([{ op: 'cel', value: 'session.untrusted_content && tool.internet_facing' }]))).toBe(true);
    expect(readsSession(rules([{ op: 'cel', value: 'tool.key == "session"' }]))).toBe(true); // conservative: a word is enough
    expect(readsSession(rules([{ op: 'cel', value: 'tool.key == "sessions.list"' }]))).toBe(false);
  });
});

describe('an API on the internet (snapshot.ts onTheInternet)', () => {
  it.each([
    ['https://api.example.com/v1', true],
    ['http://93.184.216.34/', true],
    ['https://[2606:4700::1111]/', true],
    ['http://billing.payments.svc.cluster.local:8080', false],
    ['http://billing.payments.svc', false],
    ['https://wiki.corp/', false],
    ['https://printer.local', false],
    ['https://payments', false],
    ['http://10.1.2.3/', false],
    ['http://localhost:3000', false],
    ['http://[::1]/', false],
    ['http://169.254.169.254/latest', false],
    ['not a url', false],
    [null, false],
  ])('%s: %s', (url, expected) => {
    expect(onTheInternet(url)).toBe(expected);
  });
});
