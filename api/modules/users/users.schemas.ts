import { z } from 'zod';
import { email, timestamp } from '../../platform/schemas.js';
import { ROLE_KEYS } from '../roles/index.js';

const role = z.enum(ROLE_KEYS);

export const userOut = z.object({
  id: z.uuid(),
  email: z.string(),
  display_name: z.string(),
  roles: z.array(z.string()),
  status: z.enum(['active', 'disabled']),
  created_at: timestamp,
  updated_at: timestamp,
  version: z.number().int(),
});

export const userIn = z.object({
  email,
  display_name: z.string().trim().min(2).max(200),
  roles: z.array(role).max(ROLE_KEYS.length),
});

export const userPatchIn = z.object({
  roles: z.array(role).max(ROLE_KEYS.length).nullable().optional(),
  status: z.enum(['active', 'disabled']).nullable().optional(),
  display_name: z.string().trim().min(2).max(200).nullable().optional(),
});

export const usersQuery = z.object({ q: z.string().max(200).optional() });
export const userParams = z.object({ user_id: z.uuid() });
