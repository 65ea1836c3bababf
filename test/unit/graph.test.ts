import { describe, expect, it } from 'vitest';
import { GRAPH_SOURCE_COLUMNS } from '../../api/db/migrations/0011_graph.js';
import { csvCell, toCsv } from '../../api/modules/graph/graph.csv.js';
import { access, blastRadius, GraphView, neighbours, shortestPath } from '../../api/modules/graph/graph.memory.js';
import { nodeId, project, uuidV5, type SourceRows } from '../../api/modules/graph/graph.model.js';
import { SOURCES } from '../../api/modules/graph/graph.repository.js';
import type { GraphEdgeOut, GraphNodeOut } from '../../api/modules/graph/graph.schemas.js';

/** The graph's pure parts: what the projection reads and writes, ids, CSV, and the in-memory traversals. */

const ORG = '00000000-0000-4000-8000-000000000001';
const uuid = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
const T = '2026-01-01T00:00:00.000Z';

function registry(over: Partial<SourceRows> = {}): SourceRows {
  return {
    agents: [
      {
        id: uuid(1), name: 'A', slug: 'a', environment: 'production', status: 'active', criticality: 'low', data_classification: 'internal',
        internet_exposure: 'none', code_execution: 'none', persistent_memory: 'none', human_approval_coverage: 'strong', gateway_enforced: true, risk_band: null, source: 'manual',
      },
    ],
    agent_owners: [],
    agent_versions: [],
    workload_identities: [],
    agent_external_identities: [],
    delegations: [],
    permission_bindings: [],
    mcp_servers: [],
    models: [],
    resources: [
      { id: uuid(10), resource_type: 'data', name: 'D', system: 's', base_url: null, auth_type: null, criticality: null, kind: 'database', classification: 'restricted', contains_personal_data: false, region: null },
      { id: uuid(11), resource_type: 'api', name: 'API', system: 's', base_url: 'https://x', auth_type: 'api_key', criticality: 'critical', kind: null, classification: null, contains_personal_data: null, region: null },
    ],
    credential_refs: [],
    tools: [
      {
        id: uuid(20), tool_key: 't', name: 'T', mcp_server_id: null, api_resource_id: null, data_resource_id: null, privilege_class: 'read', approval_class: 'none',
        credential_ref_id: null, blocked: false, builtin: false, definition_hash: 'h2',
      },
    ],
    ...over,
  };
}

const binding = (i: number, target_kind: string, target_id: string, actions: string[], extra: Partial<SourceRows['permission_bindings'][number]> = {}) => ({
  id: uuid(i), agent_id: uuid(1), target_kind, target_id, actions, delegated: false, expires_at: null, identity_id: null, pinned_definition_hash: null, ...extra,
});

describe('the projection', () => {
  it('reads only columns whose changes raise the graph version (migration 0011 watches them)', () => {
    for (const s of Object.values(SOURCES)) {
      const watched = GRAPH_SOURCE_COLUMNS[s.table];
      expect(watched, s.table).toBeDefined();
      for (const c of [...s.columns, ...(s.alsoReads ?? [])].filter((c) => c !== 'id')) expect(watched, `${s.table}.${c}`).toContain(c);
    }
  });

  it('derives name-based UUIDs (version 5, RFC 9562 test vector) and stable node ids', () => {
    const dns = Buffer.from('6ba7b8109dad11d180b400c04fd430c8', 'hex');
    expect(uuidV5('www.example.com', dns)).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
    expect(nodeId(ORG, 'agent', uuid(1))).toBe(nodeId(ORG, 'agent', uuid(1)));
    expect(nodeId(ORG, 'agent', uuid(1))).not.toBe(nodeId(uuid(2), 'agent', uuid(1)));
    expect(nodeId(ORG, 'agent', uuid(1))).not.toBe(nodeId(ORG, 'tool', uuid(1)));
  });

  it('maps binding actions to reads and writes, and marks a binding pinned to a changed tool definition', () => {
    const p = project(ORG, registry({
      permission_bindings: [
        binding(30, 'data_resource', uuid(10), ['read', 'update']),
        binding(31, 'api_resource', uuid(11), ['invoke']),
        binding(32, 'tool', uuid(20), ['invoke'], { pinned_definition_hash: 'h1' }),
        binding(33, 'tool', uuid(99), ['invoke']),
      ],
    }));
    const kinds = (source: number) => p.edges.filter((e) => e.source_id === uuid(source)).map((e) => e.kind).sort();
    expect(kinds(30)).toEqual(['reads_resource', 'writes_resource']);
    expect(kinds(31)).toEqual(['writes_resource']);
    expect(p.edges.find((e) => e.source_id === uuid(32))!.attributes.definition_changed).toBe(true);
    // A binding to a record that is not in the registry projects nothing.
    expect(kinds(33)).toEqual([]);
    expect(p.nodes.find((x) => x.key === uuid(10))!.risk_level).toBe('critical');
    expect(p.nodes.find((x) => x.key === uuid(11))!.risk_level).toBe('critical');
    expect(p.nodes.find((x) => x.kind === 'agent')!.risk_level).toBe('low');
  });

  it('derives risk levels of principals, credentials and identities', () => {
    const p = project(ORG, registry({
      delegations: [
        { id: uuid(40), agent_id: uuid(1), principal_ref: 'g:ops', display_name: 'Ops', principal_type: 'group', scopes: ['read'], expires_at: null, created_at: T },
        { id: uuid(41), agent_id: uuid(1), principal_ref: 'u:root', display_name: 'Root', principal_type: 'user', scopes: ['*'], expires_at: null, created_at: T },
      ],
      credential_refs: [
        { id: uuid(50), name: 'c1', provider: 'vault', credential_type: 'api_key', scope: '', shared: true, rotation_interval_days: null, status: 'active' },
        { id: uuid(51), name: 'c2', provider: 'vault', credential_type: 'api_key', scope: '', shared: true, rotation_interval_days: null, status: 'revoked' },
      ],
      agent_external_identities: [{ id: uuid(60), agent_id: uuid(1), identity_type: 'sp', subject: 's', issuer: null, authentication_strength: 'weak' }],
    }));
    const level = (key: string) => p.nodes.find((x) => x.key === key)!.risk_level;
    expect([level('g:ops'), level('u:root'), level(uuid(50)), level(uuid(51)), level(uuid(60))]).toEqual(['medium', 'high', 'high', 'low', 'high']);
  });

  it('is deterministic: the same registry gives the same rows; a change changes only what it touches', () => {
    const a = project(ORG, registry());
    const b = project(ORG, registry());
    expect(b).toEqual(a);
    const changed = registry();
    changed.resources[0]!.classification = 'public';
    const c = project(ORG, changed);
    const differs = c.nodes.filter((x) => a.nodes.find((y) => y.id === x.id)!.digest !== x.digest).map((x) => x.key);
    expect(differs).toEqual([uuid(10)]);
  });
});

describe('CSV', () => {
  it.each([
    ['=1+1', "'=1+1"],
    ['+1', "'+1"],
    ['-1', "'-1"],
    ['@SUM(A1)', "'@SUM(A1)"],
    ['\tx', "'\tx"],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['=a,b', `"'=a,b"`],
    ['line\nbreak', '"line\nbreak"'],
    [null, ''],
    [{ a: 1, b: 'x' }, '"{""a"":1,""b"":""x""}"'],
    [true, 'true'],
  ])('writes %j as %j', (value, cell) => expect(csvCell(value)).toBe(cell));

  it('starts with a byte-order mark and a header row, and ends lines with CRLF', () => {
    expect(toCsv(['a', 'b'], [[1, '-x']])).toBe("\uFEFFa,b\r\n1,'-x\r\n");
  });
});

describe('the in-memory graph', () => {
  const node = (id: string, kind: GraphNodeOut['kind'], attributes: Record<string, unknown> = {}): GraphNodeOut => ({
    id, kind, key: id, label: id, risk_level: 'low', source_record: { table: 't', id }, attributes, valid_from: T, valid_to: null,
  });
  const edge = (id: string, kind: GraphEdgeOut['kind'], from: string, to: string, expires_at: string | null = null): GraphEdgeOut => ({
    id, kind, from, to, source_record: { table: 't', id }, attributes: {}, expires_at, valid_from: T, valid_to: null,
  });
  const meta = { at: null, version: '1', projectionId: 'p' };
  const nodes = [node('a', 'agent'), node('b', 'agent'), node('t', 'tool'), node('s', 'mcp_server'), node('d', 'data_resource', { classification: 'personal' }), node('c', 'credential_ref')];
  const edges = [
    edge('e1', 'uses_tool', 'a', 't'),
    edge('e2', 'hosted_on', 't', 's'),
    edge('e3', 'reads_resource', 't', 'd'),
    edge('e4', 'uses_tool', 'b', 't', '2026-06-01T00:00:00.000Z'),
    edge('e5', 'uses_credential', 't', 'c'),
  ];

  it('leaves out edges that expired by the time asked for, and knows when the next one expires', () => {
    const before = new GraphView(meta, nodes, edges, new Date('2026-05-01T00:00:00Z'));
    expect(before.graph.size).toBe(5);
    expect(before.nextExpiry).toBe(Date.parse('2026-06-01T00:00:00.000Z'));
    const after = new GraphView(meta, nodes, edges, new Date('2026-07-01T00:00:00Z'));
    expect(after.graph.size).toBe(4);
    expect(after.nextExpiry).toBe(Number.POSITIVE_INFINITY);
  });

  const view = new GraphView(meta, nodes, edges, new Date('2026-05-01T00:00:00Z'));

  it('finds paths in the direction of the edges or either way', () => {
    expect(shortestPath(view, 'a', 'd', true)).toEqual(['a', 't', 'd']);
    expect(shortestPath(view, 'd', 'a', true)).toBeNull();
    expect(shortestPath(view, 'd', 'a', false)).toEqual(['d', 't', 'a']);
    expect(shortestPath(view, 'a', 'b', false)).toEqual(['a', 't', 'b']);
  });

  it('answers the nearest neighbours first and says when it stopped at the limit', () => {
    const all = neighbours(view, 'a', 2);
    // By depth, then kind and label.
    expect(all.nodes.map((x) => [x.id, x.depth])).toEqual([['a', 0], ['t', 1], ['b', 2], ['s', 2], ['d', 2], ['c', 2]]);
    expect(all.truncated).toBe(false);
    const few = neighbours(view, 'a', 2, 3);
    expect(few.nodes.map((x) => x.id).slice(0, 2)).toEqual(['a', 't']);
    expect(few.nodes).toHaveLength(3);
    expect(few.truncated).toBe(true);
  });

  it('follows access in the direction of authority only', () => {
    const a = access(view, 'a');
    expect(a.reachable.map((r) => r.id).sort()).toEqual(['c', 'd', 's', 't']);
    expect(a.most_sensitive_classification).toBe('personal');
    expect(access(view, 'd').total).toBe(0);
  });

  it('spreads compromise by rule: a tool steers its agents, a credential only reaches', () => {
    const fromTool = blastRadius(view, 't');
    expect(Object.fromEntries(fromTool.affected.map((r) => [r.id, r.impact]))).toEqual({ a: 'control', b: 'control', d: 'reach', c: 'control' });
    expect(fromTool.controlled_agents).toBe(2);
    const fromCredential = blastRadius(view, 'c');
    expect(Object.fromEntries(fromCredential.affected.map((r) => [r.id, r.impact]))).toEqual({ t: 'reach', d: 'reach' });
  });
});
