import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/platform/errors.js';
import { Cursors, pageQuery, type Position } from '../../api/platform/pagination.js';

/**
 * Paged lists (spec Conventions): cursors are opaque and tamper-evident; a forged,
 * garbled or borrowed cursor answers 422 invalid_cursor; next_cursor is set only when more rows exist.
 */

const SECRET = 'a-cursor-secret-of-some-length';
const SCOPE = 'users:7d1c9a52-3a3f-4a67-9d2e-3b0c8f2e1a10';
const position: Position = { t: '2026-11-23T09:00:00.000Z', id: '3f2b8c1e-0d6a-4a4e-9f3a-1b2c3d4e5f60' };

/** The code of the ApiError fn throws (failing on any other error), or undefined when it passes. */
function errorCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(422);
    return (err as ApiError).code;
  }
  return undefined;
}

const flipByte = (segment: string, index: number) => {
  const bytes = Buffer.from(segment, 'base64url');
  bytes[index] = bytes[index]! ^ 0x01;
  return bytes.toString('base64url');
};

describe('Cursors', () => {
  const cursors = new Cursors(SECRET);
  const good = cursors.encode(SCOPE, position);
  const [body, mac] = good.split('.') as [string, string];

  it('round-trips a position within its scope', () => {
    expect(cursors.decode(SCOPE, good)).toEqual(position);
    // Another instance with the same secret (another API process) reads it too.
    expect(new Cursors(SECRET).decode(SCOPE, good)).toEqual(position);
  });

  it('no cursor means the first page', () => {
    expect(cursors.decode(SCOPE, undefined)).toBeUndefined();
  });

  it('refuses a cursor with any one byte of its content flipped', () => {
    const n = Buffer.from(body, 'base64url').length;
    for (let i = 0; i < n; i++) expect(errorCode(() => cursors.decode(SCOPE, `${flipByte(body, i)}.${mac}`)), `byte ${i}`).toBe('invalid_cursor');
  });

  it('refuses a cursor with any one byte of its signature flipped', () => {
    const n = Buffer.from(mac, 'base64url').length;
    for (let i = 0; i < n; i++) expect(errorCode(() => cursors.decode(SCOPE, `${body}.${flipByte(mac, i)}`)), `byte ${i}`).toBe('invalid_cursor');
  });

  it.each([
    ['the last character cut off', good.slice(0, -1)],
    ['half of it', good.slice(0, Math.floor(good.length / 2))],
    ['the signature missing', body],
    ['the signature empty', `${body}.`],
    ['the content empty', `.${mac}`],
    ['a shortened signature', `${body}.${mac.slice(0, 10)}`],
  ])('refuses a truncated cursor: %s', (_what, cursor) => {
    expect(errorCode(() => cursors.decode(SCOPE, cursor))).toBe('invalid_cursor');
  });

  it.each([
    ['an extra segment', `${good}.x`],
    ['an extra empty segment', `${good}.`],
    ['the segments swapped', `${mac}.${body}`],
    ['an empty string', ''],
    ['a lone dot', '.'],
    ['plain text', 'page-2'],
    ['a number', '50'],
    ['the raw position', JSON.stringify(position)],
  ])('refuses %s', (_what, cursor) => {
    expect(errorCode(() => cursors.decode(SCOPE, cursor))).toBe('invalid_cursor');
  });

  it('refuses a cursor of another scope (another list or organisation)', () => {
    expect(errorCode(() => cursors.decode('users:another-organisation', good))).toBe('invalid_cursor');
    expect(errorCode(() => cursors.decode('audit:7d1c9a52-3a3f-4a67-9d2e-3b0c8f2e1a10', good))).toBe('invalid_cursor');
  });

  it('refuses a cursor signed with another secret', () => {
    const foreign = new Cursors('another-secret-entirely-1234').encode(SCOPE, position);
    expect(errorCode(() => cursors.decode(SCOPE, foreign))).toBe('invalid_cursor');
    expect(errorCode(() => new Cursors('another-secret-entirely-1234').decode(SCOPE, good))).toBe('invalid_cursor');
  });

  it('refuses a forged cursor: a changed position re-encoded without the secret', () => {
    const forgedBody = Buffer.from(JSON.stringify({ ...position, id: '00000000-0000-0000-0000-000000000000' })).toString('base64url');
    expect(errorCode(() => cursors.decode(SCOPE, `${forgedBody}.${mac}`))).toBe('invalid_cursor');
  });

  it('answers invalid_cursor, not a crash, for a correctly signed content that is not a position', () => {
    // What a cursor of an older format would look like: signed with the same key, another shape.
    const key = createHmac('sha256', SECRET).update('tollgate:cursor:v1').digest();
    const sign = (b: string) => createHmac('sha256', key).update(SCOPE).update('\n').update(b).digest().subarray(0, 16).toString('base64url');
    // The construction matches the one in use: a genuine cursor verifies with it.
    expect(sign(body)).toBe(mac);
    for (const content of ['not json', '{"t":1}', '[]', 'null']) {
      const b = Buffer.from(content).toString('base64url');
      expect(errorCode(() => cursors.decode(SCOPE, `${b}.${sign(b)}`)), content).toBe('invalid_cursor');
    }
  });

  describe('page()', () => {
    const rows = [1, 2, 3, 4].map((n) => ({ n, at: `2026-11-23T09:00:0${n}.000Z`, id: `id-${n}` }));
    const pos = (r: (typeof rows)[number]) => ({ t: r.at, id: r.id });
    const item = (r: (typeof rows)[number]) => ({ number: r.n });

    it('sets next_cursor when a row beyond the limit was fetched, pointing after the last item served', () => {
      const page = cursors.page(SCOPE, rows.slice(0, 3), 2, pos, item);
      expect(page.items).toEqual([{ number: 1 }, { number: 2 }]);
      expect(page.next_cursor).toEqual(expect.any(String));
      expect(cursors.decode(SCOPE, page.next_cursor!)).toEqual({ t: rows[1]!.at, id: 'id-2' });
      // It belongs to its list only.
      expect(errorCode(() => cursors.decode('other-list', page.next_cursor!))).toBe('invalid_cursor');
    });

    it('leaves next_cursor null when exactly the limit was fetched', () => {
      expect(cursors.page(SCOPE, rows.slice(0, 2), 2, pos, item)).toEqual({ items: [{ number: 1 }, { number: 2 }], next_cursor: null });
    });

    it('leaves next_cursor null when fewer rows than the limit exist, or none', () => {
      expect(cursors.page(SCOPE, rows.slice(0, 1), 2, pos, item)).toEqual({ items: [{ number: 1 }], next_cursor: null });
      expect(cursors.page(SCOPE, [], 2, pos, item)).toEqual({ items: [], next_cursor: null });
    });
  });
});

describe('pageQuery', () => {
  const q = pageQuery();

  it('takes limit 1-200 with default 50', () => {
    expect(q.parse({})).toEqual({ limit: 50 });
    expect(q.parse({ limit: '1' }).limit).toBe(1);
    expect(q.parse({ limit: '200' }).limit).toBe(200);
    for (const bad of ['0', '201', '-1', '2.5', 'ten']) expect(q.safeParse({ limit: bad }).success, bad).toBe(false);
  });

  it('takes another default where a list has one', () => {
    expect(pageQuery(20).parse({}).limit).toBe(20);
  });
});
