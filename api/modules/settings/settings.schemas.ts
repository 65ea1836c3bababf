import { z } from 'zod';

/** How much of an action's parameters and output Tollgate keeps (spec: Shared enumerations; docs/decisions.md). */
export const CONTENT_RETENTION = ['metadata_only', 'redacted_excerpts'] as const;

export const settingsOut = z.object({
  content_retention: z.enum(CONTENT_RETENTION),
  approval_ttl_seconds: z.number().int(),
  owners_count_as_self: z.boolean(),
  version: z.number().int(),
});
export const settingsIn = z.object({
  content_retention: z.enum(CONTENT_RETENTION).nullable().optional(),
  approval_ttl_seconds: z.number().int().min(60).max(86400).nullable().optional(),
  owners_count_as_self: z
    .boolean()
    .nullable()
    .optional()
    .describe("an agent's owners may not approve its actions (opt-in)"),
});
