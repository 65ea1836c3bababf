import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  api,
  Client,
  expectValidation,
  onboardAdmin,
  startTestApp,
  type TestApp,
} from '../support/harness.js';

/**
 * Roles and the permission catalogue (GET /roles, GET /roles/permissions; role:read) and the
 * organisation's settings (GET /settings, settings:read; PATCH /settings, settings:manage).
 */

type Res = { statusCode: number; json(): any; headers: Record<string, unknown> };

/** The spec's "Permissions named", in its order (behaviour.md, Authentication). */
const SPEC_PERMISSIONS = [
  'tenant:read',
  'tenant:manage',
  'role:read',
  'settings:read',
  'settings:manage',
  'user:read',
  'user:manage',
  'agent:read',
  'agent:write',
  'agent:control',
  'identity:read',
  'identity:manage',
  'inventory:read',
  'inventory:write',
  'inventory:control',
  'integration:read',
  'integration:manage',
  'connector:run',
  'graph:read',
  'graph:export',
  'risk:read',
  'risk:configure',
  'finding:read',
  'finding:write',
  'telemetry:read',
  'policy:read',
  'policy:write',
  'policy:publish',
  'action:read',
  'action:control',
  'action:test',
  'approval:read',
  'approval:decide',
  'audit:read',
  'evidence:read',
  'governance:read',
  'governance:write',
  'exception:approve',
  'report:read',
  'report:create',
];

const ROLE_KEYS = ['org_admin', 'security_admin', 'approver', 'agent_developer', 'auditor', 'viewer', 'controller'] as const;
const MEMBER_ROLES = ['security_admin', 'approver', 'agent_developer', 'auditor', 'viewer', 'controller'] as const;
type MemberRole = (typeof MEMBER_ROLES)[number];

const correlation = (prefix: string) => `${prefix}-${randomBytes(8).toString('hex')}`;

function expectUnauthenticated(res: Res) {
  expect(res.statusCode).toBe(401);
  expect(res.json().error.code).toBe('unauthenticated');
}

function expectForbidden(res: Res, permission: string) {
  expect(res.statusCode).toBe(403);
  expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: permission } });
}

/** Runs one statement as the schema owner, for states no operation of the API produces. */
async function asOwner(t: TestApp, text: string, values: unknown[]) {
  const c = new pg.Client({ connectionString: t.ownerUrl });
  await c.connect();
  try {
    await c.query(text, values);
  } finally {
    await c.end();
  }
}

describe('roles and settings', () => {
  let t: TestApp;
  let org: Awaited<ReturnType<typeof onboardAdmin>>;
  const members = {} as Record<MemberRole, { client: Client; userId: string; email: string }>;
  /** A member whose membership holds no role at all: every built-in role grants role:read. */
  let roleless: { client: Client; userId: string };

  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    org = await onboardAdmin(t.app, 'Roles Org');
    for (const role of MEMBER_ROLES) members[role] = await addMember(t.app, org.client, [role]);
    const m = await addMember(t.app, org.client, ['viewer']);
    await asOwner(t, `update memberships set roles = '{}' where org_id = $1 and user_id = $2`, [org.tenant.id, m.userId]);
    roleless = m;
  });
  afterAll(async () => t.close());

  describe('GET /roles', () => {
    it('lists the built-in roles, each with permissions from the catalogue', async () => {
      const res = await org.client.get(api('/roles'));
      expect(res.statusCode).toBe(200);
      const items = res.json().items as Array<{ key: string; name: string; description: string; permissions: string[] }>;
      expect(items.map((r) => r.key).sort()).toEqual([...ROLE_KEYS].sort());
      for (const r of items) {
        expect(r.name.length, r.key).toBeGreaterThan(0);
        expect(r.description.length, r.key).toBeGreaterThan(0);
        expect(r.permissions.length, r.key).toBeGreaterThan(0);
        for (const p of r.permissions) expect(SPEC_PERMISSIONS, `${r.key} holds ${p}`).toContain(p);
        expect(new Set(r.permissions).size, r.key).toBe(r.permissions.length);
      }
      const byKey = Object.fromEntries(items.map((r) => [r.key, r]));
      expect([...byKey.org_admin!.permissions].sort()).toEqual([...SPEC_PERMISSIONS].sort());
      expect(byKey.org_admin!.permissions).toContain('policy:publish');
      expect(byKey.security_admin!.permissions).toContain('policy:publish');
      // The auditor is read-only: it manages nothing and decides nothing.
      for (const p of byKey.auditor!.permissions) expect(p).not.toMatch(/:(manage|write|control|decide|publish|approve|run)$/);
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/roles')));
    });

    it.each(MEMBER_ROLES)('answers 200 to a %s (every built-in role holds role:read)', async (role) => {
      expect((await members[role].client.get(api('/roles'))).statusCode).toBe(200);
    });

    it('answers 403 forbidden naming role:read to a member without role:read', async () => {
      expectForbidden(await roleless.client.get(api('/roles')), 'role:read');
    });

    it.each(ROLE_KEYS)("grants a %s exactly the permissions /roles lists for it (GET /auth/me)", async (role) => {
      const listed = (await org.client.get(api('/roles'))).json().items.find((r: { key: string }) => r.key === role);
      const client = role === 'org_admin' ? org.client : members[role].client;
      const me = (await client.get(api('/auth/me'))).json();
      expect(me.roles).toEqual([role]);
      expect([...me.permissions].sort()).toEqual([...listed.permissions].sort());
    });
  });

  describe('GET /roles/permissions', () => {
    it("serves the spec's 40 permissions, each described", async () => {
      const res = await org.client.get(api('/roles/permissions'));
      expect(res.statusCode).toBe(200);
      const permissions = res.json().permissions as Array<{ key: string; description: string }>;
      expect(SPEC_PERMISSIONS).toHaveLength(40);
      expect(permissions).toHaveLength(40);
      expect(permissions.map((p) => p.key).sort()).toEqual([...SPEC_PERMISSIONS].sort());
      for (const p of permissions) expect(p.description.length, p.key).toBeGreaterThan(0);
    });

    it('serves a role matrix that matches GET /roles, in which both administrators can publish policies', async () => {
      const { matrix } = (await org.client.get(api('/roles/permissions'))).json() as { matrix: Record<string, string[]> };
      const roles = (await org.client.get(api('/roles'))).json().items as Array<{ key: string; permissions: string[] }>;
      expect(Object.keys(matrix).sort()).toEqual(roles.map((r) => r.key).sort());
      for (const r of roles) expect([...matrix[r.key]!].sort(), r.key).toEqual([...r.permissions].sort());
      expect(matrix.org_admin).toContain('policy:publish');
      expect(matrix.security_admin).toContain('policy:publish');
      for (const [role, held] of Object.entries(matrix)) {
        for (const p of held) expect(SPEC_PERMISSIONS, `${role} holds ${p}`).toContain(p);
      }
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/roles/permissions')));
    });

    it.each(MEMBER_ROLES)('answers 200 to a %s', async (role) => {
      expect((await members[role].client.get(api('/roles/permissions'))).statusCode).toBe(200);
    });

    it('answers 403 forbidden naming role:read to a member without role:read', async () => {
      expectForbidden(await roleless.client.get(api('/roles/permissions')), 'role:read');
    });
  });

  describe('GET /settings', () => {
    it('starts with approval_ttl_seconds 900 and a known content_retention', async () => {
      const a = await onboardAdmin(t.app, 'Fresh Settings Org');
      const res = await a.client.get(api('/settings'));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ approval_ttl_seconds: 900, version: expect.any(Number) });
      expect(['metadata_only', 'redacted_excerpts']).toContain(res.json().content_retention);
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/settings')));
    });

    it.each([
      ['security_admin', 200],
      ['agent_developer', 200],
      ['auditor', 200],
      ['approver', 403],
      ['viewer', 403],
    ] as const)('as %s answers %i (settings:read)', async (role, status) => {
      const res = await members[role].client.get(api('/settings'));
      if (status === 403) expectForbidden(res, 'settings:read');
      else expect(res.json()).toEqual((await org.client.get(api('/settings'))).json());
    });
  });

  describe('PATCH /settings', () => {
    it.each(['metadata_only', 'redacted_excerpts'])('sets content_retention %s', async (value) => {
      const a = await onboardAdmin(t.app, 'Retention Org');
      const res = await a.client.patch(api('/settings'), { content_retention: value });
      expect(res.statusCode).toBe(200);
      expect(res.json().content_retention).toBe(value);
      expect((await a.client.get(api('/settings'))).json().content_retention).toBe(value);
    });

    it.each([60, 86400, 3600])('accepts approval_ttl_seconds %i', async (ttl) => {
      const a = await onboardAdmin(t.app, 'TTL Org');
      const res = await a.client.patch(api('/settings'), { approval_ttl_seconds: ttl });
      expect(res.statusCode).toBe(200);
      expect(res.json().approval_ttl_seconds).toBe(ttl);
      expect((await a.client.get(api('/settings'))).json().approval_ttl_seconds).toBe(ttl);
    });

    it('leaves fields sent as null or left out as they were, and bumps the version on a change', async () => {
      const a = await onboardAdmin(t.app, 'Null Org');
      const before = (await a.client.get(api('/settings'))).json();
      const res = await a.client.patch(api('/settings'), { content_retention: null, approval_ttl_seconds: 1200 });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        content_retention: before.content_retention,
        approval_ttl_seconds: 1200,
        version: before.version + 1,
      });
      const res2 = await a.client.patch(api('/settings'), { approval_ttl_seconds: null });
      expect(res2.json()).toMatchObject({ content_retention: before.content_retention, approval_ttl_seconds: 1200 });
    });

    it("changes only the caller's organisation", async () => {
      const a = await onboardAdmin(t.app, 'Settings A');
      const b = await onboardAdmin(t.app, 'Settings B');
      const bBefore = (await b.client.get(api('/settings'))).json();
      expect((await a.client.patch(api('/settings'), { approval_ttl_seconds: 61, content_retention: 'metadata_only' })).statusCode).toBe(200);
      expect((await b.client.get(api('/settings'))).json()).toEqual(bBefore);
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).patch(api('/settings'), { approval_ttl_seconds: 120 }));
    });

    it.each(MEMBER_ROLES)('answers 403 forbidden naming settings:manage to a %s, and changes nothing', async (role) => {
      const before = (await org.client.get(api('/settings'))).json();
      const res = await members[role].client.patch(api('/settings'), { approval_ttl_seconds: before.approval_ttl_seconds + 1 });
      expectForbidden(res, 'settings:manage');
      expect((await org.client.get(api('/settings'))).json()).toEqual(before);
    });

    it.each([
      ['approval_ttl_seconds', 59],
      ['approval_ttl_seconds', 86401],
      ['approval_ttl_seconds', 0],
      ['approval_ttl_seconds', -900],
      ['approval_ttl_seconds', 90.5],
      ['approval_ttl_seconds', '600'],
      ['approval_ttl_seconds', true],
      ['content_retention', 'forever'],
      ['content_retention', ''],
      ['content_retention', 'FULL'],
      ['content_retention', 3],
    ])('answers 422 naming %s for %j, and changes nothing', async (field, value) => {
      const before = (await org.client.get(api('/settings'))).json();
      expectValidation(await org.client.patch(api('/settings'), { [field]: value }), field);
      expect((await org.client.get(api('/settings'))).json()).toEqual(before);
    });

    it('answers 409 version_conflict for a stale If-Match and 200 for the current one', async () => {
      const a = await onboardAdmin(t.app, 'IfMatch Settings Org');
      const { version } = (await a.client.get(api('/settings'))).json();
      const stale = await a.client.patch(api('/settings'), { approval_ttl_seconds: 300 }, { 'if-match': String(version + 1) });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error.code).toBe('version_conflict');
      expect((await a.client.get(api('/settings'))).json().approval_ttl_seconds).toBe(900);

      const ok = await a.client.patch(api('/settings'), { approval_ttl_seconds: 300 }, { 'if-match': `"${version}"` });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toMatchObject({ approval_ttl_seconds: 300, version: version + 1 });

      const again = await a.client.patch(api('/settings'), { approval_ttl_seconds: 400 }, { 'if-match': String(version) });
      expect(again.statusCode).toBe(409);
      expect(again.json().error.code).toBe('version_conflict');
      expectValidation(await a.client.patch(api('/settings'), { approval_ttl_seconds: 400 }, { 'if-match': 'yesterday' }), 'header.if-match');
    });

    it("audits settings.updated with what changed and the request's X-Correlation-ID", async () => {
      const a = await onboardAdmin(t.app, 'Settings Audit Org');
      const before = (await a.client.get(api('/settings'))).json();
      const target = before.content_retention === 'metadata_only' ? 'redacted_excerpts' : 'metadata_only';
      const corr = correlation('settings');
      const res = await a.client.patch(
        api('/settings'),
        { approval_ttl_seconds: 7200, content_retention: target },
        { 'x-correlation-id': corr },
      );
      expect(res.statusCode).toBe(200);
      const entries = (await a.client.get(api('/audit?action=settings.updated'))).json().items;
      expect(entries).toEqual([
        expect.objectContaining({
          action: 'settings.updated',
          outcome: 'success',
          correlation_id: corr,
          actor: { type: 'person', id: a.userId },
          target_id: a.tenant.id,
          details: expect.objectContaining({
            approval_ttl_seconds: { from: 900, to: 7200 },
            content_retention: { from: before.content_retention, to: target },
          }),
        }),
      ]);
    });
  });
});
