import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { nodeId } from '../api/modules/graph/index.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { atMost, record } from './results.js';
import { adminSession, benchDatabase, percentiles } from './support.js';

/**
 * bench/graph: the Agent Security Graph on the organisation, seeded in SQL: 10,000 agents, 2,000 tools on 50
 * MCP servers, 600 resources, 200 credential references, 20 models, owners, identities, delegations, and permission
 * bindings enough for about 100,000 edges; `tollgate api` as its own process on a durable PostgreSQL, driven over
 * loopback one request at a time.
 *
 * Prints the rebuild (the first projection, from nothing; then one that finds nothing to change), the first read
 * (loading the in-memory graph), a read after one registry change (re-projection and reload), and p50/p99 of each
 * traversal beside the targets: neighbours (depth 2), path, access and blast-radius p99 ≤ 50 ms,
 * high-risk-paths ≤ 500 ms, rebuild ≤ 10 s.
 */
export async function benchGraph(opts: { requests: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  try {
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      DATABASE_POOL_MAX: '10',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
      ...(process.env.BENCH_GRAPH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_GRAPH_NODE_OPTIONS } : {}),
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call, tenant } = await adminSession(base, cluster.adminUrl('tollgate'), 'Graph bench');
    const seeded = await seed(cluster.adminUrl('tollgate'), tenant.id);

    const timed = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
      const started = performance.now();
      const out = await fn();
      return [out, performance.now() - started];
    };
    const [first, firstMs] = await timed(() => call('POST', '/graph/rebuild'));
    const [again, againMs] = await timed(() => call('POST', '/graph/rebuild'));
    const [, loadMs] = await timed(() => call('GET', `/graph/nodes/${seeded.agents[0]}`));

    const pick = <T>(xs: T[], i: number) => xs[(i * 7919) % xs.length]!;
    const measure = async (name: string, url: (i: number) => string, requests = opts.requests) => {
      for (let i = 0; i < 10; i++) await call('GET', url(i + 100_000));
      const ms: number[] = [];
      for (let i = 0; i < requests; i++) {
        const started = performance.now();
        await call('GET', url(i));
        ms.push(performance.now() - started);
      }
      return { name, ...percentiles(ms) };
    };
    const blastStarts = [...seeded.agents.slice(0, 50), ...seeded.tools.slice(0, 50), ...seeded.servers, ...seeded.credentials.slice(0, 50)];
    const traversals = [
      await measure('neighbours, depth 2, of an agent', (i) => `/graph/nodes/${pick(seeded.agents, i)}/neighbours?depth=2`),
      await measure('neighbours, depth 2, of a tool', (i) => `/graph/nodes/${pick(seeded.tools, i)}/neighbours?depth=2`),
      await measure('path, agent to data resource, undirected', (i) => `/graph/path?source=${pick(seeded.agents, i)}&target=${pick(seeded.data, i)}`),
      await measure('path, agent to data resource, directed', (i) => `/graph/path?source=${pick(seeded.agents, i)}&target=${pick(seeded.data, i)}&directed=true`),
      await measure('access of an agent', (i) => `/graph/nodes/${pick(seeded.agents, i)}/access`),
      await measure('blast-radius (agents, tools, servers, credentials)', (i) => `/graph/nodes/${pick(blastStarts, i)}/blast-radius`),
    ];
    const risky = await measure('high-risk-paths', () => '/graph/high-risk-paths', 20);

    // One change in the registry: the next read re-projects (diff) and reloads the in-memory graph.
    const admin = new pg.Client({ connectionString: cluster.adminUrl('tollgate') });
    await admin.connect();
    await admin.query(`update mcp_servers set trust_state = 'quarantined' where org_id = $1 and name = 'srv-1'`, [tenant.id]);
    await admin.end();
    const [, changedMs] = await timed(() => call('GET', `/graph/nodes/${seeded.agents[0]}`));
    const [, patternsMs] = await timed(() => call('GET', '/graph/high-risk-paths'));

    const r = (n: number) => Number(n.toFixed(1));
    const target = (ms: number) => ({ target: `p99 <= ${ms} ms` });
    record('graph', 'rebuild from nothing', r(firstMs), 'ms', atMost(10_000));
    for (const t of traversals) record('graph', `${t.name}, p99`, r(t.p99), 'ms', atMost(50));
    record('graph', `${risky.name}, p99`, r(risky.p99), 'ms', atMost(500));
    return [
      { measure: `rebuild from nothing (${first.nodes} nodes, ${first.edges} edges)`, p50_ms: r(firstMs), p99_ms: '', target: '<= 10000 ms', met: firstMs <= 10_000 },
      { measure: `rebuild again (${Object.values(again.changes as Record<string, number>).reduce((a, b) => a + b, 0)} changes)`, p50_ms: r(againMs), p99_ms: '', target: '<= 10000 ms', met: againMs <= 10_000 },
      { measure: 'first read: load the in-memory graph', p50_ms: r(loadMs), p99_ms: '', target: '', met: '' },
      { measure: 'first read after one registry change (re-project, reload)', p50_ms: r(changedMs), p99_ms: '', target: '', met: '' },
      ...traversals.map((t) => ({ measure: t.name, p50_ms: r(t.p50), p99_ms: r(t.p99), ...target(50), met: t.p99 <= 50 })),
      { measure: `${risky.name} (worked out once per projection)`, p50_ms: r(risky.p50), p99_ms: r(risky.p99), ...target(500), met: risky.p99 <= 500 },
      { measure: 'high-risk-paths, first read of a new projection (worked out)', p50_ms: r(patternsMs), p99_ms: '', target: '<= 500 ms', met: patternsMs <= 500 },
    ];
  } finally {
    await stop(api);
    cluster.stop();
  }
}


/**
 * The organisation in SQL, as the superuser with triggers off (session_replication_role replica): through the API it
 * would take longer than the benchmark. Choices are spread by the row number, so every run seeds the same shape.
 * About 15,000 nodes and 100,000 edges: 69,000 bindings (tools, a few MCP servers and data resources), 10,000
 * owners, 10,000 models run, 5,000 identities, 3,000 delegations and the tools' own links.
 */
export async function seed(adminUrl: string, orgId: string) {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  const q = (text: string) => c.query(text, [orgId]);
  try {
    await c.query('begin');
    await c.query('set local session_replication_role = replica');
    await q(`insert into mcp_servers (id, org_id, name, endpoint, transport, auth_type, trust_state)
             select gen_random_uuid(), $1, 'srv-' || i, 'https://srv-' || i || '.example.com/mcp', 'streamable_http', 'oauth',
                    (array['approved', 'approved', 'approved', 'unknown', 'unsigned', 'quarantined'])[1 + i % 6]
             from generate_series(1, 50) i`);
    await q(`insert into resources (id, org_id, resource_type, name, system, classification, contains_personal_data)
             select gen_random_uuid(), $1, 'data', 'data-' || i, 'sys',
                    (array['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'])[1 + i % 6], i % 5 = 0
             from generate_series(1, 500) i`);
    await q(`insert into resources (id, org_id, resource_type, name, system, base_url, auth_type, criticality)
             select gen_random_uuid(), $1, 'api', 'api-' || i, 'sys', 'https://api-' || i || '.example.com', 'api_key',
                    (array['low', 'medium', 'high', 'critical'])[1 + i % 4]
             from generate_series(1, 100) i`);
    await q(`insert into credential_refs (id, org_id, name, provider, secret_path, credential_type, shared, rotation_interval_days)
             select gen_random_uuid(), $1, 'cred-' || i, 'vault', 'kv/cred-' || i, 'api_key', i % 4 = 0, case when i % 3 = 0 then null else 30 end
             from generate_series(1, 200) i`);
    await q(`insert into models (id, org_id, provider, model_name, hosting, data_policy, approved, max_data_classification)
             select gen_random_uuid(), $1, 'vendor', 'model-' || i, 'saas', 'no_training', i % 3 <> 0, case when i % 2 = 0 then 'confidential' end
             from generate_series(1, 20) i`);
    await q(`with s as (select array_agg(id order by name) ids from mcp_servers where org_id = $1),
                  d as (select array_agg(id order by name) ids from resources where org_id = $1 and resource_type = 'data'),
                  a as (select array_agg(id order by name) ids from resources where org_id = $1 and resource_type = 'api'),
                  k as (select array_agg(id order by name) ids from credential_refs where org_id = $1)
             insert into tools (id, org_id, tool_key, name, privilege_class, approval_class, mcp_server_id, data_resource_id, api_resource_id, credential_ref_id)
             select gen_random_uuid(), $1, 'bench.tool_' || i, 'Tool ' || i,
                    (array['read', 'read', 'read', 'write', 'write', 'destructive', 'financial', 'admin'])[1 + i % 8],
                    (array['none', 'none', 'single'])[1 + i % 3],
                    case when i % 5 <> 0 then s.ids[1 + i % 50] end,
                    case when i % 2 = 0 then d.ids[1 + (i * 7) % 500] end,
                    case when i % 7 = 0 then a.ids[1 + i % 100] end,
                    case when i % 3 = 0 then k.ids[1 + i % 200] end
             from generate_series(1, 2000) i, s, d, a, k`);
    await q(`insert into agents (id, org_id, slug, name, environment, criticality, internet_exposure, code_execution, human_approval_coverage, risk_band)
             select gen_random_uuid(), $1, 'agent-' || i, 'Agent ' || i,
                    (array['production', 'staging', 'development'])[1 + i % 3],
                    (array['low', 'medium', 'high', 'critical'])[1 + i % 4],
                    (array['none', 'none', 'controlled', 'public'])[1 + i % 4],
                    (array['none', 'sandboxed', 'privileged'])[1 + i % 3],
                    (array['strong', 'partial', 'none'])[1 + i % 3],
                    case when i % 5 = 0 then null else (array['low', 'medium', 'high', 'critical'])[1 + i % 4] end
             from generate_series(1, 10000) i`);
    await q(`with t as (select array_agg(id order by tool_key) ids from tools where org_id = $1 and tool_key like 'bench.%'),
                  a as (select id, row_number() over (order by slug) i from agents where org_id = $1)
             insert into permission_bindings (id, org_id, agent_id, target_kind, target_id, actions)
             select gen_random_uuid(), $1, a.id, 'tool', t.ids[1 + ((a.i * 131 + k * 977) % 2000)], '{invoke}'
             from a, t, generate_series(1, 6) k`);
    await q(`with s as (select array_agg(id order by name) ids from mcp_servers where org_id = $1),
                  a as (select id, row_number() over (order by slug) i from agents where org_id = $1)
             insert into permission_bindings (id, org_id, agent_id, target_kind, target_id, actions)
             select gen_random_uuid(), $1, a.id, 'mcp_server', s.ids[1 + a.i % 50], '{invoke}' from a, s where a.i % 10 = 0`);
    await q(`with d as (select array_agg(id order by name) ids from resources where org_id = $1 and resource_type = 'data'),
                  a as (select id, row_number() over (order by slug) i from agents where org_id = $1)
             insert into permission_bindings (id, org_id, agent_id, target_kind, target_id, actions)
             select gen_random_uuid(), $1, a.id, 'data_resource', d.ids[1 + (a.i * 13 + k) % 500], (array['{read}', '{read,write}'])[1 + k % 2]::text[]
             from a, d, generate_series(1, 2) k where a.i % 2 = 0`);
    await q(`insert into agent_owners (id, org_id, agent_id, name, email, owner_type)
             select gen_random_uuid(), $1, a.id, 'Owner ' || (a.i % 500), 'owner-' || (a.i % 500) || '@example.com', 'accountable'
             from (select id, row_number() over (order by slug) i from agents where org_id = $1) a`);
    await q(`with m as (select array_agg(id order by model_name) ids from models where org_id = $1)
             insert into agent_versions (id, org_id, agent_id, version_label, model_id)
             select gen_random_uuid(), $1, a.id, 'v1', m.ids[1 + a.i % 20]
             from (select id, row_number() over (order by slug) i from agents where org_id = $1) a, m`);
    await q(`insert into workload_identities (id, org_id, agent_id, client_id, secret_hash)
             select gen_random_uuid(), $1, a.id, 'tgc_bench' || a.i, 'x'
             from (select id, row_number() over (order by slug) i from agents where org_id = $1) a where a.i % 2 = 0`);
    await q(`insert into delegations (id, org_id, agent_id, principal_ref, display_name, principal_type, scopes)
             select gen_random_uuid(), $1, a.id, 'user:' || (a.i % 300), 'User ' || (a.i % 300), 'user', '{records:read}'
             from (select id, row_number() over (order by slug) i from agents where org_id = $1) a where a.i % 10 < 3`);
    // The graph version the triggers would have raised.
    await q(`insert into graph_versions (org_id, version, changed_at) values ($1, 1, clock_timestamp())
             on conflict (org_id) do update set version = graph_versions.version + 1, changed_at = clock_timestamp()`);
    await c.query('commit');
    const ids = async (kind: 'agent' | 'tool' | 'mcp_server' | 'data_resource' | 'credential_ref', sql: string) =>
      (await c.query<{ id: string }>(sql, [orgId])).rows.map((r) => nodeId(orgId, kind, r.id));
    return {
      agents: await ids('agent', `select id from agents where org_id = $1 order by slug`),
      tools: await ids('tool', `select id from tools where org_id = $1 and tool_key like 'bench.%' order by tool_key`),
      servers: await ids('mcp_server', `select id from mcp_servers where org_id = $1 order by name`),
      data: await ids('data_resource', `select id from resources where org_id = $1 and resource_type = 'data' order by name`),
      credentials: await ids('credential_ref', `select id from credential_refs where org_id = $1 order by name`),
    };
  } finally {
    await c.end();
  }
}
