import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, setPlan } from '../support/harness.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { HttpSession, runSchemathesis, schemathesisBin, serverErrorCauses, type FuzzRun } from '../support/schemathesis.js';

/**
 * Schemathesis, an API fuzzer, against `tollgate api` on PostgreSQL, driven by the OpenAPI document the API
 * serves: boundary values and negative cases per parameter (coverage phase), then generated requests until the
 * time budget is spent (fuzzing), then sequences (stateful). Each answer must not be a 5xx, must have a status
 * and content type the document declares for the operation, and must match the declared schema. The report printed
 * on failure has a curl line for every failure; the API's own log says what broke behind each 500.
 *
 * Four runs, each with the caller its operations need: the gateway's two operations with an agent token (a
 * workload identity exchanged for one); every operation of people with a signed-in organisation administrator,
 * with existing records behind the path parameters so that requests reach past 404; and, each on a session of
 * its own, the operations that move or end the session they are called with (switching organisation,
 * onboarding another one, signing out), which would otherwise cut the main run short.
 */

/** The main run's budget in seconds; SCHEMATHESIS_SECONDS raises it for a longer hunt. */
const MAIN_SECONDS = Number(process.env.SCHEMATHESIS_SECONDS ?? 90);

/** No 5xx; every status, content type, declared header and body as the document declares them. */
const CHECKS = [
  'not_a_server_error',
  'status_code_conformance',
  'content_type_conformance',
  'response_headers_conformance',
  'response_schema_conformance',
].join(',');
const COMMON = [
  '--checks',
  CHECKS,
  // One worker: the machine has two cores and the API needs one of them.
  '--workers',
  '1',
  '--max-examples',
  '10',
  // The credentials are given; generated cookies or bearer tokens would only measure the 401 path.
  '--generation-with-security-parameters',
  'false',
  '--generation-database',
  'none',
];

const GATEWAY = ['POST /actions', 'GET /actions/gateway/{action_id}'];
const MOVES_SESSION = ['POST /auth/switch-tenant', 'POST /tenants/onboard'];
const ENDS_SESSION = ['POST /auth/logout', 'POST /auth/logout-all'];
const names = (flag: string, ops: string[]) => ops.flatMap((op) => [flag, op]);

describe('Schemathesis against tollgate api on PostgreSQL', () => {
  let bin: string;
  let api: ReturnType<typeof spawnTollgate>;
  let base: string;
  let drop: () => Promise<void>;
  let ownerUrl: string;
  const reports: string[] = [];

  beforeAll(async () => {
    bin = await schemathesisBin();
    const db = await freshDatabase();
    drop = db.drop;
    ownerUrl = db.ownerUrl;
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const unlimited = '1000000';
    api = spawnTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: db.runtimeUrl,
      LOG_LEVEL: 'warn',
      // The fuzzer sends thousands of requests a minute from one address and one person.
      RATE_LIMIT_PERSON_PER_MINUTE: unlimited,
      RATE_LIMIT_SIGNIN_PER_MINUTE: unlimited,
      RATE_LIMIT_PUBLIC_PER_MINUTE: unlimited,
      RATE_LIMIT_GATEWAY_PER_MINUTE: unlimited,
      RATE_LIMIT_TOKEN_PER_MINUTE: unlimited,
      RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: unlimited,
    });
    await waitForHttp(`${base}/readyz`, 60_000, api);
  }, 300_000);

  afterAll(async () => {
    await stop(api);
    await drop?.();
  });

  /** A person signed in with the development sign-in who creates an organisation on the enterprise plan (every module). */
  async function administrator(): Promise<{ session: HttpSession; tenantId: string; userId: string }> {
    const session = new HttpSession(base);
    const login = await session.expect(200, 'POST', '/auth/dev-login', { email: `fuzz-${randomBytes(4).toString('hex')}@example.com` });
    const onboard = await session.expect(201, 'POST', '/tenants/onboard', {
      name: 'Fuzz Org',
      slug: `fuzz-${randomBytes(4).toString('hex')}`,
      primary_region: 'eu-west',
      admin_display_name: 'Fuzz Admin',
    });
    await setPlan({ ownerUrl }, onboard.tenant.id, 'enterprise');
    return { session, tenantId: onboard.tenant.id, userId: login.user.id };
  }

  const asSession = (s: HttpSession) => ['-H', `Cookie: ${s.cookieHeader}`, '-H', `X-CSRF-Token: ${s.csrf}`];

  async function fuzz(run: FuzzRun): Promise<void> {
    const started = Date.now();
    const logged = api.output().length;
    const result = await runSchemathesis(bin, `${base}/api/v1/openapi.json`, run);
    const causes = serverErrorCauses(api.output().slice(logged));
    reports.push(`${run.name}: exit ${result.exitCode} in ${Math.round((Date.now() - started) / 1000)} s; ${oneLineSummary(result.output)}`);
    const report = [
      `Schemathesis, ${run.name}: exit code ${result.exitCode}`,
      result.output,
      causes.length > 0 ? `What the API logged behind its 500s:\n  ${causes.join('\n  ')}` : 'The API logged no 500.',
    ].join('\n\n');
    expect(result.exitCode, report).toBe(0);
  }

  it('gateway operations, with an agent token from a workload identity', async () => {
    const { session } = await administrator();
    const agent = await session.expect(201, 'POST', '/agents', { name: 'Fuzzed gateway agent' });
    const identity = await session.expect(201, 'POST', `/agents/${agent.id}/identities`);
    const token = await session.expect(200, 'POST', '/identities/token', {
      grant_type: 'client_credentials',
      client_id: identity.client_id,
      client_secret: identity.client_secret,
    });
    const gateway = new HttpSession(base);
    const headers = { authorization: `Bearer ${token.access_token}`, 'idempotency-key': `fuzz-${randomBytes(6).toString('hex')}` };
    const submitted = await gateway.expect(200, 'POST', '/actions', { tool: 'crm.lookup_customer', target: 'crm://customers/42' }, headers);
    await fuzz({
      name: 'gateway operations (agent token)',
      // The token lives 300 seconds; the run ends well before.
      maxSeconds: 20,
      args: [...COMMON, ...names('--include-name', GATEWAY), '-H', `Authorization: Bearer ${token.access_token}`],
      parameters: { 'path.action_id': submitted.action.id },
    });
  }, 180_000);

  it("every operation of people, as an organisation's administrator, with records behind the path parameters", async () => {
    const { session: s, userId } = await administrator();
    const member = await s.expect(201, 'POST', '/users', { email: `member-${randomBytes(4).toString('hex')}@example.com`, display_name: 'Mem Ber', roles: ['viewer'] });
    const agent = await s.expect(201, 'POST', '/agents', { name: 'Fuzzed agent' });
    const identity = await s.expect(201, 'POST', `/agents/${agent.id}/identities`);
    const server = await s.expect(201, 'POST', '/mcp-servers', { name: 'Files', endpoint: 'https://mcp.example.com/files' });
    const tool = await s.expect(201, 'POST', '/tools', { tool_key: 'files.read_file', name: 'Read file', mcp_server_id: server.id });
    const model = await s.expect(201, 'POST', '/models', { provider: 'acme', model_name: 'acme-large' });
    const credential = await s.expect(201, 'POST', '/resources/credentials', { name: 'Payments key', provider: 'mock', secret_path: 'payments/api-key' });
    const binding = await s.expect(201, 'POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
    const delegation = await s.expect(201, 'POST', `/agents/${agent.id}/delegations`, { principal_ref: 'user:ada@example.com', display_name: 'Ada', scopes: ['files:read'] });
    const policy = await s.expect(201, 'POST', '/policies', {
      key: 'fuzz-freeze',
      name: 'Freeze lookups',
      rules: [{ id: 'no-lookups', effect: 'deny', reason_code: 'LOOKUPS_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' }] }],
    });
    const account = await s.expect(201, 'POST', '/service-accounts', { name: 'fuzz-bot' });
    const action = await s.expect(200, 'POST', '/actions/console', { tool: 'files.read_file', target: 'file://reports/q3.pdf', agent_id: agent.id }, { 'idempotency-key': `fuzz-${randomBytes(6).toString('hex')}` });
    const evidence = await s.expect(200, 'GET', '/evidence?limit=1');
    const control = (await s.expect(200, 'GET', '/governance/frameworks')).items[0].controls[0];
    const exception = await s.expect(201, 'POST', '/exceptions', {
      control_id: control.id,
      title: 'Fuzzed exception',
      justification: 'A justification long enough for the rule.',
      owner_email: 'owner@example.com',
      expires_at: new Date(Date.now() + 30 * 86_400_000).toISOString(),
    });
    const task = await s.expect(201, 'POST', '/governance/remediation', { title: 'Fuzzed task', control_id: control.id });
    const report = await s.expect(201, 'POST', '/reports', { kind: 'agent_inventory', parameters: { format: 'csv' } });
    await fuzz({
      name: 'operations of people (administrator session)',
      maxSeconds: MAIN_SECONDS,
      args: [...COMMON, ...names('--exclude-name', [...GATEWAY, ...MOVES_SESSION, ...ENDS_SESSION]), ...asSession(s)],
      parameters: {
        // Another person: the fuzzer may disable whom it changes, and the run needs its administrator.
        'path.user_id': member.id,
        'path.agent_id': agent.id,
        'path.identity_id': identity.id,
        'path.server_id': server.id,
        'path.tool_id': tool.id,
        'path.model_id': model.id,
        'path.credential_id': credential.id,
        'path.binding_id': binding.id,
        'path.delegation_id': delegation.id,
        'path.policy_id': policy.id,
        'path.service_account_id': account.id,
        'path.action_id': action.action.id,
        'path.control_id': control.id,
        'path.exception_id': exception.id,
        'path.task_id': task.id,
        'path.report_id': report.id,
        ...(evidence.items[0] ? { 'path.evidence_id': evidence.items[0].id } : {}),
      },
    });
    // The administrator is still signed in: the run tested the operations, not the 401 path.
    expect((await s.call('GET', '/auth/me')).body.user.id).toBe(userId);
  }, 600_000);

  it('operations that move the session to another organisation, on a session of their own', async () => {
    const { session } = await administrator();
    await fuzz({ name: 'switching and onboarding', maxSeconds: 15, args: [...COMMON, ...names('--include-name', MOVES_SESSION), ...asSession(session)] });
  }, 180_000);

  it('sign-out operations, on a session of their own', async () => {
    const { session } = await administrator();
    await fuzz({ name: 'signing out', maxSeconds: 10, args: [...COMMON, ...names('--include-name', ENDS_SESSION), ...asSession(session)] });
  }, 180_000);

  afterAll(() => {
    // The runs' summaries (operations, cases, seed) in our own words, one line each, for the log of a green run
    // too; Schemathesis's own banner lines look like another test runner's result lines to a log reader.
    process.stdout.write(`\nSchemathesis:\n${reports.join('\n')}\n`);
  });
});

/** Schemathesis's summary as one line: operations tested, cases generated and passed, the seed. */
function oneLineSummary(output: string): string {
  const selected = /Selected:\s*(\d+)\/(\d+)/.exec(output);
  const tested = /Tested:\s*(\d+)/.exec(output)?.[1];
  const cases = /(\d+) generated(?:, ([^\n]*))?/.exec(output);
  const seed = /Seed:\s*(\d+)/.exec(output)?.[1];
  return [
    selected ? `${tested ?? '?'} of ${selected[1]} selected operations (of ${selected[2]}) fuzzed` : 'operations: not reported',
    cases ? `cases: ${cases[1]} generated${cases[2] ? `, ${cases[2].trim()}` : ''}` : 'cases: not reported',
    `seed ${seed ?? 'not reported'}`,
  ].join('; ');
}
