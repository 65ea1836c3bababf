import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { ROLE_KEYS } from '../roles/index.js';

/** Lower-case letters, digits and hyphens, starting and ending with a letter or digit. */
export const SERVICE_ACCOUNT_NAME = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

export const serviceAccountIn = z.object({
  name: z
    .string()
    .min(2)
    .max(100)
    .regex(SERVICE_ACCOUNT_NAME, 'lower-case letters, digits and hyphens, starting and ending with a letter or digit'),
  description: z.string().trim().max(2000).default(''),
  roles: z.array(z.enum(ROLE_KEYS)).min(1).max(ROLE_KEYS.length).default(['controller']),
});

export const serviceAccountOut = z.object({
  id: z.uuid(),
  name: z.string(),
  description: z.string(),
  roles: z.array(z.string()),
  client_id: z.string(),
  status: z.enum(['active', 'revoked']),
  previous_secret_valid_until: timestamp
    .nullable()
    .describe('until when the secret replaced by the last rotation is still accepted; null when none is'),
  created_by: z.uuid().nullable(),
  created_at: timestamp,
  last_used_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
});

/** The record with its secret: answered by creation and rotation only, once. */
export const serviceAccountWithSecret = serviceAccountOut.extend({
  client_secret: z.string().describe('shown this once; only a hash is kept'),
});

export const serviceAccountParams = z.object({ service_account_id: z.uuid() });

export const serviceAccountsQuery = z.object({ status: z.enum(['active', 'revoked']).optional() });

export const MAX_OVERLAP_SECONDS = 604_800;
export const DEFAULT_OVERLAP_SECONDS = 86_400;

export const rotateIn = z.object({
  overlap_seconds: z
    .number()
    .int()
    .min(0)
    .max(MAX_OVERLAP_SECONDS)
    .default(DEFAULT_OVERLAP_SECONDS)
    .describe('how long the replaced secret stays valid, in seconds (0: it stops at once)'),
});

export const revokeIn = z.object({ reason: z.string().trim().min(3).max(2000) });

export const serviceTokenIn = z.object({
  grant_type: z.literal('client_credentials'),
  client_id: z.string().max(80),
  client_secret: z.string().max(200),
});

export const serviceTokenOut = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
});
