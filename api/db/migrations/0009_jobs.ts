import { sql, type Kysely } from 'kysely';
import PgBoss from 'pg-boss';
import { run } from './helpers.js';

/** The schema pg-boss keeps its queues and jobs in (api/platform/jobs.ts uses the same). */
export const JOBS_SCHEMA = 'pgboss';

/**
 * The pg-boss schema version this migration installs (pg-boss 10.4.2, pinned exactly in package.json). A
 * newer pg-boss brings its changes as a later migration; this one must install the same thing forever.
 */
const SCHEMA_VERSION = 24;

/** A queue as a migration creates it: pg-boss's queue options (worker/README.md, Queues). */
export interface QueueSpec {
  name: string;
  /** Seconds a job may stay active before it counts as failed (its worker died): the default of its sends. */
  expireInSeconds: number;
  /** Retries after the first attempt; then the job fails for good and goes to `<name>.dead`. */
  retryLimit: number;
  /** Seconds between a failure and the next attempt. */
  retryDelay: number;
}

/**
 * The background job queue (docs/decisions.md D22, worker/README.md): pg-boss's own schema, installed
 * here by the schema owner so that the runtime role, which the API and the worker connect as, never needs
 * CREATE (pg-boss runs with `migrate: false` and only checks the schema version), and the queues the
 * product uses now. A later version of pg-boss brings its schema changes as a later migration
 * (`PgBoss.getMigrationPlans`), a new queue comes with the migration of the feature that sends to it
 * (`createJobQueue`).
 */
export function jobs(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, constructionStatements());
      await run(db, [
        // Queues are created by migrations, as the owner; the runtime role may not call these.
        `revoke all on function ${JOBS_SCHEMA}.create_queue(text, json) from public`,
        `revoke all on function ${JOBS_SCHEMA}.delete_queue(text) from public`,
        `grant usage on schema ${JOBS_SCHEMA} to ${quoteRole(runtimeRole)}`,
        // Partitions created later (one per queue) by the owner come with the same grants.
        `alter default privileges in schema ${JOBS_SCHEMA}
           grant select, insert, update, delete on tables to ${quoteRole(runtimeRole)}`,
      ]);
      await createJobQueue(db, runtimeRole, { name: 'discovery.run', expireInSeconds: 300, retryLimit: 2, retryDelay: 5 });
    },
  };
}

/**
 * Creates a queue and its dead-letter queue `<name>.dead` (where a job goes once its retries are spent),
 * both with pg-boss's `standard` policy, and grants the runtime role its tables. Idempotent.
 */
export async function createJobQueue(db: Kysely<unknown>, runtimeRole: string, queue: QueueSpec): Promise<void> {
  const deadLetter = `${queue.name}.dead`;
  const create = (name: string, options: Record<string, unknown>) =>
    sql`select ${sql.raw(JOBS_SCHEMA)}.create_queue(${name}, ${JSON.stringify(options)}::json)`.execute(db);
  await create(deadLetter, { policy: 'standard', retryLimit: queue.retryLimit, retryDelay: queue.retryDelay, expireInSeconds: queue.expireInSeconds });
  await create(queue.name, {
    policy: 'standard',
    retryLimit: queue.retryLimit,
    retryDelay: queue.retryDelay,
    expireInSeconds: queue.expireInSeconds,
    deadLetter,
  });
  await sql`grant select, insert, update, delete on all tables in schema ${sql.raw(JOBS_SCHEMA)} to ${sql.id(runtimeRole)}`.execute(db);
}

/**
 * pg-boss's construction plan as single statements. The plan is one text wrapped in its own
 * `BEGIN; SET LOCAL ...; ... COMMIT`; a migration already runs in a transaction (and the embedded
 * database prepares one statement at a time), so the wrapper and its transaction-wide settings go and
 * the rest runs statement by statement. Throws when the plan's shape is not the one this was written
 * against, rather than installing half a schema.
 */
export function constructionStatements(): string[] {
  const statements = splitStatements(PgBoss.getConstructionPlans(JOBS_SCHEMA));
  if (statements[0]?.toUpperCase() !== 'BEGIN' || statements.at(-1)?.toUpperCase() !== 'COMMIT') {
    throw new Error("pg-boss's construction plan is no longer one BEGIN ... COMMIT block; review migration 0009");
  }
  const version = new RegExp(`^INSERT INTO ${JOBS_SCHEMA}\\.version\\(version\\) VALUES \\('(\\d+)'\\)$`).exec(statements.at(-2) ?? '');
  if (Number(version?.[1]) !== SCHEMA_VERSION) {
    throw new Error(
      `pg-boss installs schema version ${version?.[1] ?? 'unknown'}, migration 0009 installs ${SCHEMA_VERSION}: ` +
        'keep pg-boss at 10.4.2, or upgrade it with a new migration (worker/README.md, Upgrading pg-boss)',
    );
  }
  return statements.slice(1, -1).filter((s) => !/^SET LOCAL /i.test(s));
}

/**
 * Splits SQL text into statements at semicolons outside string literals, quoted names, dollar-quoted
 * bodies (plpgsql functions) and comments.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = [];
  let current = '';
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    const quoted = /^'(?:[^']|'')*'|^"(?:[^"]|"")*"|^--[^\n]*/.exec(rest);
    const dollar = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(rest);
    if (quoted) {
      current += quoted[0];
      i += quoted[0].length;
    } else if (dollar) {
      const end = rest.indexOf(dollar[0], dollar[0].length);
      if (end < 0) throw new Error('unterminated dollar-quoted string');
      current += rest.slice(0, end + dollar[0].length);
      i += end + dollar[0].length;
    } else if (rest[0] === ';') {
      if (current.trim()) statements.push(current.trim());
      current = '';
      i += 1;
    } else {
      current += rest[0];
      i += 1;
    }
  }
  if (current.trim()) statements.push(current.trim());
  return statements;
}

function quoteRole(role: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(role)) throw new Error(`bad role name ${role}`);
  return `"${role}"`;
}
