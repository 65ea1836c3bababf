import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';

/** Regions a new organisation's data may live in (the spec leaves the list open; docs/decisions.md). */
export const REGIONS = ['eu-west', 'eu-central', 'uk-south', 'us-east', 'us-west', 'ca-central', 'ap-southeast', 'ap-northeast'] as const;
export const PLANS = ['developer', 'team', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export const tenantOut = z.object({
  id: z.uuid(),
  slug: z.string(),
  name: z.string(),
  primary_region: z.enum(REGIONS),
  plan: z.enum(PLANS),
  created_at: timestamp,
  updated_at: timestamp,
  version: z.number().int(),
});

export const onboardIn = z.object({
  name: z.string().trim().min(2).max(200),
  slug: z
    .string()
    .min(3)
    .max(63)
    .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, 'lower-case letters, digits and inner hyphens'),
  primary_region: z.enum(REGIONS),
  admin_display_name: z.string().trim().min(2).max(200),
});

export const tenantPatchIn = z.object({
  name: z.string().trim().min(2).max(200).nullable().optional(),
});
