import { createHash, createPublicKey } from 'node:crypto';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { EVIDENCE_BUNDLE_MAX_BYTES, EvidenceBundleTooLarge } from '../../api/modules/evidence/bundle.js';
import { EvidenceSigner } from '../../api/modules/evidence/index.js';
import { checkpointDigest, describeVerdict, kidOf, verifyBundle, type BundleManifest } from '../../api/modules/evidence/verify-bundle.js';
import { packBundle } from '../support/evidence-bundle.js';

const canonicalize = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string;
const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * The pure verifier on archives made here, without a database: the shapes it refuses before any record (an archive
 * that is not one, a missing or unsigned manifest, a key file under another key's name, a file the manifest does
 * not list), and the two definitions it shares with the signer (key ids, what a checkpoint signs). Bundles of real
 * chains, tampered with, are test/api/evidence-bundle.test.ts.
 */

const signer = new EvidenceSigner('unit-test-evidence-seed', ['unit-test-previous-seed']);
const pemOf = (k: { public_key: string }) =>
  Buffer.from(createPublicKey({ key: Buffer.from(k.public_key, 'base64url'), format: 'der', type: 'spki' }).export({ format: 'pem', type: 'spki' }) as string);

/** A valid bundle of a window with no records, its files in order; `change` edits them before the manifest is signed. */
function emptyBundle(change: (files: Map<string, Buffer>, manifest: BundleManifest) => void = () => undefined): Map<string, Buffer> {
  const genesis = { seq: 0, hash: '0'.repeat(64) };
  const keys = signer.publicKeys();
  const files = new Map<string, Buffer>([
    ['VERIFY.md', Buffer.from('# Verifying\n')],
    ...keys.map((k) => [`keys/${k.kid}.pem`, pemOf(k)] as [string, Buffer]),
    ['records.jsonl', Buffer.alloc(0)],
    ['bodies.jsonl', Buffer.alloc(0)],
  ]);
  const manifest: BundleManifest = {
    format: 'tollgate-evidence-bundle',
    version: 1,
    organisation: { id: '7d9f4a36-5c1e-4f3a-9a55-0b1f2c3d4e5f', slug: 'unit', name: 'Unit' },
    window: { since: '2026-11-01T00:00:00.000Z', until: '2026-11-02T00:00:00.000Z' },
    records: { count: 0, first_seq: null, last_seq: null },
    head_before: genesis,
    head_after: genesis,
    chain_head: genesis,
    generated_at: '2026-11-02T00:00:01.000Z',
    kid: signer.kid,
    keys: keys.map((k) => k.kid),
    files: {},
  };
  change(files, manifest);
  manifest.files = Object.fromEntries([...files].map(([name, bytes]) => [name, sha256(bytes)]));
  const manifestBytes = Buffer.from(JSON.stringify(manifest, null, 2));
  return new Map([['manifest.json', manifestBytes], ['manifest.sig', Buffer.from(signer.sign(sha256(manifestBytes)))], ...files]);
}

const verdictOf = async (files: Map<string, Buffer>) => verifyBundle(await packBundle(files));

describe('verifyBundle, on archives made by hand', () => {
  it('accepts a well-formed empty bundle and says where the chain stood', async () => {
    const v = await verdictOf(emptyBundle());
    expect(v).toMatchObject({ valid: true, broken: null, records: 0 });
    expect(describeVerdict(v)[0]).toBe('OK: 0 records (none created in the window; the chain stood at seq 0)');
    expect(describeVerdict(v).join('\n')).toContain(`keys: ${signer.kid} (signed the manifest)`);
  });

  it('refuses what is not a bundle', async () => {
    expect((await verifyBundle(Buffer.from('not gzip'))).broken).toMatchObject({ file: 'the archive', reason: 'unreadable' });
    expect((await verifyBundle(gzipSync(Buffer.from('not a tar archive, though gzipped')))).broken).toMatchObject({ reason: 'unreadable' });
    const noManifest = emptyBundle();
    noManifest.delete('manifest.json');
    expect((await verdictOf(noManifest)).broken).toMatchObject({ file: 'manifest.json', reason: 'file_missing' });
    const notJson = emptyBundle();
    notJson.set('manifest.json', Buffer.from('{"format":'));
    expect((await verdictOf(notJson)).broken).toMatchObject({ file: 'manifest.json', reason: 'manifest_invalid' });
    const noSignature = emptyBundle();
    noSignature.delete('manifest.sig');
    expect((await verdictOf(noSignature)).broken).toMatchObject({ file: 'manifest.sig', reason: 'file_missing' });

    // A link among the files, or a name twice: the archive is refused as a whole.
    const raw = async (entries: Array<{ name: string; type?: 'file' | 'symlink' | 'directory'; linkname?: string; content?: Buffer }>) => {
      const pack = tar.pack();
      for (const e of entries) pack.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname, size: e.content?.length ?? 0 }, e.content ?? Buffer.alloc(0));
      pack.finalize();
      const chunks: Buffer[] = [];
      for await (const c of pack) chunks.push(c as Buffer);
      return verifyBundle(gzipSync(Buffer.concat(chunks)));
    };
    const link = await raw([{ name: 'manifest.json', type: 'symlink', linkname: '/etc/passwd' }]);
    expect(link.broken).toMatchObject({ reason: 'unreadable', message: 'the archive: not a readable tar archive (manifest.json is not a regular file)' });
    const manifest = emptyBundle().get('manifest.json')!;
    const twice = await raw([{ name: 'manifest.json', content: manifest }, { name: 'manifest.json', content: manifest }]);
    expect(twice.broken?.message).toBe('the archive: not a readable tar archive (manifest.json appears twice)');
    // Packed again by hand (`tar -czf x.tar.gz -C dir .`): folders, and names under `./`, are fine.
    const byHand = [{ name: './', type: 'directory' as const }, ...[...emptyBundle()].map(([name, content]) => ({ name: `./${name}`, content }))];
    byHand.splice(3, 0, { name: './keys/', type: 'directory' as const });
    expect((await raw(byHand)).valid).toBe(true);
  });

  it('refuses a manifest signed by a key not in the bundle, or by another key than it names', async () => {
    const stranger = new EvidenceSigner('a stranger');
    const foreign = emptyBundle();
    foreign.set('manifest.sig', Buffer.from(stranger.sign(sha256(foreign.get('manifest.json')!))));
    expect((await verdictOf(foreign)).broken).toMatchObject({ file: 'manifest.json', reason: 'manifest_signature_invalid' });
    const unnamed = emptyBundle((files, m) => {
      files.delete(`keys/${signer.kid}.pem`);
      m.keys = m.keys.filter((k) => k !== signer.kid);
    });
    expect((await verdictOf(unnamed)).broken?.message).toBe(`manifest.json: signed with key ${signer.kid}, which is not in the bundle`);
  });

  it('refuses a key file that holds another key than its name says, and a file the manifest does not list', async () => {
    const [current, previous] = signer.publicKeys();
    const swapped = emptyBundle((files) => files.set(`keys/${previous!.kid}.pem`, pemOf(current!)));
    expect((await verdictOf(swapped)).broken).toMatchObject({ file: `keys/${previous!.kid}.pem`, reason: 'key_invalid' });
    const extra = emptyBundle();
    extra.set('run-me.sh', Buffer.from('#!/bin/sh\n'));
    expect((await verdictOf(extra)).broken).toMatchObject({ file: 'run-me.sh', reason: 'file_unlisted' });
    const empty = emptyBundle();
    empty.set('records.jsonl', Buffer.from('{}\n'));
    expect((await verdictOf(empty)).broken).toMatchObject({ reason: 'record_invalid', seq: 1 });
  });
});

describe('what the verifier shares with the signer', () => {
  it('names keys as the signer does', () => {
    for (const k of signer.publicKeys()) {
      expect(kidOf(createPublicKey({ key: Buffer.from(k.public_key, 'base64url'), format: 'der', type: 'spki' }))).toBe(k.kid);
    }
  });

  it('signs a checkpoint over the SHA-256 of the canonical JSON of org_id, seq, hash and created_at', () => {
    const c = { created_at: '2026-11-23T09:00:00.000Z', hash: 'a'.repeat(64), seq: 3, org_id: '7d9f4a36-5c1e-4f3a-9a55-0b1f2c3d4e5f' };
    expect(checkpointDigest({ ...c, kid: 'ignored', signature: 'ignored' } as typeof c)).toBe(
      sha256(`{"created_at":"2026-11-23T09:00:00.000Z","hash":"${'a'.repeat(64)}","org_id":"${c.org_id}","seq":3}`),
    );
    expect(canonicalize(c)).toContain('"seq":3');
  });

  it('says the size limit in megabytes', () => {
    expect(new EvidenceBundleTooLarge(EVIDENCE_BUNDLE_MAX_BYTES, 'the window holds 600000 records').message).toBe(
      'The evidence bundle would be larger than 50 MB (the window holds 600000 records); choose a shorter window.',
    );
  });
});
