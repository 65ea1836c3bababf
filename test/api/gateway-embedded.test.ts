import { PassThrough } from 'node:stream';
import type { PGlite } from '@electric-sql/pglite';
import type { FastifyInstance } from 'fastify';
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { executeSqlText, inScope, inScopePiped, openDatabase, readInScope, type Database } from '../../api/db/database.js';
import { PgliteRounds } from '../../api/db/pglite-rounds.js';
import { api, onboardAdmin, TestClock } from '../support/harness.js';

/**
 * The gateway's batch on the embedded database (`make run`): its statements go to PGlite in two calls of
 * prepared statements (PgliteRounds, `inScopePiped`), not one call per statement. The same guarantees as
 * on PostgreSQL: a transaction commits whole or not at all, the budget count ahead of it commits on its
 * own, budgets are exact, a key holds one action, every acknowledged decision has its evidence, and the
 * chain verifies; what a statement answers is what PGlite's own `query` answers.
 */
describe('the gateway on the embedded database', () => {
  const LIMIT = 25;
  let app: FastifyInstance;
  let database: Database;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  const tokens: string[] = [];
  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const submit = (token: string, key: string, payload: object = lookup) =>
    app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${token}`, 'idempotency-key': key }, payload });

  beforeAll(async () => {
    const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn', RATE_LIMIT_GATEWAY_PER_MINUTE: String(LIMIT) });
    database = await openDatabase(config);
    // A clock that stands still: a burst never straddles two budget windows.
    app = await buildApp({ config, db: database.db, clock: new TestClock(), logStream: new PassThrough() });
    await app.ready();
    admin = await onboardAdmin(app, 'Embedded gateway');
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const toolId = tools.find((t) => t.tool_key === 'crm.lookup_customer')!.id;
    // Three for the burst, one for the replays.
    for (let a = 0; a < 4; a++) {
      const agent = (await admin.client.post(api('/agents'), { name: `Embedded agent ${a}` })).json();
      await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'] });
      const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
      const res = await app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      });
      tokens.push(res.json().access_token);
    }
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  it('keeps each budget exact and each key to one action under a burst, and the chain verifies', async () => {
    // Each agent sends 35 at once (batches of several), then one at a time; every fifth key is sent twice.
    const burstTokens = tokens.slice(0, 3);
    const sends = burstTokens.flatMap((token, a) => Array.from({ length: 40 }, (_, i) => ({ token, agent: a, key: `embedded-${a}-${i % 5 === 4 ? i - 1 : i}`, i })));
    const burst = await Promise.all(sends.filter((s) => s.i < 35).map(async (s) => ({ ...s, res: await submit(s.token, s.key) })));
    const sequential = [];
    for (const s of sends.filter((x) => x.i >= 35)) sequential.push({ ...s, res: await submit(s.token, s.key) });
    const answers = [...burst, ...sequential].map((x) => ({ ...x, status: x.res.statusCode, body: x.res.json() }));

    for (let a = 0; a < burstTokens.length; a++) {
      const mine = answers.filter((x) => x.agent === a);
      // Every submission is counted once on its agent's budget, repeated keys too.
      expect(mine.filter((x) => x.status === 200)).toHaveLength(LIMIT);
      expect(mine.filter((x) => x.status !== 200).map((x) => [x.status, x.body.error.code])).toEqual(Array(40 - LIMIT).fill([429, 'rate_limited']));
    }
    // A key answered more than once is one action, decided once: one answer is its decision, the others its
    // replays. Which one is the decision is not the order of sending: requests sent at once are authenticated
    // in parallel (the token's signature check completes off the event loop), so they may reach the gateway
    // in another order.
    const byKey = new Map<string, string>();
    const firsts = new Map<string, number>();
    for (const x of answers.filter((y) => y.status === 200)) {
      const k = `${x.agent} ${x.key}`;
      const seen = byKey.get(k);
      if (seen) expect(x.body.action.id).toBe(seen);
      else byKey.set(k, x.body.action.id);
      if (!x.body.replayed) firsts.set(k, (firsts.get(k) ?? 0) + 1);
    }
    expect([...firsts.keys()].sort()).toEqual([...byKey.keys()].sort());
    expect([...firsts.values()].every((n) => n === 1)).toBe(true);
    const actionIds = [...byKey.values()];
    const stored = await inScope(database.db, { orgId: admin.tenant.id }, async (tx) => ({
      actions: (await sql<{ id: string }>`select id from action_requests where idempotency_key like 'embedded-%'`.execute(tx)).rows.map((r) => r.id),
      decisions: (
        await sql<{ n: number }>`select count(*)::int as n from evidence_records where event_type = 'decision' and action_request_id = any(${actionIds}::uuid[])`.execute(tx)
      ).rows[0]!.n,
    }));
    expect(stored.actions.sort()).toEqual([...actionIds].sort());
    expect(stored.decisions).toBe(actionIds.length);
    const { rows: counted } = await sql<{ n: number }>`select coalesce(sum(count), 0)::int as n from rate_limit_buckets where key like 'agent:%'`.execute(database.db);
    expect(counted).toEqual([{ n: 40 * burstTokens.length }]);
    expect((await admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
    // The count, the write and the probe are kept parsed. The probe's plan for no values in particular (its
    // generic one, which PostgreSQL takes once it judges it no dearer) looks each pair up by the actions'
    // unique key, never reading the organisation's actions by its page index: on the table as it stands,
    // never analysed (migration 0022), and once the embedded database's maintenance has analysed it (which
    // makes PostgreSQL plan its kept statements again).
    const { rows: kept } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(database.db);
    expect(kept.some((r) => r.statement.includes('insert into rate_limit_buckets'))).toBe(true);
    expect(kept.some((r) => r.statement.includes('insert into "evidence_records"'))).toBe(true);
    const probes = kept.filter((r) => r.statement.includes('registry_versions')).map((r) => r.statement);
    expect(probes.length).toBeGreaterThan(0);
    const plansOfProbes = async () =>
      Promise.all(
        probes.map(async (probe) => {
          const { rows } = await executeSqlText(database.db, `explain (generic_plan) ${probe}`);
          return (rows as Array<{ 'QUERY PLAN': string }>).map((r) => r['QUERY PLAN']).join('\n');
        }),
      );
    const { rows: stats } = await sql<{ reltuples: number }>`select reltuples from pg_class where relname = 'action_requests'`.execute(database.db);
    expect(stats).toEqual([{ reltuples: -1 }]);
    for (const plan of await plansOfProbes()) {
      expect(plan).toMatch(/Index (Only )?Scan using action_requests_idempotency on action_requests/);
      expect(plan).not.toMatch(/action_requests_page/);
    }
    const pass = await database.maintenance!.run();
    expect(pass.done).toContainEqual(expect.objectContaining({ table: 'public.action_requests', analyze: true }));
    for (const plan of await plansOfProbes()) {
      expect(plan).toMatch(/Index (Only )?Scan using action_requests_idempotency on action_requests/);
      expect(plan).not.toMatch(/action_requests_page/);
    }
  });

  it('answers a repeated key with its action, and another request under it with a conflict', async () => {
    const first = await submit(tokens[3]!, 'embedded-once-0001');
    expect(first.statusCode, first.body).toBe(200);
    const again = await submit(tokens[3]!, 'embedded-once-0001');
    expect(again.json()).toMatchObject({ replayed: true, action: { id: first.json().action.id } });
    const other = await submit(tokens[3]!, 'embedded-once-0001', { ...lookup, target: 'crm://customers/43' });
    expect([other.statusCode, other.json().error.code]).toEqual([409, 'idempotency_conflict']);
  });
});

describe('transactions in two calls into PGlite', () => {
  let database: Database;
  let orgId: string;

  const bucket = (key: string) => sql<{ key: string }>`insert into rate_limit_buckets (key, window_start, count) values (${key}, 0, 1) returning key`.compile(database.db);
  const bucketCount = async (key: string) =>
    Number((await sql<{ n: number }>`select count(*)::int as n from rate_limit_buckets where key = ${key}`.execute(database.db)).rows[0]!.n);
  const renamed = () =>
    inScope(database.db, { orgId }, async (tx) => (await sql<{ name: string }>`select name from organisations where id = ${orgId}`.execute(tx)).rows[0]?.name);
  /** The one connection's scope, and whether it is in a transaction (a savepoint is refused outside one). */
  const outside = async () => {
    const { rows } = await sql<{ org: string }>`select current_setting('app.org_id', true) as org`.execute(database.db);
    const savepoint = await sql`savepoint probe`.execute(database.db).then(
      () => 'taken',
      (err: { code?: string }) => err.code,
    );
    return [{ org: rows[0]!.org, in_transaction: savepoint !== '25P01' }];
  };

  beforeAll(async () => {
    const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn' });
    database = await openDatabase(config);
    const app = await buildApp({ config, db: database.db, logStream: new PassThrough() });
    await app.ready();
    orgId = (await onboardAdmin(app, 'Rounds')).tenant.id;
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  it('commits the first, the statements between and the last together, in the scope', async () => {
    const seen: string[] = [];
    const result = await inScopePiped(
      database.db,
      { orgId },
      sql<{ org: string }>`select current_setting('app.org_id', true) as org`.compile(database.db),
      async (tx, [first]) => {
        seen.push(first!.org);
        await sql`update organisations set name = 'Rounds one' where id = ${orgId}`.execute(tx);
        return { last: sql`update organisations set name = name || ' two' where id = ${orgId}`.compile(database.db), written: () => seen.push('written'), result: 'done' };
      },
      { query: bucket('rounds-ahead-1'), done: (rows) => seen.push(rows[0]!.key) },
    );
    expect(result).toBe('done');
    expect(seen).toEqual(['rounds-ahead-1', orgId, 'written']);
    expect(await renamed()).toBe('Rounds one two');
    expect(await bucketCount('rounds-ahead-1')).toBe(1);
    expect(await outside()).toEqual([{ org: '', in_transaction: false }]);
  });

  it('rolls everything back when the last statement fails, and keeps what went ahead', async () => {
    let written = false;
    await expect(
      inScopePiped(
        database.db,
        { orgId },
        sql`select 1`.compile(database.db),
        async (tx) => {
          await sql`update organisations set name = 'Never' where id = ${orgId}`.execute(tx);
          return { last: sql`select 1 / 0`.compile(database.db), written: () => (written = true), result: undefined };
        },
        { query: bucket('rounds-ahead-2'), done: () => undefined },
      ),
    ).rejects.toThrow(/division by zero/);
    expect(written).toBe(false);
    expect(await renamed()).toBe('Rounds one two');
    expect(await bucketCount('rounds-ahead-2')).toBe(1);
    expect(await outside()).toEqual([{ org: '', in_transaction: false }]);
  });

  it('rolls back when the statements between fail, when the first fails, and when the statement ahead fails', async () => {
    await expect(
      inScopePiped(database.db, { orgId }, sql`select 1`.compile(database.db), async (tx) => {
        await sql`update organisations set name = 'Never' where id = ${orgId}`.execute(tx);
        throw new Error('refused between');
      }),
    ).rejects.toThrow('refused between');
    await expect(inScopePiped(database.db, { orgId }, sql`select 1 / 0`.compile(database.db), async () => ({ result: undefined }))).rejects.toThrow(
      /division by zero/,
    );
    let ran = false;
    await expect(
      inScopePiped(
        database.db,
        { orgId },
        sql`select 1`.compile(database.db),
        async () => {
          ran = true;
          return { result: undefined };
        },
        { query: sql`select 1 / 0`.compile(database.db), done: () => undefined },
      ),
    ).rejects.toThrow(/division by zero/);
    expect(ran).toBe(false);
    // A statement that does not parse is refused as such, and the connection goes on.
    await expect(inScopePiped(database.db, { orgId }, CompiledQuery.raw('selec 1'), async () => ({ result: undefined }))).rejects.toThrow(/syntax error/);
    expect(await renamed()).toBe('Rounds one two');
    expect(await outside()).toEqual([{ org: '', in_transaction: false }]);
  });

  it('reads in the scope in one call, and sees nothing outside it', async () => {
    const names = database.db.selectFrom('organisations').select('name');
    expect(await readInScope(database.db, { orgId }, names)).toEqual([{ name: 'Rounds one two' }]);
    expect(await readInScope(database.db, { orgId: null }, names)).toEqual([]);
    expect(await outside()).toEqual([{ org: '', in_transaction: false }]);
  });
});

describe('PgliteRounds', () => {
  let pg: PGlite;
  beforeAll(async () => {
    const { PGlite } = await import('@electric-sql/pglite');
    pg = await PGlite.create('memory://');
    await pg.exec(`create table t (id uuid primary key, tags text[], doc jsonb, at timestamptz, n bigint, ok boolean, note text)`);
  }, 60_000);
  afterAll(async () => {
    await pg?.close();
  });

  it("serialises parameters and parses rows as PGlite's query does, kept prepared or planned each time", async () => {
    const rounds = new PgliteRounds(pg);
    const insert = `insert into t (id, tags, doc, at, n, ok, note) values ($1, $2, $3, $4, $5, $6, $7)`;
    const values = ['0b4e2a4c-5a3f-4d6e-9f3a-1c2b3d4e5f60', ['a', 'b,c', 'd"e'], { k: [1, 'x'], nested: { y: null } }, new Date('2026-11-26T07:00:00.123Z'), 9007199254740993n, true, null];
    const [inserted] = await rounds.run([CompiledQuery.raw(insert, values)]);
    expect(inserted).toEqual({ status: 'fulfilled', value: { rows: [], numAffectedRows: 1n } });
    const select = `select * from t where id = $1 and tags = $2`;
    const expected = await pg.query(select, [values[0], values[1]]);
    expect(expected.rows).toEqual([{ id: values[0], tags: values[1], doc: values[2], at: values[3], n: 9007199254740993n, ok: true, note: null }]);
    const statements = () => [
      CompiledQuery.raw(select, [values[0], values[1]]),
      CompiledQuery.raw(select, [values[0], values[1]]),
      CompiledQuery.raw('select $1::int + 1 as n', [41]),
      CompiledQuery.raw('update t set note = note where id = $1', [values[0]]),
    ];
    const kept = statements();
    for (const settled of [await rounds.run(statements()), await rounds.run(kept, new Set(kept)), await rounds.run(kept, new Set(kept))]) {
      expect(settled.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
      const rows = settled.map((x) => (x as PromiseFulfilledResult<{ rows: unknown[]; numAffectedRows?: bigint }>).value);
      expect([rows[0]!.rows, rows[1]!.rows, rows[2]!.rows, rows[3]!.numAffectedRows]).toEqual([expected.rows, expected.rows, [{ n: 42 }], 1n]);
    }
    // Only what was kept is prepared in the session, each text once; the insert was planned each time.
    const { rows: prepared } = await pg.query<{ statement: string }>(`select statement from pg_prepared_statements where statement like '%$1%' order by statement`);
    expect(prepared.map((r) => r.statement)).toEqual(['select $1::int + 1 as n', select, 'update t set note = note where id = $1']);
  });

  it('keeps at most its bound of statements prepared, closing the least recently used, never one the call runs', async () => {
    const rounds = new PgliteRounds(pg, 2);
    const run = (...texts: string[]) => {
      const statements = texts.map((t) => CompiledQuery.raw(t));
      return rounds.run(statements, new Set(statements));
    };
    await run('select 10 as n');
    await run('select 11 as n');
    const three = await run('select 12 as n', 'select 10 as n', 'select 13 as n');
    expect(three.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    await run('select 14 as n');
    await run('select 10 as n');
    const { rows } = await pg.query<{ statement: string }>(`select statement from pg_prepared_statements where statement like 'select 1_ as n' order by statement`);
    expect(rows.map((r) => r.statement)).toEqual(['select 10 as n', 'select 14 as n']);
  });

  it('settles each statement on its own: one failure ends that one only, and leaves a transaction aborted', async () => {
    const rounds = new PgliteRounds(pg);
    const settled = await rounds.run([
      CompiledQuery.raw('begin'),
      CompiledQuery.raw(`insert into t (id) values ($1)`, ['6f1c7a36-2f55-4d5b-8a07-6cde1f1a8a11']),
      CompiledQuery.raw(`insert into t (id) values ($1)`, ['6f1c7a36-2f55-4d5b-8a07-6cde1f1a8a11']),
      CompiledQuery.raw('commit'),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ code: '23505', constraint: 't_pkey' });
    // The commit behind the failed insert ended the transaction as a rollback.
    expect((await pg.query(`select count(*)::int as n from t where id = $1`, ['6f1c7a36-2f55-4d5b-8a07-6cde1f1a8a11'])).rows).toEqual([{ n: 0 }]);
    const [bad, good] = await rounds.run([CompiledQuery.raw('select nope from t'), CompiledQuery.raw('select 1 as one')]);
    expect((bad as PromiseRejectedResult).reason).toMatchObject({ code: '42703' });
    expect(good).toEqual({ status: 'fulfilled', value: { rows: [{ one: 1 }] } });
    expect(pg.isInTransaction()).toBe(false);
  });
});
