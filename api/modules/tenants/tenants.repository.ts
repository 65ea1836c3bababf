import type { Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { OrganisationsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { PLANS, REGIONS } from './tenants.schemas.js';

export type OrganisationRow = Selectable<OrganisationsTable>;

/** Reads the organisation; `lock` holds the row for an update in the same transaction. */
export function getOrganisation(tx: Tx, orgId: string, lock = false) {
  const q = tx.selectFrom('organisations').selectAll().where('id', '=', orgId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
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
