import { sql, type InsertQueryBuilder, type InsertResult, type QueryCreator } from 'kysely';
import type { DB } from './schema.js';

/**
 * An insert of `rows` sent as one parameter, a JSON array that `jsonb_populate_recordset` turns into the
 * table's rows, instead of a parameter per value: the statement's text is the same whatever the number of
 * rows, so PostgreSQL can keep it planned (`prepared`). Values convert to the columns' types as that
 * function converts them (uuids, numbers, timestamps from the ISO strings dates become, arrays from JSON
 * arrays). `jsonText` names the jsonb columns whose values are JSON text made by JSON.stringify (as the
 * gateway's rows hold them): those go into the document as they are, which keeps it well formed, since
 * JSON.stringify only makes whole JSON values. Undefined when the rows do not all set the same columns (a
 * column a row leaves out would be null rather than its default): insert those as values.
 */
export function insertAsJson<T extends keyof DB & string>(
  db: QueryCreator<DB>,
  table: T,
  objects: readonly object[],
  jsonText: readonly string[] = [],
): InsertQueryBuilder<DB, T, InsertResult> | undefined {
  const rows = objects as ReadonlyArray<Record<string, unknown>>;
  const columns = Object.keys(rows[0] ?? {}).filter((c) => rows[0]![c] !== undefined);
  if (columns.length === 0) return undefined;
  for (const row of rows) {
    if (Object.keys(row).filter((c) => row[c] !== undefined).length !== columns.length || columns.some((c) => row[c] === undefined)) return undefined;
  }
  const raw = new Set(jsonText);
  const document = `[${rows
    .map((row) => `{${columns.map((c) => `${JSON.stringify(c)}:${valueText(row[c], raw.has(c))}`).join(',')}}`)
    .join(',')}]`;
  const refs = sql.join(columns.map((c) => sql.ref(c)));
  return db
    .insertInto(table)
    .columns(columns as never)
    .expression(sql`select ${refs} from jsonb_populate_recordset(null::${sql.table(table)}, ${document}::jsonb)`) as unknown as InsertQueryBuilder<DB, T, InsertResult>;
}

function valueText(value: unknown, isJsonText: boolean): string {
  if (value === null) return 'null';
  if (isJsonText && typeof value === 'string') return value;
  return JSON.stringify(value);
}
