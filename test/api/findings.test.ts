import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { openFinding, type OpenFindingInput } from '../../api/modules/findings/index.js';
import { addMember, api, expectValidation, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * Findings on real PostgreSQL: detectors open them with openFinding in their own transaction (here the
 * test, as discovery's reconciliation would), people list, read and triage them through the API.
 */
describe('findings', () => {
  const clock = new TestClock();
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let agentId: string;
  type Name = 'poison' | 'changed' | 'attest' | 'wild';
  const ids = {} as Record<Name, string>;

  const open = (orgId: string, f: Partial<OpenFindingInput> & { dedupe_key: string }) =>
    inScope(t.database.db, { orgId }, (tx) =>
      openFinding(tx, orgId, {
        category: 'tool_poisoning',
        severity: 'high',
        title: 'A finding',
        description: 'Something to look at.',
        evidence: { quoted: 'ignore previous instructions' },
        ...f,
      }),
    );

  beforeAll(async () => {
    t = await startTestApp({ clock });
    admin = await onboardAdmin(t.app);
    agentId = (await admin.client.post(api('/agents'), { name: 'Found agent' })).json().id;
    const org = admin.tenant.id;
    // Oldest first, a second apart, so "newest first" is a known order.
    const seed: Array<[Name, Partial<OpenFindingInput> & { dedupe_key: string }]> = [
      ['poison', { dedupe_key: 'p1', title: 'Tool mail.send carries <IMPORTANT> tags', severity: 'critical' }],
      ['changed', { dedupe_key: 'c1', category: 'tool_definition_changed', severity: 'medium', title: 'Definition of crm.lookup changed' }],
      ['attest', { dedupe_key: 'a1', category: 'owner_attestation', severity: 'low', title: 'Agent without attested owner', agent_id: agentId }],
      ['wild', { dedupe_key: 'w1', category: 'tool_poisoning', severity: 'high', title: 'Literal 100%_sure match', description: 'Mentions SECRETS of other tools' }],
    ];
    for (const [name, f] of seed) {
      clock.advance(1);
      const r = await open(org, { ...f, now: clock.now() });
      expect(r.opened).toBe(true);
      ids[name] = r.id;
    }
  });
  afterAll(async () => t.close());

  const list = async (query = '') => {
    const res = await admin.client.get(api(`/findings${query}`));
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { items: Array<{ id: string; [k: string]: unknown }>; next_cursor: string | null };
  };
  const idsOf = (page: { items: Array<{ id: string }> }) => page.items.map((f) => f.id);

  describe('GET /findings', () => {
    it('lists the organisation’s findings newest first with every field', async () => {
      const page = await list();
      expect(idsOf(page)).toEqual([ids.wild, ids.attest, ids.changed, ids.poison]);
      expect(page.next_cursor).toBeNull();
      expect(page.items.find((f) => f.id === ids.attest)).toEqual({
        id: ids.attest,
        category: 'owner_attestation',
        severity: 'low',
        status: 'open',
        title: 'Agent without attested owner',
        description: 'Something to look at.',
        evidence: { quoted: 'ignore previous instructions' },
        agent_id: agentId,
        mcp_server_id: null,
        tool_id: null,
        run_id: null,
        assigned_to: null,
        note: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
        resolved_at: null,
        version: 1,
      });
    });

    it.each<[string, Name[]]>([
      ['?severity=critical', ['poison']],
      ['?severity=high', ['wild']],
      ['?category=tool_poisoning', ['wild', 'poison']],
      ['?category=tool', []],
      ['?status=open', ['wild', 'attest', 'changed', 'poison']],
      ['?status=in_progress', []],
      ['?q=important', ['poison']],
      ['?q=secrets', ['wild']],
      ['?q=CRM.LOOKUP', ['changed']],
      // LIKE wildcards are literal text: % and _ match only themselves.
      ['?q=100%25_sure', ['wild']],
      ['?q=%25', ['wild']],
      ['?q=_', ['wild']],
      ['?q=Literal_100', []],
      ['?q=Literal%25sure', []],
      ['?category=tool_poisoning&severity=critical', ['poison']],
    ])('filters %s', async (query, expected) => {
      expect(idsOf(await list(query))).toEqual(expected.map((n) => ids[n]));
    });

    it('filters by agent', async () => {
      expect(idsOf(await list(`?agent_id=${agentId}`))).toEqual([ids.attest]);
      expect(idsOf(await list('?agent_id=00000000-0000-4000-8000-000000000000'))).toEqual([]);
    });

    it('refuses unknown enumeration values and malformed ids with 422', async () => {
      expectValidation(await admin.client.get(api('/findings?status=closed')), 'query.status');
      expectValidation(await admin.client.get(api('/findings?severity=urgent')), 'query.severity');
      expectValidation(await admin.client.get(api('/findings?agent_id=nope')), 'query.agent_id');
      expectValidation(await admin.client.get(api('/findings?limit=0')), 'query.limit');
      expectValidation(await admin.client.get(api('/findings?limit=201')), 'query.limit');
    });

    it('pages with an opaque cursor and refuses a forged one', async () => {
      const first = await list('?limit=3');
      expect(idsOf(first)).toEqual([ids.wild, ids.attest, ids.changed]);
      expect(first.next_cursor).toEqual(expect.any(String));
      const second = await list(`?limit=3&cursor=${encodeURIComponent(first.next_cursor!)}`);
      expect(idsOf(second)).toEqual([ids.poison]);
      expect(second.next_cursor).toBeNull();

      const bad = await admin.client.get(api(`/findings?cursor=${encodeURIComponent(first.next_cursor!.slice(0, -2) + 'AA')}`));
      expect(bad.statusCode).toBe(422);
      expect(bad.json().error.code).toBe('invalid_cursor');
      // A cursor of another list is not one of this list.
      await admin.client.post(api('/agents'), { name: 'Second agent' });
      const borrowed = (await admin.client.get(api('/agents?limit=1'))).json().next_cursor;
      expect(borrowed).toEqual(expect.any(String));
      expect((await admin.client.get(api(`/findings?cursor=${encodeURIComponent(borrowed)}`))).json().error.code).toBe('invalid_cursor');
    });

    it('pages through findings a detector opened in one transaction without giving a time', async () => {
      const other = await onboardAdmin(t.app, 'Same Instant Org');
      const org = other.tenant.id;
      // One transaction: without an explicit time they would share the database's microsecond now().
      const opened = await inScope(t.database.db, { orgId: org }, async (tx) => {
        const out: string[] = [];
        for (const k of ['s1', 's2', 's3']) out.push((await openFinding(tx, org, { category: 'x_test', severity: 'low', title: k, description: '', evidence: {}, dedupe_key: k })).id);
        return out;
      });
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: Array<{ id: string }>; next_cursor: string | null } = (await other.client.get(api(`/findings?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`))).json();
        seen.push(...page.items.map((f) => f.id));
        cursor = page.next_cursor;
      } while (cursor && seen.length < 10);
      expect(seen.sort()).toEqual([...opened].sort());
    });
  });

  describe('GET /findings/{id}', () => {
    it('answers one finding', async () => {
      const res = await admin.client.get(api(`/findings/${ids.poison}`));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ id: ids.poison, severity: 'critical', status: 'open' });
    });

    it('answers 404 for an unknown id and 422 for a malformed one', async () => {
      expect((await admin.client.get(api('/findings/00000000-0000-4000-8000-000000000000'))).statusCode).toBe(404);
      expectValidation(await admin.client.get(api('/findings/nope')), 'path.finding_id');
    });
  });

  describe('PATCH /findings/{id}', () => {
    const patch = (id: string, body: Record<string, unknown>, headers?: Record<string, string>) =>
      admin.client.patch(api(`/findings/${id}`), body, headers);

    it('assigns, notes and moves a finding, bumping its version; closing sets resolved_at, reopening clears it', async () => {
      const assigned = await patch(ids.changed, { assigned_to: 'secops@example.com' });
      expect(assigned.statusCode, assigned.body).toBe(200);
      expect(assigned.json()).toMatchObject({ assigned_to: 'secops@example.com', status: 'open', version: 2, resolved_at: null });

      const working = await patch(ids.changed, { status: 'in_progress', note: 'Asked the server owner.' });
      expect(working.json()).toMatchObject({ status: 'in_progress', note: 'Asked the server owner.', version: 3, resolved_at: null });

      clock.advance(60);
      const resolved = await patch(ids.changed, { status: 'resolved' });
      expect(resolved.json()).toMatchObject({ status: 'resolved', version: 4, resolved_at: clock.now().toISOString() });
      expect(resolved.json().assigned_to).toBe('secops@example.com');

      // Null and absent leave a field as it is; a patch that changes nothing writes nothing.
      const same = await patch(ids.changed, { status: null, assigned_to: null, note: null });
      expect(same.json()).toMatchObject({ status: 'resolved', version: 4, note: 'Asked the server owner.' });

      const reopened = await patch(ids.changed, { status: 'open', assigned_to: '', note: '' });
      expect(reopened.json()).toMatchObject({ status: 'open', resolved_at: null, assigned_to: null, note: null, version: 5 });

      for (const status of ['accepted', 'false_positive'] as const) {
        const closed = await patch(ids.changed, { status });
        expect(closed.json()).toMatchObject({ status, resolved_at: clock.now().toISOString() });
      }
      const back = await patch(ids.changed, { status: 'in_progress' });
      expect(back.json()).toMatchObject({ status: 'in_progress', resolved_at: null });
    });

    it('audits each change with what changed (not the note’s text) and records it as evidence', async () => {
      const res = await patch(ids.wild, { status: 'in_progress', assigned_to: 'ada@example.com', note: 'Looking into the exfiltration URL.' });
      expect(res.statusCode).toBe(200);
      const audit = (await admin.client.get(api(`/audit?action=finding.updated&target_id=${ids.wild}`))).json().items;
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({
        actor: { type: 'person', id: admin.userId },
        details: { status: { from: 'open', to: 'in_progress' }, assigned_to: { from: null, to: 'ada@example.com' }, note_changed: true },
      });
      expect(JSON.stringify(audit[0])).not.toContain('exfiltration URL');
      const evidence = (await admin.client.get(api('/evidence?event_type=finding_update'))).json().items;
      const mine = evidence.filter((e: { payload: { finding_id: string } }) => e.payload.finding_id === ids.wild);
      expect(mine).toHaveLength(1);
      expect(mine[0].payload).toMatchObject({ category: 'tool_poisoning', status: { from: 'open', to: 'in_progress' }, actor_id: admin.userId });
      expect((await admin.client.get(api('/evidence/verify'))).json().valid).toBe(true);
    });

    it('honours If-Match: a stale version answers 409 with the current one and changes nothing', async () => {
      const current = (await admin.client.get(api(`/findings/${ids.attest}`))).json();
      const stale = await patch(ids.attest, { note: 'late' }, { 'if-match': `"${current.version - 1 || 99}"` });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error).toMatchObject({ code: 'version_conflict', details: { current_version: current.version } });
      const fresh = await patch(ids.attest, { note: 'on time' }, { 'if-match': `"${current.version}"` });
      expect(fresh.statusCode).toBe(200);
      expect(fresh.json()).toMatchObject({ note: 'on time', version: current.version + 1 });
      expectValidation(await patch(ids.attest, { note: 'x' }, { 'if-match': 'yesterday' }), 'header.if-match');
    });

    it.each([
      ['status', { status: 'closed' }],
      ['assigned_to', { assigned_to: 'x'.repeat(321) }],
      ['note', { note: 'x'.repeat(2001) }],
    ])('answers 422 naming %s', async (field, body) => {
      expectValidation(await patch(ids.attest, body), field);
    });

    it('answers 404 for an unknown finding', async () => {
      expect((await patch('00000000-0000-4000-8000-000000000000', { status: 'resolved' })).statusCode).toBe(404);
    });
  });

  describe('permissions and organisations', () => {
    it('lets a viewer read but not triage (finding:write), and a person without finding:read nothing', async () => {
      const viewer = await addMember(t.app, admin.client, ['viewer']);
      expect((await viewer.client.get(api('/findings'))).statusCode).toBe(200);
      expect((await viewer.client.get(api(`/findings/${ids.poison}`))).statusCode).toBe(200);
      const denied = await viewer.client.patch(api(`/findings/${ids.poison}`), { status: 'resolved' });
      expect(denied.statusCode).toBe(403);
      expect(denied.json().error.details).toEqual({ required_permission: 'finding:write' });

      const approver = await addMember(t.app, admin.client, ['approver']);
      const unread = await approver.client.get(api('/findings'));
      expect(unread.statusCode).toBe(403);
      expect(unread.json().error.details).toEqual({ required_permission: 'finding:read' });
      expect((await admin.client.get(api(`/findings/${ids.poison}`))).json().status).toBe('open');
    });

    it("hides another organisation's findings: its list is empty, get and patch answer 404", async () => {
      const other = await onboardAdmin(t.app, 'Other');
      expect((await other.client.get(api('/findings'))).json().items).toEqual([]);
      expect((await other.client.get(api(`/findings/${ids.poison}`))).statusCode).toBe(404);
      expect((await other.client.patch(api(`/findings/${ids.poison}`), { status: 'resolved' })).statusCode).toBe(404);
      expect((await admin.client.get(api(`/findings/${ids.poison}`))).json()).toMatchObject({ status: 'open', version: 1 });
      // openFinding in the other organisation with the same key opens its own.
      expect((await open(other.tenant.id, { dedupe_key: 'p1' })).opened).toBe(true);
    });
  });

  describe('openFinding', () => {
    it('opens a finding once while it is open or in progress, and again once it is closed', async () => {
      const org = admin.tenant.id;
      const first = await open(org, { dedupe_key: 'dedupe:once' });
      expect(first.opened).toBe(true);
      expect(await open(org, { dedupe_key: 'dedupe:once', title: 'same thing, later run' })).toEqual({ id: first.id, opened: false });

      await admin.client.patch(api(`/findings/${first.id}`), { status: 'in_progress' });
      expect(await open(org, { dedupe_key: 'dedupe:once' })).toEqual({ id: first.id, opened: false });

      await admin.client.patch(api(`/findings/${first.id}`), { status: 'resolved' });
      const again = await open(org, { dedupe_key: 'dedupe:once' });
      expect(again.opened).toBe(true);
      expect(again.id).not.toBe(first.id);

      // The resolved one cannot be reopened while the new one is open: one open finding per key.
      const reopen = await admin.client.patch(api(`/findings/${first.id}`), { status: 'open' });
      expect(reopen.statusCode).toBe(409);
      expect(reopen.json().error.code).toBe('conflict');
      await admin.client.patch(api(`/findings/${again.id}`), { status: 'false_positive' });
      expect((await admin.client.patch(api(`/findings/${first.id}`), { status: 'open' })).json().status).toBe('open');
    });

    it('opens nothing when the caller’s transaction rolls back', async () => {
      const org = admin.tenant.id;
      await expect(
        inScope(t.database.db, { orgId: org }, async (tx) => {
          await openFinding(tx, org, { category: 'x_test', severity: 'low', title: 'T', description: '', evidence: {}, dedupe_key: 'rolled-back' });
          throw new Error('run failed');
        }),
      ).rejects.toThrow('run failed');
      expect((await list('?category=x_test')).items).toEqual([]);
    });
  });
});
