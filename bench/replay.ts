import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { compileRules, type Rule } from '../api/modules/gateway/index.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { inputs, policyRules } from './policy.js';
import { atMost, record } from './results.js';
import { adminSession, benchDatabase, cpuOf, postgresCpuOf } from './support.js';

/**
 * bench/replay: policy replay (POST /policies/{id}/versions/{n}/replay, docs/policies.md, Replay) of 100,000
 * recorded first decisions of one organisation, through `tollgate api` as built, on a durable PostgreSQL.
 *
 * The decisions are seeded in SQL (through the gateway they would take longer than the benchmark): eight agents
 * bound to the four sample tools; the requests of bench/policy's mix, their parameters as the gateway stores them
 * (email addresses masked, as the default retention does, so the decisions whose rules read them count as
 * inexact); nine in ten with the facts a decision records (the agent, a session with its facts), one in ten
 * without (decided before migration 0021); over the last seven days. The policy is bench/policy's workload in one policy: 200 rules, 30% of their
 * conditions CEL, published; the replayed version turns a tenth of them, drops eight and adds four (two of them flow
 * rules on session facts). Every seeded decision is recorded as allowed, so `drift` counts those the rules in force
 * do not allow (the workload allows none of its mix: its rules are written to hold for some request). Each run is
 * timed over HTTP, from the request to the answer. Target (issue 21): ≤ 10 s.
 */
const TARGET_SECONDS = 10;

/** A rule as written, from the compiled workload. */
const written = (r: Rule): Rule => ({
  id: r.id,
  effect: r.effect,
  reason_code: r.reason_code,
  conditions: r.conditions.map((c) => (c.field ? { field: c.field, op: c.op, ...(c.value !== undefined ? { value: c.value } : {}) } : { op: c.op, value: c.value })),
  ...(r.obligations ? { obligations: r.obligations } : {}),
});

/** The draft: every tenth rule's effect turned, every twenty-fifth dropped, and four new rules in their place. */
function draftOf(published: Rule[]): Rule[] {
  const turned: Record<Rule['effect'], Rule['effect']> = { allow: 'deny', deny: 'require_approval', require_approval: 'allow' };
  const kept = published
    .filter((_, i) => i % 25 !== 1)
    .map((r, i) => {
      if (i % 10 !== 0) return r;
      const effect = turned[r.effect];
      const { obligations: _o, ...rest } = r;
      return { ...rest, effect, ...(effect === 'require_approval' ? { obligations: { approvals_required: 1 } } : {}) };
    });
  return [
    ...kept,
    { id: 'freeze-mail', effect: 'deny', reason_code: 'MAIL_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'email.send_message' }] },
    { id: 'review-big-lookups', effect: 'require_approval', reason_code: 'LOOKUP_REVIEW', conditions: [{ field: 'action.parameters.limit', op: 'gt', value: 10 }] },
    { id: 'session-budget', effect: 'deny', reason_code: 'SESSION_BUDGET', conditions: [{ field: 'session.calls', op: 'gte', value: 45 }] },
    { id: 'untrusted-then-write', effect: 'require_approval', reason_code: 'AFTER_UNTRUSTED', conditions: [{ op: 'cel', value: 'session.untrusted_content == true && tool.privilege_class != "read"' }] },
  ].slice(0, 200) as Rule[];
}

export async function benchReplay(opts: { decisions: number; runs: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  const adminUrl = cluster.adminUrl('tollgate');
  try {
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], { PORT: String(port), DATABASE_URL: runtimeUrl, DATABASE_POOL_MAX: '10', LOG_LEVEL: 'warn', RATE_LIMIT_PERSON_PER_MINUTE: '1000000' });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call, tenant } = await adminSession(base, adminUrl, 'Replay bench');

    const tools = ((await call('GET', '/tools?limit=100')).items as Array<{ id: string; tool_key: string }>).filter((t) =>
      ['crm.lookup_customer', 'email.send_message', 'payments.create_payment', 'storage.delete_object'].includes(t.tool_key),
    );
    const agents: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 8; i++) {
      const environment = i % 2 ? 'development' : 'staging';
      const criticality = ['low', 'medium', 'high', 'critical'][i % 4]!;
      const agent = await call('POST', '/agents', { name: `Replay agent ${i}`, environment, criticality });
      for (const t of tools) await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: t.id, actions: ['invoke'] });
      agents.push({ id: agent.id, status: 'active', gatewayAccess: true, environment: agent.environment, criticality: agent.criticality, dataClassification: agent.data_classification });
    }

    const published = policyRules().rules.map(written);
    const policy = await call('POST', '/policies', { key: 'bench-replay', name: 'Replay workload', rules: published });
    const draft = draftOf(published);
    // Checked here as POST .../versions would check it (the replay compiles it again).
    compileRules(draft);
    const db = new pg.Client({ connectionString: adminUrl });
    await db.connect();
    try {
      // Four eyes would need a second person and If-Match: the draft and the publication are written in SQL.
      await db.query(`update policy_versions set published_at = now() where policy_id = $1 and number = 1`, [policy.id]);
      await db.query(
        `insert into policy_versions (id, org_id, policy_id, number, rules, change_note, author_id, created_at, published_at, published_by)
         values (gen_random_uuid(), $1, $2, 2, $3, 'A tenth of the rules changed', null, now(), null, null)`,
        [tenant.id, policy.id, JSON.stringify(draft)],
      );
      await db.query(`update policies set published_version = 1, latest_version = 2, version = version + 2 where id = $1`, [policy.id]);
      await seed(db, tenant.id, agents, opts.decisions);
    } finally {
      await db.end();
    }

    const from = new Date(Date.now() - 8 * 24 * 3600 * 1000).toISOString();
    const runs: Array<{ seconds: number; apiCpu: number; pgCpu: number; result: Record<string, unknown> }> = [];
    for (let i = 0; i < opts.runs; i++) {
      const apiCpu = cpuOf([api.pid!]);
      const pgCpu = postgresCpuOf(cluster.dataDir);
      const started = performance.now();
      const result = await call('POST', `/policies/${policy.id}/versions/2/replay`, { from });
      runs.push({ seconds: (performance.now() - started) / 1000, apiCpu: (cpuOf([api.pid!]) - apiCpu) / 1000, pgCpu: (postgresCpuOf(cluster.dataDir) - pgCpu) / 1000, result });
    }
    const r = (n: number) => Number(n.toFixed(2));
    const seconds = runs.map((x) => x.seconds).sort((a, b) => a - b);
    const median = seconds[Math.floor(seconds.length / 2)]!;
    console.log(`replay: load average ${loadavg().map((l) => l.toFixed(1)).join(' / ')} (1, 5, 15 min) on ${cpus().length} cores at the end of the run`);
    record('replay', `replay ${Math.round(opts.decisions / 1000)}k`, r(median), 's', atMost(TARGET_SECONDS));
    record('replay', `replay ${Math.round(opts.decisions / 1000)}k, best of ${opts.runs}`, r(seconds[0]!), 's');
    return runs.map((x, i) => ({
      run: i + 1,
      seconds: r(x.seconds),
      decisions_per_second: Math.round(Number(x.result.replayed) / x.seconds),
      api_cpu_s: r(x.apiCpu),
      postgres_cpu_s: r(x.pgCpu),
      replayed: x.result.replayed,
      changed: x.result.changed,
      reason_codes_changed: x.result.reason_codes_changed,
      drift: x.result.drift,
      inexact: x.result.inexact,
      without_facts: x.result.without_facts,
      target: `<= ${TARGET_SECONDS} s`,
      met: x.seconds <= TARGET_SECONDS,
    }));
  } finally {
    await stop(api);
    cluster.stop();
  }
}

const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

/** Parameters as the gateway stores them under the default retention, redacted_excerpts: email addresses masked. */
function redactedExcerpts(v: unknown): unknown {
  if (typeof v === 'string') return v.replace(EMAIL, '[redacted:email]');
  if (Array.isArray(v)) return v.map(redactedExcerpts);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactedExcerpts(x)]));
  return v;
}

/**
 * `n` recorded first decisions over the last seven days, as the superuser with triggers off (session_replication_role
 * replica: the risk triggers would queue work for each). The requests are bench/policy's mix; nine in ten carry
 * their decision's facts, a session of up to 50 calls each.
 */
async function seed(db: pg.Client, orgId: string, agents: Array<Record<string, unknown>>, n: number): Promise<void> {
  const requests = inputs(false)
    .slice(0, 8)
    .map(({ action }) => ({
      tool: action.tool,
      operation: action.operation,
      target: action.target,
      parameters: redactedExcerpts(action.parameters),
      environment: action.environment ?? null,
      on_behalf_of: action.onBehalfOf ?? null,
      justification: action.justification ?? null,
    }));
  await db.query('begin');
  await db.query('set local session_replication_role = replica');
  await db.query(
    `insert into action_requests (id, org_id, agent_id, identity_id, source, idempotency_key, request_hash, tool, operation, target,
       parameters, environment, on_behalf_of, justification, state, decision, reason_codes, trace, approvals_required,
       execution_status, output_redacted, requested_by, correlation_id, created_at, updated_at, executed_at, decision_ms, decision_facts)
     select gen_random_uuid(), $1, (a ->> 'id')::uuid, null, 'gateway', 'bench-' || i, md5(i::text), r ->> 'tool', r ->> 'operation', r ->> 'target',
       r -> 'parameters', r ->> 'environment', r ->> 'on_behalf_of', r ->> 'justification', 'approved', 'allow', array['PERMISSION_GRANTED'], '[]'::jsonb, 0,
       'not_run', null, null, 'sdk-bench-' || i, at, at, null, 1.5,
       case when i % 10 = 0 then null else jsonb_build_object('v', 1, 'agent', a, 'session',
         case when i % 5 = 0 then null else jsonb_build_object('id', 'token:bench-' || (i / 50), 'facts', jsonb_build_object(
           'maxClassification', (array[null, 'internal', 'confidential', 'regulated'])[1 + i % 4],
           'untrustedContent', i % 3 = 0,
           'tools', jsonb_build_object('crm.lookup_customer', i % 7, 'email.send_message', i % 3),
           'calls', i % 50)) end) end
     from generate_series(1, $4::int) i,
       lateral (select $2::jsonb -> (i % jsonb_array_length($2::jsonb)) as r, $3::jsonb -> (i % jsonb_array_length($3::jsonb)) as a) x,
       lateral (select now() - interval '7 days' + (i::float8 / $4::int) * interval '7 days' as at) t`,
    [orgId, JSON.stringify(requests), JSON.stringify(agents), n],
  );
  await db.query('commit');
  await db.query('analyze action_requests');
}
