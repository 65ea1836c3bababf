import { sql, type InsertQueryBuilder, type InsertResult, type QueryCreator } from 'kysely';
import type { DB } from './schema.js';

/**
 * An insert of `rows` sent as one parameter, a JSON array that `jsonb_populate_recordset` turns into the
 * table's rows, instead of a parameter per value: the statement's text is the same whatever the number of
 * rows, so PostgreSQL can keep it planned (`prepared`), and the document is one native JSON.stringify.
 * Values convert to the columns' types as that function converts them (uuids, numbers, timestamps from the
 * ISO strings dates become, arrays from JSON arrays). `jsonText` names the jsonb columns whose values are
 * JSON text already (as the gateway's rows hold them): they travel as JSON strings and are parsed by the
 * statement. Undefined when the rows do not all set the same columns (a column a row leaves out would be
 * null rather than its default): insert those as values.
 */
export function insertAsJson<T extends keyof DB & string>(
  db: QueryCreator<DB>,
  table: T,
  objects: readonly object[],
  jsonText: readonly string[] = [],
): InsertQueryBuilder<DB, T, InsertResult> | undefined {
  const rows = objects as ReadonlyArray<Record<string, unknown>>;
  const first = rows[0];
  if (!first) return undefined;
  const columns = Object.keys(first).filter((c) => first[c] !== undefined);
  for (const row of rows) {
    let set = 0;
    for (const c in row) if (row[c] !== undefined) set++;
    if (set !== columns.length || columns.some((c) => row[c] === undefined)) return undefined;
  }
  const selected = sql.join(columns.map((c) => (jsonText.includes(c) ? sql`(${sql.ref(c)} #>> '{}')::jsonb` : sql.ref(c))));
  const document = JSON.stringify(rows);
  const insert = db
    .insertInto(table)
    .columns(columns as never)
    .expression(sql`select ${selected} from jsonb_populate_recordset(null::${sql.table(table)}, ${document}::jsonb)`);
  return insert as unknown as InsertQueryBuilder<DB, T, InsertResult>;
}
