import { sql, type Kysely } from 'kysely';

/**
 * Creates the non-owner runtime role when it is missing and the migrating role may create roles
 * (always true on the embedded database). On a managed PostgreSQL, create the login role beforehand.
 */
export async function createRuntimeRoleIfMissing(db: Kysely<unknown>, role: string): Promise<void> {
  const { rows } = await sql<{ exists: boolean }>`
    select exists (select 1 from pg_roles where rolname = ${role}) as exists`.execute(db);
  if (rows[0]?.exists) return;
  try {
    await sql`create role ${sql.id(role)} nologin`.execute(db);
  } catch (err) {
    throw new Error(
      `the runtime role "${role}" does not exist and could not be created (${(err as Error).message}); ` +
        `create it as a login role that owns nothing, or set DATABASE_RUNTIME_ROLE`,
    );
  }
}

/** Row-level security keyed on app.org_id, for tables whose every row belongs to one organisation. */
export async function enableOrgIsolation(db: Kysely<unknown>, tables: string[]): Promise<void> {
  for (const table of tables) {
    await sql`alter table ${sql.table(table)} enable row level security`.execute(db);
    await sql`create policy org_isolation on ${sql.table(table)}
      using (org_id = app_org_id()) with check (org_id = app_org_id())`.execute(db);
  }
}

/** Grants the runtime role exactly the statements it needs, table by table. */
export async function grantRuntime(
  db: Kysely<unknown>,
  role: string,
  grants: Record<string, string>,
): Promise<void> {
  await sql`grant usage on schema public to ${sql.id(role)}`.execute(db);
  for (const [table, privileges] of Object.entries(grants)) {
    if (!/^[a-z, ]+$/.test(privileges)) throw new Error(`bad privilege list ${privileges}`);
    await sql`grant ${sql.raw(privileges)} on ${sql.table(table)} to ${sql.id(role)}`.execute(db);
  }
}

/** Runs DDL statements one by one (the embedded database prepares each statement on its own). */
export async function run(db: Kysely<unknown>, statements: string[]): Promise<void> {
  for (const statement of statements) await sql.raw(statement).execute(db);
}
