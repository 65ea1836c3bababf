import swagger, { type SwaggerTransform } from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { ifMatchHeaders } from './if-match.js';

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
        description: [
          'Governance control plane for AI agents. Each operation names its caller in x-tollgate-caller: a permission, or `signed in`, `agent`, `client`, `onboarding`, `public`. Operations outside the spec\'s list carry x-tollgate-extension: true.',
          'Paged lists take `limit` and an opaque `cursor`: send back the `next_cursor` of the previous page of the same list, unchanged; any other value answers 422 invalid_cursor.',
          'Operations that declare an If-Match header check it against the record\'s `version`: a stale one answers 409 version_conflict, and where the header is required a missing one answers 428 precondition_required.',
          'Containment and other high-impact operations take `reason` and `confirm`: they run only with `confirm: true`; otherwise they answer 422 confirmation_required and change nothing.',
          'Every error answers with the envelope {error: {code, message, correlation_id, details}}.',
        ].join('\n\n'),
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
              "A service account's token from POST /service-accounts/token, without a session cookie and without CSRF header. Operations that are a person's own or need a person (sessions, notifications, approvals, actions, policy publishing, exception decisions) answer 403.",
          },
        },
      },
    },
    stripBasePath: true,
    transform: withIfMatch,
  });
}

type JsonSchema = Record<string, unknown> & { properties?: Record<string, unknown>; required?: string[] };

/**
 * The zod transform, then If-Match: the header is named as HTTP writes it, and where the operation
 * requires it (`ifMatchHeaders.required`) the parameter is required and the 428 answer declared.
 * Validation keeps the header optional so that a missing one answers 428 rather than 422; only the
 * document says required.
 */
const withIfMatch: SwaggerTransform<FastifySchema> = (input) => {
  const out = jsonSchemaTransform(input as Parameters<typeof jsonSchemaTransform>[0]);
  const given = input.schema?.headers;
  if (given !== ifMatchHeaders.required && given !== ifMatchHeaders.optional) return out;
  const schema = out.schema as { headers?: JsonSchema; response?: Record<string, JsonSchema> };
  const headers = schema.headers;
  if (!headers?.properties?.['if-match']) return out;
  const { 'if-match': ifMatch, ...others } = headers.properties;
  // The loose object's additionalProperties says nothing a client needs; the other headers are the
  // security schemes' and HTTP's own.
  const { additionalProperties: _loose, ...rest } = headers;
  const required = given === ifMatchHeaders.required;
  schema.headers = {
    ...rest,
    properties: { ...others, 'If-Match': ifMatch },
    ...(required ? { required: [...(headers.required ?? []).filter((h) => h !== 'if-match'), 'If-Match'] } : {}),
  };
  const envelope = schema.response?.['4XX'];
  if (required && envelope) {
    // Integer keys come first in a JavaScript object: 428 lands after the success status, before 4XX.
    const missing = { ...envelope, description: 'precondition_required: If-Match is missing; read the record and send its `version`.' };
    schema.response = { ...schema.response, 428: missing };
  }
  return out;
};
