import { z } from 'zod';

/** Shapes shared by every module. */
export const uuid = z.uuid();
export const email = z.email().max(254);
export const timestamp = z.iso.datetime({ offset: true });
export const iso = (d: Date | string) => (d instanceof Date ? d : new Date(d)).toISOString();

export const errorEnvelope = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    correlation_id: z.string(),
    details: z.unknown(),
  }),
});

/** Escapes LIKE wildcards in a user's search text. */
export const likePattern = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export const isUniqueViolation = (err: unknown) => (err as { code?: string } | null)?.code === '23505';
