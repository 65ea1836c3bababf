import { jsonArrayFrom } from 'kysely/helpers/postgres';
import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { MembershipsTable, OrganisationsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { PLANS, REGIONS } from './tenants.schemas.js';

export type OrganisationRow = Selectable<OrganisationsTable>;

/** Reads the organisation; `lock` holds the row for an update in the same transaction. */
export function getOrganisation(tx: Tx, orgId: string, lock = false) {
  const q = tx.selectFrom('organisations').selectAll().where('id', '=', orgId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/**
 * The organisation with `slug`, locked, on a connection that sees every organisation (the schema
 * owner's, for an operator's command): under row-level security the runtime role sees none by slug.
 */
export function organisationWithSlugForUpdate(tx: Tx, slug: string) {
  return tx.selectFrom('organisations').selectAll().where('slug', '=', slug).forUpdate().executeTakeFirst();
}

/** Whether this connection's role may act on every organisation (owns the table, or is a superuser). */
export async function seesEveryOrganisation(tx: Tx): Promise<boolean> {
  const { rows } = await sql<{ ok: boolean }>`
    select coalesce((select tableowner = current_user from pg_tables where schemaname = 'public' and tablename = 'organisations'), false)
      or (select rolsuper from pg_roles where rolname = current_user) as ok`.execute(tx);
  return rows[0]?.ok === true;
}

export function insertOrganisation(tx: Tx, values: Insertable<OrganisationsTable>): Promise<OrganisationRow> {
  return tx.insertInto('organisations').values(values).returningAll().executeTakeFirstOrThrow();
}

export function updateOrganisationRow(tx: Tx, orgId: string, values: Updateable<OrganisationsTable>): Promise<OrganisationRow> {
  return tx.updateTable('organisations').set(values).where('id', '=', orgId).returningAll().executeTakeFirstOrThrow();
}

/**
 * Makes a person a member of the organisation. Here rather than in the users module because an
 * organisation is created with its first member, and the tenants module sits below users.
 */
export async function insertMembership(tx: Tx, values: Insertable<MembershipsTable>): Promise<void> {
  await tx.insertInto('memberships').values(values).execute();
}

/** The active organisations a person belongs to, oldest membership first. */
export function organisationsOf(tx: Tx, userId: string) {
  return tx
    .selectFrom('memberships')
    .innerJoin('organisations', 'organisations.id', 'memberships.org_id')
    .select(['organisations.id', 'organisations.slug', 'organisations.name', 'memberships.roles'])
    .where('memberships.user_id', '=', userId)
    .where('memberships.status', '=', 'active')
    .orderBy('memberships.created_at')
    .execute();
}

/**
 * The organisation with this slug among those the person belongs to, in a transaction scoped to the
 * person alone: row-level security then shows that person's memberships only.
 */
export function memberOrganisationWithSlug(tx: Tx, slug: string) {
  return tx
    .selectFrom('memberships')
    .innerJoin('organisations', 'organisations.id', 'memberships.org_id')
    .select('organisations.id')
    .where('organisations.slug', '=', slug)
    .executeTakeFirst();
}

export function toTenant(o: OrganisationRow) {
  return {
    id: o.id,
    slug: o.slug,
    name: o.name,
    primary_region: o.primary_region as (typeof REGIONS)[number],
    plan: o.plan as (typeof PLANS)[number],
    created_at: iso(o.created_at),
    updated_at: iso(o.updated_at),
    version: o.version,
  };
}

/** The organisation with the active organisations of the person, oldest membership first, in one statement. */
export function organisationWithTenants(db: Db | Tx, orgId: string, userId: string) {
  return db
    .selectFrom('organisations')
    .selectAll('organisations')
    .select((eb) =>
      jsonArrayFrom(
        eb
          .selectFrom('memberships')
          .innerJoin('organisations as o', 'o.id', 'memberships.org_id')
          .select(['o.id', 'o.slug', 'o.name', 'memberships.roles'])
          .where('memberships.user_id', '=', userId)
          .where('memberships.status', '=', 'active')
          .orderBy('memberships.created_at'),
      ).as('tenants'),
    )
    .where('organisations.id', '=', orgId);
}
