import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { EVIDENCE_EVENT_TYPE_NAMES, type EvidenceEventType } from './evidence-types.js';

/**
 * The framework catalogues (docs/governance.md, Frameworks and controls): one JSON file per framework in
 * `frameworks/`, read and checked when the module loads, so a bad file stops `tollgate api` and `tollgate worker` at
 * start with a message naming the file and the field. Controls are the same on every install and in every
 * organisation: a control's id is a UUID derived from `<framework>:<ref>` (version 5, under CONTROL_NAMESPACE), so
 * an id written down today (in a mapping, an exception, a task, a report) names the same control tomorrow.
 */

/** The fixed namespace of control ids. Never change it: every stored control id is derived from it. */
export const CONTROL_NAMESPACE = '9085b369-0947-4745-ad6c-4bac7e0e9dc1';

/** A name-based UUID, version 5 (SHA-1), as RFC 9562 defines it. */
export function uuidV5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  if (ns.length !== 16) throw new Error(`not a UUID: ${namespace}`);
  const b = createHash('sha1').update(ns).update(name, 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A control's id: the same for `<framework>:<ref>` everywhere. */
export const controlId = (framework: string, ref: string) => uuidV5(`${framework}:${ref}`, CONTROL_NAMESPACE);

/** What the payload of a record must contain (jsonb `@>`), as a framework file or a mapping states it. */
export const conditionSchema = z.record(z.string(), z.unknown());
export type Condition = z.infer<typeof conditionSchema>;

const evidenceEntry = z
  .object({
    event_type: z.enum(EVIDENCE_EVENT_TYPE_NAMES as [EvidenceEventType, ...EvidenceEventType[]]),
    rationale: z.string().trim().min(5).max(1000),
    condition: conditionSchema.optional(),
  })
  .strict();

const controlEntry = z
  .object({
    ref: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,39}$/, 'a reference: letters, digits, dots and hyphens, at most 40'),
    title: z.string().trim().min(3).max(200),
    description: z.string().trim().min(10).max(2000),
    evidence: z.array(evidenceEntry).max(20),
  })
  .strict();

/** The shape of one framework file. Unknown keys are refused, so that a misspelt field never goes unnoticed. */
export const frameworkFile = z
  .object({
    key: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'a key: lower-case letters and digits in hyphenated words').max(40),
    name: z.string().trim().min(3).max(200),
    version: z.string().trim().min(1).max(100),
    description: z.string().trim().min(10).max(2000),
    controls: z.array(controlEntry).min(1).max(500),
  })
  .strict();

export interface DefaultMapping {
  evidence_event_type: EvidenceEventType;
  rationale: string;
  condition: Condition | null;
}

export interface Control {
  id: string;
  /** `<framework>:<ref>`, e.g. `eu-ai-act:Art.14`: what evidence records name in `control_ref`. */
  key: string;
  framework: string;
  ref: string;
  title: string;
  description: string;
  /** The catalogue's default evidence mappings; an organisation adds its own. */
  evidence: DefaultMapping[];
}

export interface Framework {
  key: string;
  name: string;
  version: string;
  description: string;
  controls: Control[];
}

export interface Catalogue {
  /** In the order of their keys. */
  frameworks: Framework[];
  byId: ReadonlyMap<string, Control>;
  byKey: ReadonlyMap<string, Control>;
}

/** A framework file that is not what the catalogue expects; the message names the file and every problem. */
export class CatalogueError extends Error {
  constructor(message: string) {
    super(`governance catalogue: ${message}`);
    this.name = 'CatalogueError';
  }
}

/** Checks one framework file's text; `file` names it in the messages (and must be `<key>.json`). */
export function parseFramework(file: string, text: string): Framework {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CatalogueError(`${file} is not JSON: ${(err as Error).message}`);
  }
  const parsed = frameworkFile.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`);
    throw new CatalogueError(`${file} is not a valid framework: ${problems.join('; ')}`);
  }
  const f = parsed.data;
  if (file !== `${f.key}.json`) throw new CatalogueError(`${file} holds the framework "${f.key}": name the file ${f.key}.json`);
  const refs = new Set<string>();
  for (const c of f.controls) {
    if (refs.has(c.ref)) throw new CatalogueError(`${file}: the control ${c.ref} appears twice`);
    refs.add(c.ref);
  }
  return {
    key: f.key,
    name: f.name,
    version: f.version,
    description: f.description,
    controls: f.controls.map((c) => ({
      id: controlId(f.key, c.ref),
      key: `${f.key}:${c.ref}`,
      framework: f.key,
      ref: c.ref,
      title: c.title,
      description: c.description,
      evidence: c.evidence.map((e) => ({ evidence_event_type: e.event_type, rationale: e.rationale, condition: e.condition ?? null })),
    })),
  };
}

/** Reads and checks every `*.json` of `dir`; throws a CatalogueError for the first bad file, or for none at all. */
export function loadCatalogue(dir: string): Catalogue {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  } catch (err) {
    throw new CatalogueError(`cannot read the framework files in ${dir}: ${(err as Error).message}`);
  }
  if (files.length === 0) throw new CatalogueError(`no framework file (*.json) in ${dir}`);
  const frameworks = files.map((f) => parseFramework(f, readFileSync(`${dir}/${f}`, 'utf8')));
  const byId = new Map<string, Control>();
  const byKey = new Map<string, Control>();
  for (const c of frameworks.flatMap((f) => f.controls)) {
    byId.set(c.id, c);
    byKey.set(c.key, c);
  }
  return { frameworks, byId, byKey };
}

/**
 * Where the shipped framework files are: beside this module, in the source tree and in the compiled `dist/` alike
 * (the build copies them there: Makefile, `dist/cli.js`; package.json, `build`).
 */
export function frameworksDir(): string {
  const dir = fileURLToPath(new URL('./frameworks', import.meta.url));
  if (!existsSync(dir)) throw new CatalogueError(`the framework files are missing (looked in ${dir})`);
  return dir;
}

/** The shipped catalogue, checked once when the module loads: a bad file stops the process at start. */
export const CATALOGUE: Catalogue = loadCatalogue(frameworksDir());

/** A control of the shipped catalogue by key; throws when the catalogue lacks it (code that names a control relies on it). */
export function requireControl(key: string, catalogue: Catalogue = CATALOGUE): Control {
  const c = catalogue.byKey.get(key);
  if (!c) throw new CatalogueError(`the control ${key} is missing, and Tollgate relies on it`);
  return c;
}
