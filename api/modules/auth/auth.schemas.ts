import { z } from 'zod';
import { email, timestamp } from '../../platform/schemas.js';
import { tenantOut } from '../tenants/index.js';

export const personOut = z.object({ id: z.uuid(), email: z.string(), display_name: z.string() });

export const devLoginIn = z.object({
  email,
  tenant_id: z.uuid().nullable().optional(),
});

export const devLoginOut = z.object({
  status: z.enum(['signed_in', 'onboarding']),
  user: personOut,
  tenant: tenantOut.nullable(),
  csrf_token: z.string(),
});

export const meOut = z.object({
  user: personOut,
  tenant: tenantOut,
  roles: z.array(z.string()),
  permissions: z.array(z.string()),
  tenants: z.array(z.object({ id: z.uuid(), slug: z.string(), name: z.string(), roles: z.array(z.string()) })),
  csrf_token: z.string(),
});

export const onboardingOut = z.object({
  user: personOut,
  expires_at: timestamp.nullable(),
  tenants: z.number().int(),
  csrf_token: z.string(),
});

export const providersOut = z.object({
  providers: z.array(
    z.object({ id: z.string(), kind: z.enum(['development', 'oidc']), name: z.string(), login_url: z.string() }),
  ),
  signup_enabled: z.boolean(),
});

export const switchTenantIn = z.object({ tenant_id: z.uuid() });

export const loginQuery = z.object({
  return_to: z
    .string()
    .max(2048)
    .nullable()
    .optional()
    .describe('where to go after signing in: a path on this service; anything else (another origin, //host, javascript:) becomes /'),
  signup: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe('ask the provider for its registration page (OpenID Connect prompt=create)'),
});

export const loginOut = z.object({
  authorization_url: z.url().describe("the provider's authorisation URL; the browser goes there"),
});

export const callbackQuery = z.object({
  code: z.string().max(4096).optional(),
  state: z.string().max(1024).optional(),
  error: z.string().max(1024).optional(),
  error_description: z.string().max(4096).optional(),
  iss: z.string().max(2048).optional(),
  session_state: z.string().max(1024).optional(),
});

export const callbackOut = z.object({
  status: z.enum(['signed_in', 'onboarding']),
  user: personOut,
  tenant: tenantOut.nullable(),
  csrf_token: z.string(),
  return_to: z.string().describe('the checked path to go to next'),
});

export const redirectOut = z.null().describe('a redirect: the Location header says where');
