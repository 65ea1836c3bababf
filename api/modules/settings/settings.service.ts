import { inScope, type Db } from '../../db/database.js';
import { notFound } from '../../platform/errors.js';
import { getOrganisation, type OrganisationRow } from '../tenants/index.js';

/** The organisation whose settings these are; settings live on the organisation's row. */
export async function organisationSettings(db: Db, orgId: string): Promise<OrganisationRow> {
  const org = await inScope(db, { orgId }, (tx) => getOrganisation(tx, orgId));
  if (!org) throw notFound();
  return org;
}
