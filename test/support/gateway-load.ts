import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { expect } from 'vitest';
import { migrate } from '../../api/db/database.js';
import { OWNER_ROLE, ROLE_PASSWORD, RUNTIME_ROLE, withDatabase } from './pg-urls.js';
import { startCluster, type Cluster } from './postgres-cluster.js';

/**
 * What the crash, shutdown and database-loss tests share: a cluster of their own, a person and agents
 * set up over HTTP as users do, bursts of gateway submissions from several agents at once with every
 * answer (or socket error) kept, and the check that what was acknowledged survived.
 */

/** A PostgreSQL cluster of the test's own, durable (synchronous_commit on), with a migrated `tollgate` database. */
export async function migratedCluster(): Promise<{ cluster: Cluster; runtimeUrl: string }> {
  const cluster = await startCluster({ durable: true });
  try {
    const admin = new pg.Client({ connectionString: cluster.adminUrl() });
    await admin.connect();
    try {
      for (const role of [OWNER_ROLE, RUNTIME_ROLE]) await admin.query(`create role ${role} login password '${ROLE_PASSWORD}'`);
      await admin.query(`create database tollgate owner ${OWNER_ROLE}`);
    } finally {
      await admin.end();
    }
    const owner = new Kysely<unknown>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(cluster.adminUrl(), 'tollgate', OWNER_ROLE), max: 1 }) }),
    });
    try {
      await migrate(owner, RUNTIME_ROLE);
    } finally {
      await owner.destroy();
    }
  } catch (err) {
    cluster.stop();
    throw err;
  }
  return { cluster, runtimeUrl: withDatabase(cluster.adminUrl(), 'tollgate', RUNTIME_ROLE) };
}

/** `tollgate api`'s environment for a burst: budgets out of the way, requests logged. */
export function apiEnv(port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PORT: String(port),
    LOG_LEVEL: 'info',
    RATE_LIMIT_GATEWAY_PER_MINUTE: '1000000',
    RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
    RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
    RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: '1000000',
    RATE_LIMIT_SIGNIN_PER_MINUTE: '1000000',
    ...extra,
  };
}

export interface Answer {
  status: number;
  json: any;
  headers: http.IncomingHttpHeaders;
  ms: number;
}

export interface Failure {
  /** The socket error's code: ECONNREFUSED (nothing listens), ECONNRESET, EPIPE, ... */
  error: string;
  /** Sent on a kept-alive connection that had carried earlier requests. */
  reused: boolean;
  ms: number;
}

export const isFailure = (r: Answer | Failure): r is Failure => 'error' in r;

/** One request over node:http, on `agent` (false: a connection of its own). Never throws. */
export function send(
  base: string,
  method: string,
  path: string,
  opts: { agent?: http.Agent | false; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<Answer | Failure> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    const req = http.request(
      `${base}${path}`,
      {
        method,
        agent: opts.agent ?? false,
        headers: { ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}), ...opts.headers },
        timeout: opts.timeoutMs ?? 30_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, reused: req.reusedSocket, ms: ms() }));
        res.on('end', () => {
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = text;
          }
          resolve({ status: res.statusCode ?? 0, json, headers: res.headers, ms: ms() });
        });
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message, reused: req.reusedSocket, ms: ms() }));
    req.end(opts.body);
  });
}

/** An administrator signed in with development sign-in, with a new organisation; `call` sends as them. */
export class Person {
  private constructor(
    private readonly base: string,
    private readonly cookie: string,
    private readonly csrf: string,
    readonly orgId: string,
  ) {}

  static async onboard(base: string): Promise<Person> {
    const cookies = (r: Answer) => ([] as string[]).concat(r.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
    const login = await send(base, 'POST', '/api/v1/auth/dev-login', { body: JSON.stringify({ email: `crash-${randomBytes(4).toString('hex')}@example.com` }) });
    if (isFailure(login) || login.status !== 200) throw new Error(`dev-login: ${JSON.stringify(login)}`);
    const onboard = await send(base, 'POST', '/api/v1/tenants/onboard', {
      headers: { cookie: cookies(login), 'x-csrf-token': login.json.csrf_token },
      body: JSON.stringify({ name: 'Crash Ltd', slug: `crash-${randomBytes(4).toString('hex')}`, primary_region: 'eu-west', admin_display_name: 'Cara Crash' }),
    });
    if (isFailure(onboard) || onboard.status !== 201) throw new Error(`onboard: ${JSON.stringify(onboard)}`);
    return new Person(base, cookies(onboard), onboard.json.csrf_token, onboard.json.tenant.id);
  }

  /** Sends as this person; the answer, whatever its status. */
  call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer | Failure> {
    return send(this.base, method, `/api/v1${path}`, {
      headers: { cookie: this.cookie, ...(method === 'GET' ? {} : { 'x-csrf-token': this.csrf }), ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  }

  /** Sends as this person and answers the JSON of a 2xx; anything else throws. */
  async ok(method: string, path: string, body?: unknown): Promise<any> {
    const r = await this.call(method, path, body);
    if (isFailure(r) || r.status >= 300) throw new Error(`${method} ${path}: ${JSON.stringify(isFailure(r) ? r : { status: r.status, json: r.json })}`);
    return r.json;
  }

  /** Every action of the organisation, following the cursor. */
  async actions(): Promise<Array<{ id: string; agent_id: string; idempotency_key: string }>> {
    const all = [];
    let cursor: string | null = null;
    do {
      const page: { items: Array<{ id: string; agent_id: string; idempotency_key: string }>; next_cursor: string | null } = await this.ok(
        'GET',
        `/actions?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      all.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    return all;
  }
}

export interface GatewayAgent {
  id: string;
  token: string;
}

/** The tool every burst submits: a read-only sample tool each organisation starts with. */
export const TOOL = 'crm.lookup_customer';

/** `n` agents allowed to invoke TOOL, each with a workload identity and a fresh token. */
export async function allowedAgents(base: string, person: Person, n: number): Promise<GatewayAgent[]> {
  const tools: Array<{ id: string; tool_key: string }> = (await person.ok('GET', '/tools?limit=200')).items;
  const tool = tools.find((t) => t.tool_key === TOOL);
  if (!tool) throw new Error(`no ${TOOL} among ${tools.map((t) => t.tool_key).join(', ')}`);
  const agents: GatewayAgent[] = [];
  for (let a = 0; a < n; a++) {
    const agent = await person.ok('POST', '/agents', { name: `Burst agent ${a}` });
    await person.ok('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
    const identity = await person.ok('POST', `/agents/${agent.id}/identities`);
    const token = await send(base, 'POST', '/api/v1/identities/token', {
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
    });
    if (isFailure(token) || token.status !== 200) throw new Error(`token: ${JSON.stringify(token)}`);
    agents.push({ id: agent.id, token: token.json.access_token });
  }
  return agents;
}

/** One submission of a burst: what was sent and what came back. */
export interface Submission {
  agent: GatewayAgent;
  key: string;
  body: string;
  correlationId: string;
  /** Date.now() when sent and when answered (or failed). */
  sentAt?: number;
  doneAt?: number;
  result?: Answer | Failure;
}

export const acknowledged = (s: Submission): s is Submission & { result: Answer } =>
  s.result !== undefined && !isFailure(s.result) && s.result.status >= 200 && s.result.status < 300;

/** Sends one submission (or its replay: the same key and body) as its agent. */
export function submit(base: string, s: Pick<Submission, 'agent' | 'key' | 'body' | 'correlationId'>, agent: http.Agent | false = false) {
  return send(base, 'POST', '/api/v1/actions', {
    agent,
    headers: { authorization: `Bearer ${s.agent.token}`, 'idempotency-key': s.key, 'x-correlation-id': s.correlationId },
    body: s.body,
  });
}

/**
 * Gateway submissions from several agents at once, `loopsPerAgent` loops each, every loop on one
 * kept-alive connection of its own, each submission sent as soon as the loop's previous one was
 * answered. Every answer and socket error is kept in `records`.
 */
export class Burst {
  readonly records: Submission[] = [];
  private stopped = false;
  private readonly loops: Promise<void>[] = [];
  private readonly sockets: http.Agent[] = [];
  private waiters: Array<{ n: number; resolve: () => void }> = [];
  private acks = 0;

  constructor(
    private readonly base: string,
    private readonly agents: GatewayAgent[],
    private readonly opts: { loopsPerAgent?: number; keepAlive?: boolean } = {},
  ) {}

  start(): this {
    const loops = this.opts.loopsPerAgent ?? 2;
    for (const agent of this.agents) {
      for (let l = 0; l < loops; l++) {
        const socket = new http.Agent({ keepAlive: this.opts.keepAlive ?? true, maxSockets: 1 });
        this.sockets.push(socket);
        this.loops.push(this.loop(agent, socket));
      }
    }
    return this;
  }

  private async loop(agent: GatewayAgent, socket: http.Agent): Promise<void> {
    while (!this.stopped) {
      const n = this.records.length;
      const s: Submission = {
        agent,
        key: `burst-${n}-${randomUUID()}`,
        body: JSON.stringify({ tool: TOOL, target: `crm://customers/${n}`, parameters: { customer_id: String(n) } }),
        correlationId: `burst-${randomUUID()}`,
      };
      this.records.push(s);
      s.sentAt = Date.now();
      s.result = await submit(this.base, s, socket);
      s.doneAt = Date.now();
      if (acknowledged(s)) {
        this.acks++;
        this.waiters = this.waiters.filter((w) => (this.acks >= w.n ? (w.resolve(), false) : true));
      } else if (isFailure(s.result)) {
        // Nothing listens (or the process is gone): try again shortly rather than spin.
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  get acknowledgedCount(): number {
    return this.acks;
  }

  /** Resolves once `n` submissions were acknowledged; throws after timeoutMs. */
  until(n: number, timeoutMs = 30_000): Promise<void> {
    if (this.acks >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${this.acks} of ${n} acknowledged after ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  /** Stops sending and waits for every loop's last submission to settle. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
    for (const s of this.sockets) s.destroy();
  }
}

/**
 * After a restart: every acknowledged submission's action is there under its key, no key holds two
 * actions, a replay of each (same key, same body) answers the original, and the evidence chain
 * verifies. Answers what it counted.
 */
export async function expectAcknowledgedKept(base: string, person: Person, records: Submission[]) {
  const acked = records.filter(acknowledged);
  const actions = await person.actions();
  const byId = new Map(actions.map((a) => [a.id, a]));
  const perKey = new Map<string, number>();
  for (const a of actions) perKey.set(`${a.agent_id} ${a.idempotency_key}`, (perKey.get(`${a.agent_id} ${a.idempotency_key}`) ?? 0) + 1);

  const missing = acked.filter((s) => {
    const a = byId.get(s.result.json.action.id);
    return !a || a.idempotency_key !== s.key || a.agent_id !== s.agent.id;
  });
  expect(missing.map((s) => s.key), 'acknowledged actions missing after the restart').toEqual([]);
  expect([...perKey].filter(([, n]) => n > 1), 'keys holding more than one action').toEqual([]);

  // Replays, a few at a time: the original action, marked replayed.
  const wrong: unknown[] = [];
  const queue = [...acked];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        const r = await submit(base, { ...s, correlationId: `replay-${randomUUID()}` });
        if (isFailure(r) || r.status !== 200 || r.json.action.id !== s.result.json.action.id || r.json.replayed !== true) {
          wrong.push({ key: s.key, original: s.result.json.action.id, replay: isFailure(r) ? r : { status: r.status, json: r.json } });
        }
      }
    }),
  );
  expect(wrong, 'replays that did not answer the original action').toEqual([]);

  const verify = await person.ok('GET', '/evidence/verify');
  expect(verify).toMatchObject({ valid: true, first_broken: null });
  // Every acknowledged decision wrote at least one evidence record.
  expect(verify.records_checked).toBeGreaterThanOrEqual(acked.length);
  return {
    acknowledged: acked.length,
    actions: actions.length,
    // Committed without the client hearing so: the idempotency key lets it find out by replaying.
    committedUnacknowledged: actions.length - acked.length,
    evidenceRecords: verify.records_checked as number,
  };
}
