/** The tenants module's public face: organisations, their plans and settings, and who belongs to them. */
export { checkAgentAllowed } from './plans.js';
export {
  getOrganisation,
  insertMembership,
  memberOrganisationWithSlug,
  organisationsOf,
  organisationWithTenants,
  toTenant,
  type OrganisationRow,
} from './tenants.repository.js';
export { changePlan, createOrganisation, findOrganisation, PlanChangeError, updateOrganisation } from './tenants.service.js';
export { PLANS, tenantOut, type Plan } from './tenants.schemas.js';
