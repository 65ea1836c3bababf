import { sql, type Kysely } from 'kysely';
import type { BaseLogger } from 'pino';

/** What maintenance logs to: the app's logger (pino). */
export type MaintenanceLog = Pick<BaseLogger, 'debug' | 'info' | 'warn' | 'error'>;

/** A table that was due, and what was done to it. */
export interface Maintained {
  table: string;
  vacuum: boolean;
  analyze: boolean;
}

/** What one pass did: the tables it vacuumed or analysed, and those whose statement failed. */
export interface MaintenanceReport {
  done: Maintained[];
  failed: Array<Maintained & { error: string }>;
  ms: number;
}

/** Between two passes; the first runs FIRST_PASS_MS after `start` (the API has migrated and seeded by then). */
const PERIOD_MS = 60_000;
const FIRST_PASS_MS = 5_000;

/**
 * The tables due for a vacuum or an analyze by PostgreSQL's own autovacuum rules, read from its cumulative
 * statistics (which PGlite keeps: track_counts is on; only the autovacuum launcher is missing) and its own
 * settings: vacuum when the dead tuples pass autovacuum_vacuum_threshold (50) + autovacuum_vacuum_scale_factor
 * (0.2) × reltuples, or the rows inserted since the last vacuum pass autovacuum_vacuum_insert_threshold (1000) +
 * its scale factor (0.2) × reltuples, or the table's oldest unfrozen transaction id is older than
 * autovacuum_freeze_max_age; analyze when the rows changed since the last analyze pass
 * autovacuum_analyze_threshold (50) + autovacuum_analyze_scale_factor (0.1) × reltuples. A table never vacuumed
 * nor analysed (reltuples -1) counts as empty, as there. Catalogs included, as there (each analyze updates
 * pg_statistic); TOAST tables are vacuumed with their table.
 */
const DUE = sql<{ schema: string; name: string; vacuum_due: boolean; analyze_due: boolean }>`
  with t as (
    select s.schemaname as schema, s.relname as name, s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze,
      greatest(c.reltuples, 0) as reltuples, age(c.relfrozenxid) as xid_age
    from pg_stat_all_tables s join pg_class c on c.oid = s.relid
    where c.relkind in ('r', 'm') and s.schemaname <> 'pg_toast' and s.schemaname not like 'pg\\_temp\\_%'
  ), due as (
    select schema, name,
      n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
          + current_setting('autovacuum_vacuum_scale_factor')::float8 * reltuples
        or n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8
          + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * reltuples
        or xid_age > current_setting('autovacuum_freeze_max_age')::float8 as vacuum_due,
      n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
          + current_setting('autovacuum_analyze_scale_factor')::float8 * reltuples as analyze_due
    from t
  )
  select schema, name, vacuum_due, analyze_due from due where vacuum_due or analyze_due order by schema, name`;

/**
 * The embedded database's own autovacuum. PGlite runs postgres as one backend with no autovacuum launcher,
 * so without this nothing ever vacuums or analyses: the planner has no statistics for the tables the
 * decision path reads and writes (their reltuples stay -1), the dead versions of updated and deleted rows
 * are reclaimed only as far as page pruning goes (not their index entries, nor the job queue's and the
 * catalogs' churn), and no row is ever frozen (PostgreSQL refuses writes near transaction-id wraparound).
 * Every PERIOD_MS (and once FIRST_PASS_MS after start) it vacuums and analyses the tables PostgreSQL's
 * autovacuum would (DUE). Nothing of this runs on PostgreSQL, whose autovacuum does it.
 *
 * The one connection is taken as every request takes it (the kysely dialect lends it to one holder at a
 * time, a transaction for its whole length), so a maintenance statement never runs inside, or between the
 * statements of, a request's transaction; it is taken for each table in turn, so requests run between two.
 * VACUUM needs the table's owner, and the connection serves as the runtime role (which owns nothing): while
 * it holds the connection, maintenance returns to the session's superuser (`reset role`) for the one
 * statement and sets the runtime role again before it lets go. A connection that could not be set back is
 * closed (`failClosed`) rather than lent to a request as the superuser.
 *
 * A failure is logged and the next pass runs as planned; it never reaches a request. A pass that did
 * something is logged at info, one line; one that found nothing due, at debug.
 */
export class EmbeddedMaintenance {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;
  private log: MaintenanceLog | undefined;

  constructor(
    private readonly db: Kysely<unknown>,
    private readonly runtimeRole: string,
    private readonly failClosed: () => Promise<void>,
  ) {}

  /** Checks once after `firstMs`, then every `periodMs` after the end of the previous check. The timer never keeps the process alive. */
  start(log: MaintenanceLog, { periodMs = PERIOD_MS, firstMs = FIRST_PASS_MS }: { periodMs?: number; firstMs?: number } = {}): void {
    if (this.stopped || this.timer) return;
    this.log = log;
    const tick = (ms: number) => {
      this.timer = setTimeout(() => {
        const pass = this.run().catch((err: unknown) => log.error({ err }, 'embedded database maintenance failed'));
        this.running = pass;
        void pass.finally(() => {
          if (this.running === pass) this.running = undefined;
          if (!this.stopped) tick(periodMs);
        });
      }, ms);
      this.timer.unref();
    };
    tick(firstMs);
  }

  /** No more passes; waits for one under way to end (it stops before its next table). Called before the database closes. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One pass: vacuums and analyses the tables due, each in its own turn on the connection. */
  async run(): Promise<MaintenanceReport> {
    const started = Date.now();
    const report: MaintenanceReport = { done: [], failed: [], ms: 0 };
    const due = await this.db.connection().execute(async (conn) => {
      if (this.stopped) return [];
      // This backend's own counts reach the shared statistics at most once a second, when it is idle; the
      // flush this asks for happens as the statement ends, before the next one reads them.
      await sql`select pg_stat_force_next_flush()`.execute(conn);
      return (await DUE.execute(conn)).rows;
    });
    for (const { schema, name, vacuum_due: vacuum, analyze_due: analyze } of due) {
      const table = `${schema}.${name}`;
      const id = sql.id(schema, name);
      const statement = vacuum && analyze ? sql`vacuum (analyze) ${id}` : vacuum ? sql`vacuum ${id}` : sql`analyze ${id}`;
      const ran = await this.db.connection().execute(async (conn) => {
        if (this.stopped) return false;
        await sql`reset role`.execute(conn);
        try {
          await statement.execute(conn);
          return true;
        } catch (err) {
          report.failed.push({ table, vacuum, analyze, error: (err as Error).message });
          return false;
        } finally {
          await this.asRuntimeRole(conn);
        }
      });
      if (ran) report.done.push({ table, vacuum, analyze });
    }
    report.ms = Date.now() - started;
    const fields = {
      vacuumed: report.done.filter((d) => d.vacuum).map((d) => d.table),
      analyzed: report.done.filter((d) => d.analyze).map((d) => d.table),
      ms: report.ms,
    };
    if (report.failed.length > 0) this.log?.warn({ ...fields, failed: report.failed }, 'embedded database maintenance: some tables failed');
    else if (report.done.length > 0) this.log?.info(fields, 'embedded database maintenance');
    else this.log?.debug({ ms: report.ms }, 'embedded database maintenance: nothing due');
    return report;
  }

  /** Sets the connection's role back to the runtime role, or closes the database if it cannot. */
  private async asRuntimeRole(conn: Kysely<unknown>): Promise<void> {
    try {
      await sql`set role ${sql.id(this.runtimeRole)}`.execute(conn);
      const { rows } = await sql<{ role: string }>`select current_user as role`.execute(conn);
      if (rows[0]?.role !== this.runtimeRole) throw new Error(`the connection is ${rows[0]?.role}, not ${this.runtimeRole}`);
    } catch (err) {
      this.stopped = true;
      this.log?.error({ err }, 'embedded database maintenance could not set the runtime role back; closing the database');
      await this.failClosed().catch(() => undefined);
      throw err;
    }
  }
}
