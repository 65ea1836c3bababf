/** The tenants module's public face: organisations, their plans and settings, and who belongs to them. */
export { checkAgentAllowed } from './plans.js';
export {
  getOrganisation,
  insertMembership,
  memberOrganisationWithSlug,
  organisationsOf,
  toTenant,
  type OrganisationRow,
} from './tenants.repository.js';
export { createOrganisation, findOrganisation, updateOrganisation } from './tenants.service.js';
export { tenantOut } from './tenants.schemas.js';
