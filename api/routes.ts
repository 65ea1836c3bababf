import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { caller } from './platform/route.js';
import { agentsRoutes } from './modules/agents/agents.routes.js';
import { bindingsRoutes } from './modules/agents/bindings.routes.js';
import { containmentRoutes } from './modules/agents/containment.routes.js';
import { approvalsRoutes } from './modules/approvals/approvals.routes.js';
import { auditRoutes } from './modules/audit/audit.routes.js';
import { evidenceRoutes } from './modules/evidence/evidence.routes.js';
import { findingsRoutes } from './modules/findings/findings.routes.js';
import { authzenRoutes } from './modules/gateway/authzen.routes.js';
import { extAuthzRoutes } from './modules/gateway/ext-authz.routes.js';
import { gatewayRoutes } from './modules/gateway/gateway.routes.js';
import { graphRoutes } from './modules/graph/graph.routes.js';
import { identitiesRoutes } from './modules/identities/identities.routes.js';
import { integrationsRoutes } from './modules/integrations/integrations.routes.js';
import { inventoryRoutes } from './modules/inventory/inventory.routes.js';
import { authRoutes } from './modules/auth/auth.routes.js';
import { signupRoutes } from './modules/auth/signup.routes.js';
import { policiesRoutes } from './modules/policies/policies.routes.js';
import { riskRoutes } from './modules/risk/risk.routes.js';
import { notificationsRoutes } from './modules/notifications/notifications.routes.js';
import { rolesRoutes } from './modules/roles/roles.routes.js';
import { serviceAccountsRoutes } from './modules/service-accounts/service-accounts.routes.js';
import { settingsRoutes } from './modules/settings/settings.routes.js';
import { tenantsRoutes } from './modules/tenants/tenants.routes.js';
import { telemetryRoutes } from './modules/telemetry/telemetry.routes.js';
import { dashboardRoutes } from './modules/dashboard/dashboard.routes.js';
import { governanceRoutes } from './modules/governance/governance.routes.js';
import { reportsRoutes } from './modules/reports/reports.routes.js';
import { publicRoutes } from './modules/public/public.routes.js';
import { usersRoutes } from './modules/users/users.routes.js';

/** Every operation under /api/v1, one module a group. */
export async function apiRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/openapi.json',
    {
      ...caller('public'),
      schema: {
        summary: 'This OpenAPI 3.1 document',
        tags: ['Service'],
        response: { 200: z.record(z.string(), z.unknown()).describe('OpenAPI 3.1 document') },
      },
    },
    async () => app.swagger(),
  );
  await app.register(authRoutes);
  await app.register(signupRoutes);
  await app.register(tenantsRoutes);
  await app.register(usersRoutes);
  await app.register(rolesRoutes);
  await app.register(settingsRoutes);
  await app.register(notificationsRoutes);
  await app.register(auditRoutes);
  await app.register(agentsRoutes);
  await app.register(containmentRoutes);
  await app.register(bindingsRoutes);
  await app.register(identitiesRoutes);
  await app.register(serviceAccountsRoutes);
  await app.register(inventoryRoutes);
  await app.register(graphRoutes);
  await app.register(findingsRoutes);
  await app.register(riskRoutes);
  await app.register(telemetryRoutes);
  await app.register(evidenceRoutes);
  await app.register(gatewayRoutes);
  await app.register(authzenRoutes);
  await app.register(extAuthzRoutes);
  await app.register(approvalsRoutes);
  await app.register(policiesRoutes);
  await app.register(integrationsRoutes);
  await app.register(dashboardRoutes);
  await app.register(governanceRoutes);
  await app.register(reportsRoutes);
  await app.register(publicRoutes);
}
