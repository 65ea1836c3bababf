import { createHash, createPublicKey } from 'node:crypto';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { inScope, type Db } from '../../db/database.js';
import { bodyOf, type ChainHead, type EvidenceRow } from './chain.js';
import { bundleOrganisation, chainHead, recordsBetween, windowSeqs } from './bundle.repository.js';
import { GENESIS_HASH, type EvidenceSigner } from './signer.js';
import { BUNDLE_FORMAT, BUNDLE_VERSION, type BundleManifest } from './verify-bundle.js';
import { canonicalize } from '../../../lib/canonical-json.js';

/** The largest bundle built: 50 MB, compressed (docs/evidence.md, Limits). */
export const EVIDENCE_BUNDLE_MAX_BYTES = 50 * 1024 * 1024;

/** Records read per statement (each in a short transaction of its own). */
const PAGE = 1000;

/**
 * Bytes of every record that no compression removes: its id, hash and signature are random to a compressor
 * (about 15 + 32 + 64 bytes). A window of more records than the limit divided by this cannot fit, and is refused
 * before a record is read.
 */
const INCOMPRESSIBLE_BYTES_PER_RECORD = 100;

/** A window whose bundle would pass the size limit (EVIDENCE_BUNDLE_MAX_BYTES). */
export class EvidenceBundleTooLarge extends Error {
  constructor(maxBytes: number, detail: string) {
    const limit = maxBytes % 1048576 === 0 ? `${maxBytes / 1048576} MB` : `${maxBytes} bytes`;
    super(`The evidence bundle would be larger than ${limit} (${detail}); choose a shorter window.`);
    this.name = 'EvidenceBundleTooLarge';
  }
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** A record's two lines: records.jsonl's (the stored record) and bodies.jsonl's (the exact bytes its hash covers). */
function linesOf(row: EvidenceRow): { record: Buffer; body: Buffer } {
  const body = bodyOf(row);
  return {
    record: Buffer.from(`${JSON.stringify({ ...body, hash: row.hash, signature: row.signature, kid: row.kid })}\n`),
    body: Buffer.from(`${canonicalize(body)}\n`),
  };
}

/** The records of seqs first..last in pages, in seq order, each page read in its own transaction. */
async function* pagesOf(db: Db, orgId: string, first: number, last: number): AsyncGenerator<EvidenceRow[]> {
  for (let after = first - 1; after < last; ) {
    const rows = await inScope(db, { orgId }, (tx) => recordsBetween(tx, orgId, after, last, PAGE));
    if (rows.length === 0) return;
    yield rows;
    after = Number(rows[rows.length - 1]!.seq);
  }
}

/** One of the two record files as it is streamed: its size and SHA-256, known after the measuring pass. */
interface Measured {
  size: number;
  sha256: string;
}

/** What the window holds, read before anything is written. */
interface Plan {
  organisation: { id: string; slug: string; name: string };
  first: number | null;
  last: number | null;
  headBefore: ChainHead;
  chain: ChainHead;
}

async function plan(db: Db, orgId: string, since: Date, until: Date, maxBytes: number): Promise<Plan> {
  return inScope(db, { orgId }, async (tx) => {
    const organisation = await bundleOrganisation(tx, orgId);
    if (!organisation) throw new Error(`no organisation ${orgId}`);
    const chain = (await chainHead(tx, orgId)) ?? { seq: 0, hash: GENESIS_HASH };
    const window = await windowSeqs(tx, orgId, since, until);
    // No record in the window: the bundle says where the chain stood at its end.
    if (window.last < window.first) return { organisation, first: null, last: null, headBefore: window.before, chain };
    const { first, last, before: headBefore } = window;
    const records = last - first + 1;
    if (records > maxBytes / INCOMPRESSIBLE_BYTES_PER_RECORD) {
      throw new EvidenceBundleTooLarge(maxBytes, `the window holds ${records} records, seq ${first}..${last}`);
    }
    return { organisation, first, last, headBefore, chain };
  });
}

/**
 * The tar stream, gzipped into memory, that refuses to grow past `maxBytes`: once the compressed output passes
 * it, the archive fails and every write waiting on it throws EvidenceBundleTooLarge.
 */
class Archive {
  private readonly pack = tar.pack();
  private readonly gzip = createGzip();
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly failed: Promise<never>;
  private fail!: (err: Error) => void;
  private readonly ended: Promise<void>;

  constructor(
    private readonly maxBytes: number,
    private readonly mtime: Date,
  ) {
    this.failed = new Promise<never>((_, reject) => {
      this.fail = (err) => {
        reject(err);
        this.pack.destroy();
        this.gzip.destroy();
      };
    });
    this.failed.catch(() => undefined);
    this.ended = new Promise<void>((resolve) => this.gzip.on('end', resolve));
    this.pack.on('error', (err: Error) => this.fail(err));
    this.gzip.on('error', (err) => this.fail(err));
    this.gzip.on('data', (chunk: Buffer) => {
      this.size += chunk.length;
      if (this.size > this.maxBytes) this.fail(new EvidenceBundleTooLarge(this.maxBytes, 'the compressed archive passed the limit while it was being written'));
      else this.chunks.push(chunk);
    });
    this.pack.pipe(this.gzip);
  }

  /** Adds a file of `size` bytes streamed from `content`, waiting while the compressor catches up. */
  async add(name: string, size: number, content: Iterable<Buffer> | AsyncIterable<Buffer>): Promise<void> {
    let entry!: ReturnType<tar.Pack['entry']>;
    const written = new Promise<void>((resolve, reject) => {
      entry = this.pack.entry({ name, size, mode: 0o644, mtime: this.mtime }, (err) => (err ? reject(err) : resolve()));
    });
    written.catch(() => undefined);
    for await (const chunk of content) {
      if (!entry.write(chunk)) await Promise.race([new Promise((resolve) => entry.once('drain', resolve)), this.failed]);
    }
    entry.end();
    await Promise.race([written, this.failed]);
  }

  async close(): Promise<Buffer> {
    this.pack.finalize();
    await Promise.race([this.ended, this.failed]);
    return Buffer.concat(this.chunks);
  }

  /** Drops what was written, after a failure of the caller's. */
  destroy(): void {
    this.pack.destroy();
    this.gzip.destroy();
  }
}

/** The steps of VERIFY.md, for whoever holds the bundle and not Tollgate. */
function verifyGuide(m: BundleManifest): string {
  const records =
    m.records.count === 0
      ? `no record (none was created in the window; the chain stood at seq ${m.head_after.seq})`
      : `${m.records.count} records, seq ${m.records.first_seq}..${m.records.last_seq}`;
  return `# Verifying this evidence bundle

This archive holds the evidence of the organisation ${m.organisation.name} (${m.organisation.slug}) created at or
after ${m.window.since} and before ${m.window.until}: ${records}.

It verifies offline. What you must take from elsewhere is the public keys: compare the ids of the keys in keys/
(the file names: the start of the SHA-256 of each key) with the keys you had from the organisation
(GET /evidence/keys) or with the kid of checkpoints you stored before.

- With Tollgate: \`tollgate evidence verify <bundle.tar.gz> [--checkpoint <stored.json>]...\`
- With bash, tar, jq, sha256sum, base64 and openssl 3: Tollgate's \`scripts/verify-evidence-bundle.sh <bundle.tar.gz>\`,
  or by hand, as follows (docs/evidence.md explains each step).

## The files

- manifest.json: the organisation, the window, the records' count and seq range, the chain head before and after
  the window, the head when the bundle was built, and the SHA-256 of every other file.
- manifest.sig: the Ed25519 signature (base64url) of the SHA-256 of manifest.json, by the key \`kid\` names.
- records.jsonl: one record per line, as stored, with its \`hash\`, \`signature\` and \`kid\`.
- bodies.jsonl: line for line, the exact bytes each record's hash covers (RFC 8785 canonical JSON of the record
  without \`hash\`, \`signature\` and \`kid\`).
- keys/<kid>.pem: the evidence public keys (Ed25519, SubjectPublicKeyInfo PEM).

## By hand

    mkdir b && tar -xzf bundle.tar.gz -C b && cd b
    b64url() { local s; s=$(printf '%s' "$1" | tr '_-' '/+'); while (( \${#s} % 4 )); do s+='='; done; printf '%s' "$s" | base64 -d; }

    # 1. The manifest is signed: SHA-256 of its bytes, Ed25519 with the key it names.
    openssl dgst -sha256 -binary manifest.json > /tmp/digest.bin
    b64url "$(cat manifest.sig)" > /tmp/sig.bin
    openssl pkeyutl -verify -pubin -inkey "keys/$(jq -r .kid manifest.json).pem" -rawin -in /tmp/digest.bin -sigfile /tmp/sig.bin

    # 2. Every other file matches its SHA-256 in the manifest.
    jq -r '.files | to_entries[] | "\\(.value)  \\(.key)"' manifest.json | sha256sum -c

    # 3. For line N of bodies.jsonl and line N of records.jsonl:
    #    - the SHA-256 of the body line (without its newline) is the record's "hash";
    #    - the body's "seq" is one more than the line before's, the first one more than head_before.seq;
    #    - the body's "prev_hash" is the hash of the line before, the first's is head_before.hash;
    #    - the record's other fields are the body's: jq -S 'del(.hash, .signature, .kid)' of the one is jq -S . of the other;
    #    - the record's "signature" verifies: Ed25519 over the 32 bytes of the hash, with keys/<kid>.pem:
    sed -n 1p bodies.jsonl | tr -d '\\n' | openssl dgst -sha256 -binary > /tmp/digest.bin
    b64url "$(sed -n 1p records.jsonl | jq -r .signature)" > /tmp/sig.bin
    openssl pkeyutl -verify -pubin -inkey "keys/$(sed -n 1p records.jsonl | jq -r .kid).pem" -rawin -in /tmp/digest.bin -sigfile /tmp/sig.bin

    # 4. The last record's hash is head_after.hash, and there are records.count of them.
`;
}

/**
 * Builds the evidence bundle of an organisation's records created in `window` (at or after `since`, before
 * `until`): a .tar.gz that verifies offline (docs/evidence.md, Evidence bundles). It covers the contiguous run of
 * the chain from the lowest to the highest seq created in the window, so a record a slower clock stamped just
 * outside the window but chained between two inside it is included rather than the chain broken. Records are
 * read in pages, three times (once to measure the two record files, since a tar header states its file's size,
 * then once for each file), and streamed through the archive. Throws EvidenceBundleTooLarge past 50 MB.
 */
export function buildEvidenceBundle(
  db: Db,
  signer: EvidenceSigner,
  orgId: string,
  window: { since: Date; until: Date },
): Promise<{ bytes: Buffer; records: number; fileName: string }> {
  return writeEvidenceBundle(db, signer, orgId, window, EVIDENCE_BUNDLE_MAX_BYTES);
}

/** `buildEvidenceBundle` with the size limit as an argument (the tests build against a small one). */
export async function writeEvidenceBundle(
  db: Db,
  signer: EvidenceSigner,
  orgId: string,
  window: { since: Date; until: Date },
  maxBytes: number,
): Promise<{ bytes: Buffer; records: number; fileName: string }> {
  const { since, until } = window;
  if (!(since.getTime() < until.getTime())) throw new RangeError('an evidence bundle window must end after it begins');
  const generatedAt = new Date();
  const p = await plan(db, orgId, since, until, maxBytes);

  // The measuring pass: the two files' sizes and digests, and the last record's position.
  const measure = { records: createHash('sha256'), bodies: createHash('sha256'), recordBytes: 0, bodyBytes: 0 };
  let count = 0;
  let headAfter = p.headBefore;
  if (p.first !== null && p.last !== null) {
    for await (const rows of pagesOf(db, orgId, p.first, p.last)) {
      for (const row of rows) {
        const { record, body } = linesOf(row);
        measure.records.update(record);
        measure.bodies.update(body);
        measure.recordBytes += record.length;
        measure.bodyBytes += body.length;
        if (!signer.knows(row.kid)) {
          throw new Error(`record ${row.seq} is signed with key ${row.kid}, which this process does not hold: list its seed in EVIDENCE_SIGNING_PREVIOUS_SEEDS`);
        }
        count++;
        headAfter = { seq: Number(row.seq), hash: row.hash };
      }
    }
  }
  const recordsFile: Measured = { size: measure.recordBytes, sha256: measure.records.digest('hex') };
  const bodiesFile: Measured = { size: measure.bodyBytes, sha256: measure.bodies.digest('hex') };

  // Every key this process holds, not only those the records name: stored checkpoints may be signed by any.
  const keys = signer.publicKeys().map((k) => ({
    kid: k.kid,
    pem: Buffer.from(createPublicKey({ key: Buffer.from(k.public_key, 'base64url'), format: 'der', type: 'spki' }).export({ format: 'pem', type: 'spki' }) as string),
  }));

  const manifest: BundleManifest = {
    format: BUNDLE_FORMAT,
    version: BUNDLE_VERSION,
    organisation: { id: p.organisation.id, slug: p.organisation.slug, name: p.organisation.name },
    window: { since: since.toISOString(), until: until.toISOString() },
    records: { count, first_seq: count > 0 ? p.first : null, last_seq: count > 0 ? headAfter.seq : null },
    head_before: p.headBefore,
    head_after: headAfter,
    chain_head: p.chain,
    generated_at: generatedAt.toISOString(),
    kid: signer.kid,
    keys: keys.map((k) => k.kid),
    files: {},
  };
  const guide = Buffer.from(verifyGuide(manifest));
  manifest.files = {
    'VERIFY.md': sha256(guide),
    ...Object.fromEntries(keys.map((k) => [`keys/${k.kid}.pem`, sha256(k.pem)])),
    'records.jsonl': recordsFile.sha256,
    'bodies.jsonl': bodiesFile.sha256,
  };
  const manifestBytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`);

  const archive = new Archive(maxBytes, generatedAt);
  try {
    await archive.add('manifest.json', manifestBytes.length, [manifestBytes]);
    const signature = Buffer.from(`${signer.sign(sha256(manifestBytes))}\n`);
    await archive.add('manifest.sig', signature.length, [signature]);
    await archive.add('VERIFY.md', guide.length, [guide]);
    for (const k of keys) await archive.add(`keys/${k.kid}.pem`, k.pem.length, [k.pem]);
    for (const [name, file, pick] of [
      ['records.jsonl', recordsFile, 'record'],
      ['bodies.jsonl', bodiesFile, 'body'],
    ] as const) {
      const digest = createHash('sha256');
      await archive.add(name, file.size, streamLines(db, orgId, p, pick, digest));
      // Records never change (the runtime role may only add them), so the second reading is the first.
      if (digest.digest('hex') !== file.sha256) throw new Error(`the evidence records changed while the bundle was built (${name})`);
    }
    const bytes = await archive.close();
    const stamp = generatedAt.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 13);
    return { bytes, records: count, fileName: `evidence_bundle-${p.organisation.slug}-${stamp}.tar.gz` };
  } catch (err) {
    archive.destroy();
    throw err;
  }
}

/** One of the record files, a page at a time, feeding `digest` as it goes. */
async function* streamLines(db: Db, orgId: string, p: Plan, pick: 'record' | 'body', digest: ReturnType<typeof createHash>): AsyncGenerator<Buffer> {
  if (p.first === null || p.last === null) return;
  for await (const rows of pagesOf(db, orgId, p.first, p.last)) {
    const page = Buffer.concat(rows.map((row) => linesOf(row)[pick]));
    digest.update(page);
    yield page;
  }
}
