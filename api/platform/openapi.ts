import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';

export const API_PREFIX = '/api/v1';
export const API_VERSION = '0.1.0';

/**
 * The OpenAPI 3.1 document is generated from the zod schemas of the routes that exist, so it lists
 * exactly what is implemented. docs/openapi.json is the checked-in copy (npm run gen:openapi).
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tollgate API',
        version: API_VERSION,
        description:
          'Governance control plane for AI agents. Each operation names its caller in x-tollgate-caller: a permission, or `signed in`, `agent`, `client`, `onboarding`, `public`. Operations outside the spec\'s list carry x-tollgate-extension: true.',
      },
      servers: [{ url: API_PREFIX }],
      components: {
        securitySchemes: {
          session: { type: 'apiKey', in: 'cookie', name: 'tollgate_session' },
          csrf: { type: 'apiKey', in: 'header', name: 'X-CSRF-Token' },
          service_token: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              "A service account's token from POST /service-accounts/token, without a session cookie and without CSRF header. Operations that are a person's own or need a person (sessions, notifications, approvals, actions, policy publishing) answer 403.",
          },
        },
      },
    },
    stripBasePath: true,
    transform: jsonSchemaTransform,
  });
}
