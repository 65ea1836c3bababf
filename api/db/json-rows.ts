import { sql, type InsertQueryBuilder, type InsertResult, type QueryCreator } from 'kysely';
import type { DB } from './schema.js';

/** Rows as insertJsonRows takes them: the columns every row sets, and the rows as one JSON array. */
export interface JsonRows {
  columns: string[];
  document: string;
}

/**
 * `objects` as one JSON document (one native JSON.stringify) and the columns they set; undefined when there
 * are none, or when they do not all set the same columns (a column a row leaves out would be null rather
 * than its default): insert those as values.
 */
export function jsonRows(objects: readonly object[]): JsonRows | undefined {
  const rows = objects as ReadonlyArray<Record<string, unknown>>;
  const first = rows[0];
  if (!first) return undefined;
  const columns = Object.keys(first).filter((c) => first[c] !== undefined);
  for (const row of rows) {
    let set = 0;
    for (const c in row) if (row[c] !== undefined) set++;
    if (set !== columns.length || columns.some((c) => row[c] === undefined)) return undefined;
  }
  return { columns, document: JSON.stringify(rows) };
}

/**
 * An insert of the rows of `document` (a JSON array of objects, jsonRows) into `columns`, sent as one
 * parameter that `jsonb_populate_recordset` turns into the table's rows, instead of a parameter per value:
 * the statement's text is the same whatever the number of rows, so PostgreSQL can keep it planned
 * (`prepared`). Values convert to the columns' types as that function converts them (uuids, numbers,
 * timestamps from the ISO strings dates become, arrays from JSON arrays). `jsonText` names the jsonb
 * columns whose values are JSON text already (as the gateway's rows hold them): they travel as JSON
 * strings and are parsed by the statement. `document` is only a parameter: a stand-in for it
 * (`preparedShape`) builds the same text.
 */
export function insertJsonRows<T extends keyof DB & string>(
  db: QueryCreator<DB>,
  table: T,
  columns: readonly string[],
  document: unknown,
  jsonText: readonly string[] = [],
): InsertQueryBuilder<DB, T, InsertResult> {
  const selected = sql.join(columns.map((c) => (jsonText.includes(c) ? sql`(${sql.ref(c)} #>> '{}')::jsonb` : sql.ref(c))));
  const insert = db
    .insertInto(table)
    .columns(columns as never)
    .expression(sql`select ${selected} from jsonb_populate_recordset(null::${sql.table(table)}, ${document}::jsonb)`);
  return insert as unknown as InsertQueryBuilder<DB, T, InsertResult>;
}

/** insertJsonRows of `objects`; undefined where jsonRows is. */
export function insertAsJson<T extends keyof DB & string>(
  db: QueryCreator<DB>,
  table: T,
  objects: readonly object[],
  jsonText: readonly string[] = [],
): InsertQueryBuilder<DB, T, InsertResult> | undefined {
  const rows = jsonRows(objects);
  return rows && insertJsonRows(db, table, rows.columns, rows.document, jsonText);
}
