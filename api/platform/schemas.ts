import { z } from 'zod';

/** Shapes shared by every module. */
export const uuid = z.uuid();
export const email = z.email().max(254);
export const timestamp = z.iso.datetime({ offset: true });

/**
 * A time a caller gives that is stored: within 1970-9999 once in UTC, so that it is stored and read back as the same
 * ISO text (an offset can push a year-0000 or year-9999 time outside the years four-digit ISO text can say).
 */
export const storedTimestamp = timestamp.refine((v) => {
  const t = Date.parse(v);
  return t >= 0 && t < Date.UTC(10000, 0, 1);
}, 'must fall between 1970 and 9999 (UTC)');
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
