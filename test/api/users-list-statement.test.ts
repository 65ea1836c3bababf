import { randomUUID } from 'node:crypto';
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DB } from '../../api/db/schema.js';
import { listMembers, listMembersStatement } from '../../api/modules/users/users.repository.js';

/**
 * GET /users runs listMembers as a statement compiled once per shape and bound to each request's values
 * (listMembersStatement). It must be exactly what kysely compiles for those values: the same text and the same
 * parameters in the same order, for every shape, whatever the values (the ones that need escaping included).
 * test/api/users.test.ts drives the same statement through the API on PostgreSQL (search, every page of a cursor).
 */
const db = new Kysely<DB>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (k) => new PostgresIntrospector(k),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

describe('the users list statement compiled once', () => {
  const shapes = [
    { name: 'a first page', opts: { limit: 50 } },
    { name: 'a search', opts: { q: "o'brien 100%_\\", limit: 1 } },
    { name: 'a later page', opts: { after: { t: '2026-11-23T09:00:00.123Z', id: randomUUID() }, limit: 200 } },
    { name: 'a later page of a search', opts: { q: 'ada', after: { t: '2026-11-23T09:00:00.000Z', id: randomUUID() }, limit: 20 } },
  ];

  it.each(shapes)('is what kysely compiles for $name, with any values', ({ opts }) => {
    for (let i = 0; i < 3; i++) {
      const orgId = randomUUID();
      const values = { ...opts, limit: opts.limit + i, ...(opts.q ? { q: `${opts.q}${i}` } : {}) };
      const expected = listMembers(db, orgId, values).compile();
      const bound = listMembersStatement(db, orgId, values);
      expect(bound.sql).toBe(expected.sql);
      expect(bound.parameters).toEqual(expected.parameters);
    }
  });

  it('keeps one text per shape: a later call of another shape does not change an earlier one', () => {
    const orgId = randomUUID();
    const texts = shapes.map(({ opts }) => listMembersStatement(db, orgId, opts).sql);
    expect(new Set(texts).size).toBe(4);
    expect(shapes.map(({ opts }) => listMembersStatement(db, orgId, opts).sql)).toEqual(texts);
  });
});
