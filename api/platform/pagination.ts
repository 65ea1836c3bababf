import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { ApiError } from './errors.js';

/** `limit` 1-200 and an opaque `cursor`, as every paged list of the spec takes. */
export function pageQuery(defaultLimit = 50) {
  return z.object({
    limit: z.coerce.number().int().min(1).max(200).default(defaultLimit).describe('Items on one page'),
    cursor: z
      .string()
      .min(1)
      .max(2048)
      .optional()
      .describe(
        'Opaque: the `next_cursor` of the previous page of this same list (same filters), sent back unchanged. ' +
          'Leave it out for the first page. Any other value, or a cursor of another list, answers 422 invalid_cursor.',
      ),
  });
}

export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    next_cursor: z.string().nullable().describe('The `cursor` of the next page, or null on the last page'),
  });
}

/** Keyset position: the sort time and id of the last item served. */
const positionSchema = z.object({ t: z.string(), id: z.string() });
export type Position = z.infer<typeof positionSchema>;

/**
 * Cursors are opaque and tamper-evident: the position plus an HMAC over it and the list it belongs
 * to (scope), so a forged, garbled or borrowed cursor answers 422 invalid_cursor.
 */
export class Cursors {
  private readonly key: Buffer;
  constructor(secret: string) {
    this.key = createHmac('sha256', secret).update('tollgate:cursor:v1').digest();
  }

  private mac(scope: string, body: string): Buffer {
    return createHmac('sha256', this.key).update(scope).update('\n').update(body).digest().subarray(0, 16);
  }

  encode(scope: string, position: Position): string {
    const body = Buffer.from(JSON.stringify(position)).toString('base64url');
    return `${body}.${this.mac(scope, body).toString('base64url')}`;
  }

  decode(scope: string, cursor: string | undefined): Position | undefined {
    if (cursor === undefined) return undefined;
    const [body, sig, ...rest] = cursor.split('.');
    if (!body || !sig || rest.length > 0) throw new ApiError('invalid_cursor');
    const given = Buffer.from(sig, 'base64url');
    const expected = this.mac(scope, body);
    // Re-encoding rejects strings that differ only in the unused bits of the last character.
    if (given.length !== expected.length || given.toString('base64url') !== sig || !timingSafeEqual(given, expected)) {
      throw new ApiError('invalid_cursor');
    }
    try {
      return positionSchema.parse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
    } catch {
      throw new ApiError('invalid_cursor');
    }
  }

  /** Rows were fetched with limit + 1; returns the page and the cursor to the next one. */
  page<R, T>(scope: string, rows: R[], limit: number, position: (row: R) => Position, toItem: (row: R) => T) {
    const more = rows.length > limit;
    const slice = more ? rows.slice(0, limit) : rows;
    const last = slice[slice.length - 1];
    return {
      items: slice.map(toItem),
      next_cursor: more && last !== undefined ? this.encode(scope, position(last)) : null,
    };
  }
}
