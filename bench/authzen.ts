import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { freePort } from '../test/support/postgres-cluster.js';
import { record } from './results.js';
import { adminSession, benchDatabase, cpuOf } from './support.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';

/** What one agent sends: its token and its id (an AuthZEN subject must be the token's agent). */
interface Agent {
  token: string;
  id: string;
}

/** Evaluations in each request of the batch load. */
const BATCH = 10;

/**
 * bench/authzen: the AuthZEN evaluation endpoints and the MCP ext_authz check (docs/integrations.md)
 * through `tollgate api` as built, on a durable PostgreSQL, N concurrent agents of one organisation
 * bound to the read-only sample tool: single evaluations, batches of ten (execute_all), and ext_authz
 * checks of one `tools/call` each; beside them `POST /actions` of the same call on the same run, since
 * every evaluation is such a decision. No issue sets a target for these: recorded without one.
 */
export async function benchAuthzen(opts: { seconds: number; connections: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  try {
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      DATABASE_POOL_MAX: String(Math.max(10, opts.connections)),
      LOG_LEVEL: 'warn',
      RATE_LIMIT_GATEWAY_PER_MINUTE: '1000000',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
      RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
      RATE_LIMIT_SIGNIN_PER_MINUTE: '1000000',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const agents = await boundAgents(base, cluster.adminUrl('tollgate'), opts.connections);

    const lookup = (agent: Agent, n: number) => ({
      subject: { type: 'agent', id: agent.id },
      action: { name: 'invoke', properties: { parameters: { customer_id: String(n % 1000) } } },
      resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/42' } },
    });
    const loads: Array<{ name: string; route: string; perRequest: number; body: (agent: Agent, n: number) => unknown; headers?: (n: number) => Record<string, string> }> = [
      {
        name: 'POST /actions (the same call, for comparison)',
        route: '/api/v1/actions',
        perRequest: 1,
        body: (_a, n) => ({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: String(n % 1000) } }),
        headers: (n) => ({ 'idempotency-key': `bench-${n}-${randomUUID()}` }),
      },
      { name: 'AuthZEN single evaluation', route: '/api/v1/access/v1/evaluation', perRequest: 1, body: lookup },
      {
        name: `AuthZEN batch of ${BATCH} evaluations`,
        route: '/api/v1/access/v1/evaluations',
        perRequest: BATCH,
        body: (agent, n) => ({ ...lookup(agent, n), evaluations: Array.from({ length: BATCH }, () => ({})) }),
      },
      {
        name: 'MCP ext_authz check, one tools/call',
        route: '/api/v1/access/v1/ext-authz/mcp/crm/mcp',
        perRequest: 1,
        body: (_a, n) => ({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'lookup_customer', arguments: { customer_id: String(n % 1000) } } }),
        headers: () => ({ 'mcp-session-id': 'bench-session', 'x-envoy-auth-partial-body': 'false' }),
      },
    ];

    // Each load must measure allowed decisions: an AuthZEN denial is a 200 too, so the first answer is read.
    for (const l of loads) {
      const agent = agents[0]!;
      const res = await fetch(base + l.route, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${agent.token}`, ...(l.headers?.(0) ?? {}) },
        body: JSON.stringify(l.body(agent, 0)),
      });
      const text = await res.text();
      const answers = JSON.parse(text) as { decision?: unknown; evaluations?: Array<{ decision: unknown }> };
      const allowed = res.status === 200 && (answers.evaluations ? answers.evaluations.every((e) => e.decision === true) : answers.decision !== false);
      if (!allowed) throw new Error(`authzen: ${l.name} did not allow: ${res.status} ${text.slice(0, 300)}`);
    }

    const results = [];
    for (const l of loads) {
      const cpuBefore = cpuOf([api.pid!]);
      const r = await load(base + l.route, agents, opts, l.body, l.headers);
      const cpuMs = cpuOf([api.pid!]) - cpuBefore;
      const decisions = r.requests.average * l.perRequest;
      results.push({
        load: `${opts.connections} agents, ${l.name}`,
        requests_per_second: Math.round(r.requests.average),
        decisions_per_second: Math.round(decisions),
        p50_ms: r.latency.p50,
        p99_ms: r.latency.p99,
        api_cpu_us_per_decision: Math.round((cpuMs * 1000) / (r.requests.total * l.perRequest)),
      });
    }
    const [actions, single, batch, extAuthz] = results;
    const agentsLabel = `${opts.connections} agents`;
    record('authzen', `POST /actions, ${agentsLabel} (same run)`, actions!.decisions_per_second, 'decisions/s');
    record('authzen', `single evaluation, ${agentsLabel}`, single!.decisions_per_second, 'evaluations/s');
    record('authzen', 'single evaluation, p50', single!.p50_ms, 'ms');
    record('authzen', 'single evaluation, p99', single!.p99_ms, 'ms');
    record('authzen', `batches of ${BATCH}, ${agentsLabel}`, batch!.decisions_per_second, 'evaluations/s');
    record('authzen', `batches of ${BATCH}, p99 per batch`, batch!.p99_ms, 'ms');
    record('authzen', `MCP ext_authz check, ${agentsLabel}`, extAuthz!.decisions_per_second, 'checks/s');
    record('authzen', 'MCP ext_authz check, p99', extAuthz!.p99_ms, 'ms');
    return results;
  } finally {
    await stop(api);
    cluster.stop();
  }
}

/** One organisation's agents, each bound to the read-only sample tool, with a fresh token and its id. */
async function boundAgents(base: string, adminUrl: string, count: number): Promise<Agent[]> {
  const { call } = await adminSession(base, adminUrl, 'Bench AuthZEN');
  const tools = (await call('GET', '/tools')).items as Array<{ id: string; tool_key: string }>;
  const lookup = tools.find((t) => t.tool_key === 'crm.lookup_customer')!;
  const agents: Agent[] = [];
  for (let a = 0; a < count; a++) {
    const agent = await call('POST', '/agents', { name: `Bench AuthZEN agent ${a}` });
    await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
    const identity = await call('POST', `/agents/${agent.id}/identities`);
    const res = await fetch(`${base}/api/v1/identities/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
    });
    agents.push({ token: ((await res.json()) as { access_token: string }).access_token, id: agent.id });
  }
  return agents;
}

/** Every connection an agent of its own; a request that is not a 200 (a denial, a refusal) fails the load. */
function load(
  url: string,
  agents: Agent[],
  opts: { seconds: number; connections: number },
  body: (agent: Agent, n: number) => unknown,
  headers: (n: number) => Record<string, string> = () => ({}),
) {
  let n = 0;
  return autocannon({
    url,
    connections: opts.connections,
    duration: opts.seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          const i = n++;
          const agent = agents[i % agents.length]!;
          return {
            ...req,
            body: JSON.stringify(body(agent, i)),
            headers: { 'content-type': 'application/json', authorization: `Bearer ${agent.token}`, ...headers(i) },
          };
        },
      },
    ],
  }).then((r) => {
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`authzen ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return r;
  });
}
