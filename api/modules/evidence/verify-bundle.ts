import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import tar from 'tar-stream';
import { canonicalize } from '../../../lib/canonical-json.js';

/**
 * Verifies an evidence bundle (bundle.ts builds them; docs/evidence.md) and, optionally, checkpoints an auditor
 * stored against it. Pure: it reads nothing but its arguments, needs no database and no app, so
 * `tollgate evidence verify` runs it anywhere. The same checks, with standard tools, are
 * scripts/verify-evidence-bundle.sh.
 */

export const BUNDLE_FORMAT = 'tollgate-evidence-bundle';
export const BUNDLE_VERSION = 1;
/** What a chain begins from: the `prev_hash` of record 1 and the head of an empty chain. */
const GENESIS = '0'.repeat(64);
/** A bundle is at most 50 MB compressed; unpacked, this much is refused (a file made to fill the memory). */
const MAX_UNPACKED_BYTES = 1024 * 1024 * 1024;

/** A position in a chain: a record's seq and hash (seq 0 and 64 zeros before the first record). */
export interface ChainPoint {
  seq: number;
  hash: string;
}

/** manifest.json: what the bundle holds, signed (manifest.sig) with the evidence key `kid`. */
export interface BundleManifest {
  format: typeof BUNDLE_FORMAT;
  version: typeof BUNDLE_VERSION;
  organisation: { id: string; slug: string; name: string };
  /** Records created at or after `since` and before `until`. */
  window: { since: string; until: string };
  records: { count: number; first_seq: number | null; last_seq: number | null };
  /** The record just before the first (or genesis); for an empty bundle, where the chain stood. */
  head_before: ChainPoint;
  /** The last record's; for an empty bundle, the same as `head_before`. */
  head_after: ChainPoint;
  /** The organisation's chain head when the bundle was built. */
  chain_head: ChainPoint;
  generated_at: string;
  /** The key that signed manifest.sig. */
  kid: string;
  /** Every key in keys/, by id. */
  keys: string[];
  /** The SHA-256 (hex) of every other file, by path. */
  files: Record<string, string>;
}

/** A signed checkpoint of a chain head, as `GET /evidence/checkpoints` answers it. */
export interface Checkpoint {
  org_id: string;
  seq: number;
  hash: string;
  created_at: string;
  kid: string;
  signature: string;
}

export type BrokenReason =
  | 'unreadable'
  | 'file_missing'
  | 'file_unlisted'
  | 'digest_mismatch'
  | 'manifest_invalid'
  | 'key_invalid'
  | 'manifest_signature_invalid'
  | 'record_invalid'
  | 'wrong_organisation'
  | 'body_mismatch'
  | 'hash_mismatch'
  | 'sequence_gap'
  | 'prev_hash_mismatch'
  | 'unknown_key'
  | 'signature_invalid'
  | 'missing_records'
  | 'extra_records'
  | 'head_mismatch'
  | 'checkpoint_invalid'
  | 'checkpoint_signature_invalid'
  | 'checkpoint_not_covered'
  | 'checkpoint_mismatch'
  | 'checkpoint_order';

/** What broke first: a record of the bundle (its seq and id), one of its files, or a checkpoint. */
export interface Broken {
  file: string;
  seq: number | null;
  id: string | null;
  reason: BrokenReason;
  /** One line, e.g. `record 17 (id …): hash does not match its body`. */
  message: string;
}

export interface BundleVerdict {
  valid: boolean;
  broken: Broken | null;
  /** The manifest, once it is readable (even when something else broke). */
  manifest: BundleManifest | null;
  /** Records checked and found sound. */
  records: number;
  /** The checkpoints given, verified, oldest first. */
  checkpoints: Array<Checkpoint & { name: string }>;
}

/** A checkpoint to verify against the bundle, with the name it is reported by (its file's, on the command line). */
export interface CheckpointInput {
  name: string;
  value: unknown;
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** A key's id: the start of the SHA-256 of its SubjectPublicKeyInfo, as signer.ts names its keys. */
export function kidOf(key: KeyObject): string {
  return createHash('sha256').update(key.export({ format: 'der', type: 'spki' })).digest('base64url').slice(0, 16);
}

/** What a checkpoint's signature signs: the SHA-256 (hex) of the RFC 8785 canonical JSON of these four fields. */
export function checkpointDigest(c: { org_id: string; seq: number; hash: string; created_at: string }): string {
  return sha256(canonicalize({ org_id: c.org_id, seq: c.seq, hash: c.hash, created_at: c.created_at })!);
}

/** Ed25519 over the 32 bytes of a hex SHA-256, as evidence records, checkpoints and manifests are signed. */
function signs(key: KeyObject | undefined, digestHex: string, signature: string): boolean {
  if (!key) return false;
  try {
    return verify(null, Buffer.from(digestHex, 'hex'), key, Buffer.from(signature, 'base64url'));
  } catch {
    return false;
  }
}

class BrokenError extends Error {
  constructor(readonly broken: Broken) {
    super(broken.message);
  }
}

const fileBroken = (file: string, reason: BrokenReason, what: string) =>
  new BrokenError({ file, seq: null, id: null, reason, message: `${file}: ${what}` });

const HEX64 = /^[0-9a-f]{64}$/;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isSeq = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isPoint = (v: unknown): v is ChainPoint => isObject(v) && isSeq(v.seq) && typeof v.hash === 'string' && HEX64.test(v.hash);

/** Gunzips and untars the archive: its regular files by path (folders are skipped, anything else refused). */
async function unpack(archive: Buffer): Promise<Map<string, Buffer>> {
  let tarBytes: Buffer;
  try {
    tarBytes = await promisify(gunzip)(archive, { maxOutputLength: MAX_UNPACKED_BYTES });
  } catch (err) {
    throw fileBroken('the archive', 'unreadable', `not a readable .tar.gz (${(err as Error).message})`);
  }
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  extract.end(tarBytes);
  try {
    for await (const entry of extract) {
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      // An archive packed again by hand (`tar -czf x.tar.gz -C dir .`) has folders and `./` before the names.
      const name = entry.header.name.replace(/^(\.\/)+/, '');
      if (entry.header.type === 'directory') continue;
      if (entry.header.type !== 'file') throw new Error(`${name} is not a regular file`);
      if (files.has(name)) throw new Error(`${name} appears twice`);
      files.set(name, Buffer.concat(chunks));
    }
  } catch (err) {
    throw fileBroken('the archive', 'unreadable', `not a readable tar archive (${(err as Error).message})`);
  }
  return files;
}

function parseManifest(bytes: Buffer | undefined): BundleManifest {
  if (!bytes) throw fileBroken('manifest.json', 'file_missing', 'missing from the archive');
  let m: unknown;
  try {
    m = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw fileBroken('manifest.json', 'manifest_invalid', 'not valid JSON (altered?)');
  }
  const ok =
    isObject(m) &&
    m.format === BUNDLE_FORMAT &&
    m.version === BUNDLE_VERSION &&
    isObject(m.organisation) &&
    typeof m.organisation.id === 'string' &&
    isObject(m.window) &&
    isObject(m.records) &&
    isSeq(m.records.count) &&
    isPoint(m.head_before) &&
    isPoint(m.head_after) &&
    typeof m.kid === 'string' &&
    isObject(m.files) &&
    Object.values(m.files).every((v) => typeof v === 'string');
  if (!ok) throw fileBroken('manifest.json', 'manifest_invalid', `not the manifest of a ${BUNDLE_FORMAT} version ${BUNDLE_VERSION}`);
  return m as unknown as BundleManifest;
}

/** keys/<kid>.pem: each an Ed25519 public key whose id is its file name. */
function readKeys(files: Map<string, Buffer>): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  for (const [name, bytes] of files) {
    const m = /^keys\/([A-Za-z0-9_-]+)\.pem$/.exec(name);
    if (!m) {
      if (name.startsWith('keys/')) throw fileBroken(name, 'key_invalid', 'not named keys/<kid>.pem');
      continue;
    }
    let key: KeyObject;
    try {
      key = createPublicKey({ key: bytes, format: 'pem' });
    } catch {
      throw fileBroken(name, 'key_invalid', 'not a PEM public key');
    }
    if (key.asymmetricKeyType !== 'ed25519') throw fileBroken(name, 'key_invalid', 'not an Ed25519 key');
    if (kidOf(key) !== m[1]) throw fileBroken(name, 'key_invalid', `holds the key ${kidOf(key)}, not the key its name says`);
    keys.set(m[1]!, key);
  }
  return keys;
}

/** A file's lines, as bytes, without their newlines; a last line without one counts too. */
function lines(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (let nl = bytes.indexOf(0x0a); nl >= 0; nl = bytes.indexOf(0x0a, start)) {
    out.push(bytes.subarray(start, nl));
    start = nl + 1;
  }
  if (start < bytes.length) out.push(bytes.subarray(start));
  return out;
}

/**
 * Walks records.jsonl and bodies.jsonl together: each record's fields are its canonical body, the body hashes
 * to the record's hash, seq follows on, prev_hash links to the hash before (the first to the manifest's head
 * before the window), the signature verifies with the key the record's kid names. Answers the hashes at the
 * seqs in `wanted` and the last position reached.
 */
function walkRecords(files: Map<string, Buffer>, manifest: BundleManifest, keys: Map<string, KeyObject>, wanted: Set<number>) {
  const recordBytes = files.get('records.jsonl');
  const bodyBytes = files.get('bodies.jsonl');
  if (!recordBytes) throw fileBroken('records.jsonl', 'file_missing', 'missing from the archive');
  if (!bodyBytes) throw fileBroken('bodies.jsonl', 'file_missing', 'missing from the archive');
  const records = lines(recordBytes);
  const bodies = lines(bodyBytes);
  const hashes = new Map<number, string>();
  let expected = manifest.head_before.seq + 1;
  let prev = manifest.head_before.hash;
  if (wanted.has(manifest.head_before.seq)) hashes.set(manifest.head_before.seq, prev);

  for (let i = 0; i < records.length; i++) {
    let record: unknown;
    try {
      record = JSON.parse(records[i]!.toString('utf8'));
    } catch {
      record = undefined;
    }
    const seq = isObject(record) && isSeq(record.seq) ? record.seq : expected;
    const id = isObject(record) && typeof record.id === 'string' ? record.id : null;
    const broken = (reason: BrokenReason, what: string) =>
      new BrokenError({ file: 'records.jsonl', seq, id, reason, message: `record ${seq} (id ${id ?? 'unknown'}): ${what}` });
    if (!isObject(record)) throw broken('record_invalid', `line ${i + 1} of records.jsonl is not a JSON object`);
    const { hash, signature, kid, ...fields } = record;
    if (typeof hash !== 'string' || typeof signature !== 'string' || typeof kid !== 'string') {
      throw broken('record_invalid', 'has no hash, signature or kid');
    }
    const body = bodies[i];
    if (body === undefined) throw broken('body_mismatch', 'has no canonical body in bodies.jsonl');
    if (canonicalize(fields) !== body.toString('utf8')) throw broken('body_mismatch', 'its fields in records.jsonl differ from its canonical body');
    if (sha256(body) !== hash) throw broken('hash_mismatch', 'hash does not match its body');
    if (fields.org_id !== manifest.organisation.id) throw broken('wrong_organisation', `belongs to organisation ${String(fields.org_id)}, not the bundle's`);
    if (seq !== expected) {
      throw broken('sequence_gap', seq > expected ? `expected seq ${expected}: a record before it is missing` : `expected seq ${expected}: records are out of order`);
    }
    if (fields.prev_hash !== prev) {
      throw broken('prev_hash_mismatch', i === 0 ? "prev_hash is not the manifest's head before the window" : 'prev_hash does not link to the record before');
    }
    if (!keys.has(kid)) throw broken('unknown_key', `signed with key ${kid}, which is not in the bundle`);
    if (!signs(keys.get(kid), hash, signature)) throw broken('signature_invalid', `signature does not verify with key ${kid}`);
    if (wanted.has(seq)) hashes.set(seq, hash);
    prev = hash;
    expected++;
  }
  if (bodies.length > records.length) {
    throw fileBroken('bodies.jsonl', 'extra_records', `holds ${bodies.length} bodies for ${records.length} records`);
  }
  return { count: records.length, last: { seq: expected - 1, hash: prev }, hashes };
}

/** The manifest's count, seq range and head after the window, against what the walk found. */
function checkTotals(manifest: BundleManifest, walked: { count: number; last: ChainPoint }): void {
  const { count, first_seq: first, last_seq: last } = manifest.records;
  if (walked.count < count) {
    throw new BrokenError({
      file: 'records.jsonl',
      seq: walked.last.seq + 1,
      id: null,
      reason: 'missing_records',
      message: `records.jsonl: the manifest lists ${count} records, the bundle holds ${walked.count}: records from seq ${walked.last.seq + 1} are missing`,
    });
  }
  if (walked.count > count) throw fileBroken('records.jsonl', 'extra_records', `holds ${walked.count} records, the manifest lists ${count}`);
  const range = count === 0 ? first === null && last === null : first === manifest.head_before.seq + 1 && last === walked.last.seq;
  if (!range) throw fileBroken('manifest.json', 'manifest_invalid', `its seq range does not match the ${count} records`);
  if (walked.last.seq !== manifest.head_after.seq || walked.last.hash !== manifest.head_after.hash) {
    throw fileBroken('records.jsonl', 'head_mismatch', "the last record is not the manifest's head after the window");
  }
}

/** Every file but the manifest and its signature is listed in the manifest with its SHA-256, and matches it. */
function checkDigests(files: Map<string, Buffer>, manifest: BundleManifest): void {
  for (const [name, digest] of Object.entries(manifest.files)) {
    const bytes = files.get(name);
    if (!bytes) throw fileBroken(name, 'file_missing', 'listed in the manifest, missing from the archive');
    if (sha256(bytes) !== digest) throw fileBroken(name, 'digest_mismatch', 'does not match its SHA-256 in the manifest');
  }
  for (const name of files.keys()) {
    if (name !== 'manifest.json' && name !== 'manifest.sig' && !(name in manifest.files)) {
      throw fileBroken(name, 'file_unlisted', 'not listed in the manifest');
    }
  }
}

function parseCheckpoint(input: CheckpointInput, manifest: BundleManifest): Checkpoint & { name: string } {
  const c = input.value;
  const broken = (reason: BrokenReason, what: string) =>
    new BrokenError({ file: input.name, seq: isObject(c) && isSeq(c.seq) ? c.seq : null, id: null, reason, message: `checkpoint ${input.name}: ${what}` });
  const ok =
    isObject(c) &&
    typeof c.org_id === 'string' &&
    isSeq(c.seq) &&
    typeof c.hash === 'string' &&
    HEX64.test(c.hash) &&
    typeof c.created_at === 'string' &&
    !Number.isNaN(Date.parse(c.created_at)) &&
    typeof c.kid === 'string' &&
    typeof c.signature === 'string';
  if (!ok) throw broken('checkpoint_invalid', 'not a checkpoint (org_id, seq, hash, created_at, kid, signature)');
  const checkpoint = { name: input.name, org_id: c.org_id, seq: c.seq, hash: c.hash, created_at: c.created_at, kid: c.kid, signature: c.signature } as Checkpoint & {
    name: string;
  };
  if (checkpoint.org_id !== manifest.organisation.id) {
    throw broken('checkpoint_invalid', `of organisation ${checkpoint.org_id}, the bundle is of ${manifest.organisation.id}`);
  }
  return checkpoint;
}

/**
 * Each checkpoint is signed by a key of the bundle and lies on the bundle's verified chain (its seq within the
 * bundle, its hash the bundle's hash at that seq), and checkpoints signed later are not behind earlier ones. So
 * the records between two checkpoints link the earlier's head to the later's: the later extends the earlier.
 */
function checkCheckpoints(
  checkpoints: Array<Checkpoint & { name: string }>,
  manifest: BundleManifest,
  keys: Map<string, KeyObject>,
  hashes: Map<number, string>,
): void {
  const broken = (c: Checkpoint & { name: string }, reason: BrokenReason, what: string) =>
    new BrokenError({ file: c.name, seq: c.seq, id: null, reason, message: `checkpoint ${c.name} (seq ${c.seq}, ${c.created_at}): ${what}` });
  for (const c of checkpoints) {
    if (!keys.has(c.kid)) throw broken(c, 'checkpoint_signature_invalid', `signed with key ${c.kid}, which is not in the bundle`);
    if (!signs(keys.get(c.kid), checkpointDigest(c), c.signature)) throw broken(c, 'checkpoint_signature_invalid', `signature does not verify with key ${c.kid}`);
    const { head_before: before, head_after: after } = manifest;
    if (c.seq < before.seq || c.seq > after.seq) {
      throw broken(c, 'checkpoint_not_covered', `outside the bundle's chain (seq ${before.seq}..${after.seq}): build a bundle whose window covers it`);
    }
    if (hashes.get(c.seq) !== c.hash) {
      throw broken(c, 'checkpoint_mismatch', `the bundle's chain has another hash at seq ${c.seq}: the history was rewritten after the checkpoint`);
    }
  }
  const byTime = [...checkpoints].sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at) || a.seq - b.seq);
  for (let i = 1; i < byTime.length; i++) {
    if (byTime[i]!.seq < byTime[i - 1]!.seq) {
      throw broken(byTime[i]!, 'checkpoint_order', `signed after checkpoint ${byTime[i - 1]!.name} but at a lower seq: the chain was cut back`);
    }
  }
}

/**
 * Verifies a bundle, in this order: the archive, the manifest and its signature, the keys (each named by its
 * id), every record (body, hash, seq, link, signature), the manifest's totals and head after the window, the
 * SHA-256 of every file, then the checkpoints given. Answers the first thing broken, naming the record (seq and
 * id) where it is one.
 */
export async function verifyBundle(archive: Buffer, checkpointInputs: CheckpointInput[] = []): Promise<BundleVerdict> {
  let manifest: BundleManifest | null = null;
  let records = 0;
  let checkpoints: Array<Checkpoint & { name: string }> = [];
  try {
    const files = await unpack(archive);
    manifest = parseManifest(files.get('manifest.json'));
    const m = manifest;
    const keys = readKeys(files);
    const signature = files.get('manifest.sig');
    if (!signature) throw fileBroken('manifest.sig', 'file_missing', 'missing from the archive');
    if (!keys.has(m.kid)) throw fileBroken('manifest.json', 'manifest_signature_invalid', `signed with key ${m.kid}, which is not in the bundle`);
    if (!signs(keys.get(m.kid), sha256(files.get('manifest.json')!), signature.toString('utf8').trim())) {
      throw fileBroken('manifest.json', 'manifest_signature_invalid', `its signature (manifest.sig) does not verify with key ${m.kid}: the manifest or its signature was altered`);
    }
    checkpoints = checkpointInputs.map((c) => parseCheckpoint(c, m));
    const walked = walkRecords(files, m, keys, new Set(checkpoints.map((c) => c.seq)));
    records = walked.count;
    checkTotals(m, walked);
    checkDigests(files, m);
    checkCheckpoints(checkpoints, m, keys, walked.hashes);
    checkpoints.sort((a, b) => a.seq - b.seq || Date.parse(a.created_at) - Date.parse(b.created_at));
    return { valid: true, broken: null, manifest, records, checkpoints };
  } catch (err) {
    if (!(err instanceof BrokenError)) throw err;
    return { valid: false, broken: err.broken, manifest, records: 0, checkpoints: [] };
  }
}

/** The verdict as `tollgate evidence verify` prints it: the first line says OK or BROKEN. */
export function describeVerdict(v: BundleVerdict): string[] {
  if (!v.valid || !v.manifest) return [`BROKEN: ${v.broken?.message ?? 'the bundle cannot be verified'}`];
  const m = v.manifest;
  const point = (p: ChainPoint) => (p.seq === 0 && p.hash === GENESIS ? 'genesis (no record before)' : `seq ${p.seq} ${p.hash}`);
  const out = [
    m.records.count === 0
      ? `OK: 0 records (none created in the window; the chain stood at seq ${m.head_after.seq})`
      : `OK: ${m.records.count} records, seq ${m.records.first_seq}..${m.records.last_seq}`,
    `organisation: ${m.organisation.name} (${m.organisation.slug}, ${m.organisation.id})`,
    `window: created at or after ${m.window.since} and before ${m.window.until}`,
    `head before: ${point(m.head_before)}`,
    `head after: ${point(m.head_after)}`,
    `chain head when built (${m.generated_at}): ${point(m.chain_head)}`,
    `keys: ${m.keys.map((k) => (k === m.kid ? `${k} (signed the manifest)` : k)).join(', ')}; compare them with the keys you hold (GET /evidence/keys)`,
  ];
  for (const c of v.checkpoints) out.push(`checkpoint ${c.name}: seq ${c.seq} at ${c.created_at}, signed by ${c.kid}, lies on this chain`);
  if (v.checkpoints.length > 1) {
    const [first, last] = [v.checkpoints[0]!, v.checkpoints[v.checkpoints.length - 1]!];
    out.push(`the chain extends checkpoint seq ${first.seq} to checkpoint seq ${last.seq}: the records between them link the one to the other`);
  }
  return out;
}
