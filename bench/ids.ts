import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { timeOrderedId } from '../api/db/ids.js';
import { startCluster } from '../test/support/postgres-cluster.js';
import { record } from './results.js';
import { postgresCpuOf, walBetween } from './support.js';

const BATCH = 10;
const FILL_CHUNK = 20_000;

/**
 * What a row's id costs the write-ahead log once its table is large (D41): a table keyed by uuid, filled
 * with `rows` rows of random (version 4) ids and another of time-ordered ones (`timeOrderedId`, version 7,
 * as actions, approvals, evidence records, audit events and notifications use), then, right after a checkpoint,
 * `inserts` more rows into each in transactions of ten (a group-commit batch): the WAL a row wrote, the
 * share of it that was whole pages written again (full-page images, pg_waldump), and PostgreSQL's CPU
 * time a row, on a durable cluster. Run twice in turn, each kind after the other.
 */
export async function benchIds(opts: { rows: number; inserts: number }) {
  const cluster = await startCluster({ durable: true });
  const client = new pg.Client({ connectionString: cluster.adminUrl() });
  await client.connect();
  const kinds = { random: () => randomUUID(), 'time-ordered': () => timeOrderedId() };
  try {
    for (const [kind, id] of Object.entries(kinds)) {
      const table = tableOf(kind);
      await client.query(`create table ${table} (id uuid primary key, payload text not null)`);
      for (let done = 0; done < opts.rows; done += FILL_CHUNK) {
        const ids = Array.from({ length: Math.min(FILL_CHUNK, opts.rows - done) }, id);
        await client.query(`insert into ${table} select unnest($1::uuid[]), md5(random()::text)`, [ids]);
      }
    }
    await client.query('vacuum analyze');
    const results = [];
    for (const round of [1, 2]) {
      for (const [kind, id] of Object.entries(kinds)) {
        await client.query('checkpoint');
        const start = (await client.query<{ lsn: string }>('select pg_current_wal_insert_lsn() as lsn')).rows[0]!.lsn;
        const cpuBefore = postgresCpuOf(cluster.dataDir);
        const began = process.hrtime.bigint();
        for (let done = 0; done < opts.inserts; done += BATCH) {
          const ids = Array.from({ length: BATCH }, id);
          await client.query('begin');
          await client.query(`insert into ${tableOf(kind)} select unnest($1::uuid[]), md5(random()::text)`, [ids]);
          await client.query('commit');
        }
        const wallMs = Number(process.hrtime.bigint() - began) / 1e6;
        const cpuMs = postgresCpuOf(cluster.dataDir) - cpuBefore;
        const end = (await client.query<{ lsn: string }>('select pg_current_wal_lsn() as lsn')).rows[0]!.lsn;
        const wal = walBetween(cluster.dataDir, start, end);
        results.push({
          round,
          ids: kind,
          table_rows: opts.rows,
          wal_bytes_per_row: Math.round(wal.total / opts.inserts),
          full_page_share: Number((wal.fullPages / wal.total).toFixed(2)),
          postgres_cpu_us_per_row: Math.round((cpuMs * 1000) / opts.inserts),
          us_per_transaction: Math.round((wallMs * 1000 * BATCH) / opts.inserts),
        });
      }
    }
    for (const kind of Object.keys(kinds)) {
      const last = results.filter((r) => r.ids === kind).at(-1)!;
      record('ids', `${kind} ids, WAL a row after a checkpoint (${opts.rows.toLocaleString('en')} rows)`, last.wal_bytes_per_row, 'bytes');
      record('ids', `${kind} ids, PostgreSQL's CPU a row`, last.postgres_cpu_us_per_row, 'µs');
    }
    return results;
  } finally {
    await client.end();
    cluster.stop();
  }
}

const tableOf = (kind: string) => `ids_${kind.replace('-', '_')}`;

