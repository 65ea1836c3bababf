import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CATALOGUE, CatalogueError, controlId, frameworksDir, loadCatalogue, parseFramework, uuidV5, type Control } from '../../api/modules/governance/catalogue.js';
import { controlStatus, frameworkCoverage, probeKey, readinessOf, type CoverageFacts } from '../../api/modules/governance/coverage.js';
import { EVIDENCE_EVENT_TYPE_NAMES, EVIDENCE_EVENT_TYPES } from '../../api/modules/governance/evidence-types.js';
import { GAP_CHECKS, gapsFor, type AgentFacts } from '../../api/modules/governance/gaps.js';

/**
 * The framework catalogues as shipped (three frameworks, deterministic control ids, default mappings that name
 * catalogued evidence types), the validation that stops the start on a bad file, the evidence type catalogue
 * against the code that writes evidence, and the pure rules of coverage, readiness and classification gaps.
 */

const eu = CATALOGUE.frameworks.find((f) => f.key === 'eu-ai-act')!;
const nist = CATALOGUE.frameworks.find((f) => f.key === 'nist-ai-rmf')!;
const iso = CATALOGUE.frameworks.find((f) => f.key === 'iso-42001')!;

describe('the shipped catalogue', () => {
  it('has the EU AI Act, the NIST AI RMF and ISO/IEC 42001, in the order of their keys', () => {
    expect(CATALOGUE.frameworks.map((f) => f.key)).toEqual(['eu-ai-act', 'iso-42001', 'nist-ai-rmf']);
    for (const f of CATALOGUE.frameworks) {
      expect(f.name.length).toBeGreaterThan(3);
      expect(f.version.length).toBeGreaterThan(0);
    }
  });

  it('covers the EU AI Act obligations of high-risk systems, the NIST functions and their categories, and the ISO Annex A areas', () => {
    const refs = (f: typeof eu) => f.controls.map((c) => c.ref);
    // Risk management, data governance, technical documentation, record-keeping, transparency, human oversight,
    // accuracy/robustness/cybersecurity.
    expect(refs(eu)).toEqual(expect.arrayContaining(['Art.9', 'Art.10', 'Art.11', 'Art.12', 'Art.13', 'Art.14', 'Art.15']));
    expect(eu.controls.find((c) => c.ref === 'Art.14')!.title).toBe('Human oversight');
    const functions = new Set(refs(nist).map((r) => r.split('-')[0]));
    expect([...functions]).toEqual(['GOVERN', 'MAP', 'MEASURE', 'MANAGE']);
    expect(refs(nist).filter((r) => r.startsWith('GOVERN-'))).toHaveLength(6);
    expect(refs(nist).filter((r) => r.startsWith('MAP-'))).toHaveLength(5);
    expect(refs(nist).filter((r) => r.startsWith('MEASURE-'))).toHaveLength(4);
    expect(refs(nist).filter((r) => r.startsWith('MANAGE-'))).toHaveLength(4);
    expect(refs(iso)).toEqual(['A.2', 'A.3', 'A.4', 'A.5', 'A.6', 'A.7', 'A.8', 'A.9', 'A.10']);
  });

  it('derives control ids as UUID v5 of `<framework>:<ref>` under the fixed namespace: the same on every install', () => {
    // RFC 9562's example: the DNS namespace and www.example.com.
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
    // Pinned: changing the namespace or the derivation would orphan every stored control id.
    expect(controlId('eu-ai-act', 'Art.14')).toBe(uuidV5('eu-ai-act:Art.14', '9085b369-0947-4745-ad6c-4bac7e0e9dc1'));
    const human = CATALOGUE.byKey.get('eu-ai-act:Art.14')!;
    expect(human.id).toBe(controlId('eu-ai-act', 'Art.14'));
    expect(CATALOGUE.byId.get(human.id)).toBe(human);
    const all = CATALOGUE.frameworks.flatMap((f) => f.controls);
    expect(new Set(all.map((c) => c.id)).size).toBe(all.length);
    for (const c of all) {
      expect(c.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(c.key).toBe(`${c.framework}:${c.ref}`);
    }
    // Loading the files again gives the same ids.
    expect([...loadCatalogue(frameworksDir()).byId.keys()]).toEqual([...CATALOGUE.byId.keys()]);
  });

  it('maps controls by default only to catalogued evidence types, most of them to at least one', () => {
    const all = CATALOGUE.frameworks.flatMap((f) => f.controls);
    for (const c of all) for (const m of c.evidence) expect(EVIDENCE_EVENT_TYPE_NAMES).toContain(m.evidence_event_type);
    expect(all.filter((c) => c.evidence.length === 0).map((c) => c.key)).toEqual(['nist-ai-rmf:GOVERN-3', 'nist-ai-rmf:GOVERN-5']);
  });

  it('names in the classification checks only controls it has, one control per check', () => {
    for (const check of GAP_CHECKS) expect(CATALOGUE.byId.get(check.control.id)).toBe(check.control);
    expect(new Set(GAP_CHECKS.map((c) => c.control.id)).size).toBe(GAP_CHECKS.length);
  });
});

describe('validation of a framework file', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  const good = () => ({
    key: 'test-frame',
    name: 'Test framework',
    version: '1',
    description: 'A framework for the test.',
    controls: [{ ref: 'C-1', title: 'First control', description: 'What the first control asks.', evidence: [{ event_type: 'decision', rationale: 'Decisions are kept.' }] }],
  });

  const withFile = (name: string, content: unknown) => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-frameworks-'));
    writeFileSync(path.join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
    return dir;
  };

  it('accepts a good file and derives its controls', () => {
    const c = loadCatalogue(withFile('test-frame.json', good()));
    expect(c.frameworks).toHaveLength(1);
    expect(c.byKey.get('test-frame:C-1')).toMatchObject({ id: controlId('test-frame', 'C-1'), evidence: [{ evidence_event_type: 'decision', condition: null }] });
  });

  it.each<[string, string, unknown, RegExp]>([
    ['not JSON', 'test-frame.json', '{"key": ', /test-frame\.json is not JSON/],
    ['an evidence type not in the catalogue', 'test-frame.json', { ...good(), controls: [{ ...good().controls[0], evidence: [{ event_type: 'decisions', rationale: 'A typo.' }] }] }, /test-frame\.json is not a valid framework: controls\.0\.evidence\.0\.event_type/],
    ['a control without a title', 'test-frame.json', { ...good(), controls: [{ ref: 'C-1', description: 'What the first control asks.', evidence: [] }] }, /controls\.0\.title/],
    ['an unknown field (a misspelling)', 'test-frame.json', { ...good(), controls: [{ ...good().controls[0], evidance: [] }] }, /controls\.0: Unrecognized key/i],
    ['no controls', 'test-frame.json', { ...good(), controls: [] }, /controls:/],
    ['a reference with a space', 'test-frame.json', { ...good(), controls: [{ ...good().controls[0], ref: 'C 1' }] }, /controls\.0\.ref/],
    ['a condition that is not an object', 'test-frame.json', { ...good(), controls: [{ ...good().controls[0], evidence: [{ event_type: 'decision', rationale: 'Denials.', condition: 'deny' }] }] }, /evidence\.0\.condition/],
    ['the same reference twice', 'test-frame.json', { ...good(), controls: [good().controls[0], good().controls[0]] }, /the control C-1 appears twice/],
    ['a file named other than its key', 'other.json', good(), /other\.json holds the framework "test-frame": name the file test-frame\.json/],
  ])('refuses %s, naming the file and the problem', (_what, name, content, message) => {
    const d = withFile(name, content);
    expect(() => loadCatalogue(d)).toThrow(CatalogueError);
    expect(() => loadCatalogue(d)).toThrow(message);
    expect(() => loadCatalogue(d)).toThrow(/^governance catalogue: /);
  });

  it('refuses a folder without framework files, and one that does not exist', () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-frameworks-'));
    expect(() => loadCatalogue(dir!)).toThrow(/no framework file/);
    expect(() => loadCatalogue(path.join(dir!, 'missing'))).toThrow(/cannot read the framework files/);
  });

  it('checks the shipped files the same way', () => {
    for (const f of readdirSync(frameworksDir())) {
      expect(() => parseFramework(f, readFileSync(path.join(frameworksDir(), f), 'utf8'))).not.toThrow();
    }
  });
});

describe('the evidence event type catalogue', () => {
  /** Every `eventType: '<name>'` written in the product's code. */
  function writtenTypes(): Set<string> {
    const root = path.resolve(import.meta.dirname, '../../api');
    const out = new Set<string>();
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = path.join(d, name);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith('.ts')) for (const m of readFileSync(p, 'utf8').matchAll(/eventType: '([a-z_]+)'/g)) out.add(m[1]!);
      }
    };
    walk(root);
    return out;
  }

  it('lists every event type the code writes, and nothing nobody writes', () => {
    expect([...writtenTypes()].sort()).toEqual([...EVIDENCE_EVENT_TYPE_NAMES].sort());
  });

  it('says who writes each type and what its payload holds', () => {
    for (const [name, entry] of Object.entries(EVIDENCE_EVENT_TYPES)) {
      expect(entry.writtenBy.length, name).toBeGreaterThan(10);
      expect(Object.keys(entry.payload).length, name).toBeGreaterThan(0);
    }
  });
});

describe('coverage rules', () => {
  const control: Control = CATALOGUE.byKey.get('eu-ai-act:Art.14')!;
  const probes = control.evidence;
  const facts = (over: Partial<CoverageFacts> = {}): CoverageFacts => ({ windowDays: 90, found: new Set(), openTasks: new Map(), exceptions: new Map(), ...over });
  const exception = { id: '11111111-1111-4111-8111-111111111111', title: 'Oversight waived', expires_at: new Date('2027-01-01T00:00:00Z') };
  const task = { id: '22222222-2222-4222-8222-222222222222', title: 'Add approvals' };

  it('is met by any mapped evidence in the window, and says which', () => {
    const s = controlStatus(control, probes, facts({ found: new Set([probeKey(probes[1]!)]) }));
    expect(s).toEqual({ id: control.id, ref: 'Art.14', title: 'Human oversight', status: 'met', why: 'evidence in the last 90 days: containment' });
  });

  it('is not met without evidence, naming what is missing; excepted when an exception covers it', () => {
    expect(controlStatus(control, probes, facts())).toMatchObject({ status: 'not_met', why: 'no evidence of approval or containment in the last 90 days' });
    const excepted = controlStatus(control, probes, facts({ exceptions: new Map([[control.id, [exception]]]) }));
    expect(excepted.status).toBe('excepted');
    expect(excepted.why).toContain(`exception "Oversight waived" (${exception.id}) until 2027-01-01T00:00:00.000Z`);
  });

  it('is not met while a remediation task is open on it, evidence or exception notwithstanding', () => {
    const s = controlStatus(control, probes, facts({ found: new Set(probes.map(probeKey)), exceptions: new Map([[control.id, [exception]]]), openTasks: new Map([[control.id, [task]]]) }));
    expect(s).toMatchObject({ status: 'not_met', why: `open remediation task "Add approvals" (${task.id})` });
  });

  it('names the condition of a probe, and says when nothing is mapped at all', () => {
    const deny = { evidence_event_type: 'decision', condition: { decision: 'deny' } };
    expect(controlStatus(control, [deny], facts()).why).toBe('no evidence of decision with {"decision":"deny"} in the last 90 days');
    expect(controlStatus(control, [], facts()).why).toBe('no evidence is mapped to this control');
    // Key order does not make another probe.
    expect(probeKey({ evidence_event_type: 'x', condition: { a: 1, b: 2 } })).toBe(probeKey({ evidence_event_type: 'x', condition: { b: 2, a: 1 } }));
  });

  it('is ready with nothing not met, partial from half covered, not ready below', () => {
    expect(readinessOf(0, 100)).toBe('ready');
    expect(readinessOf(1, 50)).toBe('partial');
    expect(readinessOf(1, 49.9)).toBe('not_ready');
    const s = (status: 'met' | 'excepted' | 'not_met') => ({ id: control.id, ref: 'x', title: 'x', status, why: 'x' });
    const c = frameworkCoverage(eu, [s('met'), s('excepted'), s('not_met')], { days: 30, since: new Date(0), until: new Date(1000) });
    expect(c).toMatchObject({ controls_total: 3, controls_met: 1, controls_excepted: 1, controls_not_met: 1, coverage_percent: 66.7, readiness: 'partial', window_days: 30 });
    expect(c.failing_controls).toEqual([s('not_met')]);
  });
});

describe('classification gaps', () => {
  const now = new Date('2026-11-23T09:00:00Z');
  const ctx = { now, windowDays: 90 };
  const complete: AgentFacts = {
    status: 'active',
    purpose: 'Answers customers',
    description: 'A support agent',
    gateway_enforced: true,
    last_attested_at: new Date('2026-11-01T00:00:00Z'),
    has_accountable_owner: true,
    has_risk_score: true,
    decided_in_window: true,
    approved_in_window: true,
  };
  const keys = (cls: Parameters<typeof gapsFor>[0], f: Partial<AgentFacts>) => gapsFor(cls, { ...complete, ...f }, ctx).map((g) => g.key);

  it('checks nothing for an unclassified agent and only ownership for a minimal one', () => {
    const bare = { has_accountable_owner: false, purpose: '', description: '', gateway_enforced: false, last_attested_at: null, has_risk_score: false, decided_in_window: false, approved_in_window: false };
    expect(keys('unclassified', bare)).toEqual([]);
    expect(keys('minimal', bare)).toEqual(['accountable_owner']);
    expect(keys('limited', bare)).toEqual(['accountable_owner', 'transparency']);
    expect(keys('high', bare)).toEqual([
      'accountable_owner',
      'transparency',
      'owner_attestation',
      'risk_management',
      'gateway_enforcement',
      'record_keeping',
      'human_oversight',
    ]);
    expect(keys('high', {})).toEqual([]);
  });

  it('gives a high system without a person’s approval in the window a human-oversight gap on Art.14', () => {
    const [gap] = gapsFor('high', { ...complete, approved_in_window: false }, ctx);
    expect(gap).toMatchObject({ key: 'human_oversight', control: { key: 'eu-ai-act:Art.14' }, why: 'no approval decided by a person for the agent in the last 90 days' });
  });

  it('ages an attestation past 90 days, and wants a prohibited system out of service', () => {
    expect(keys('high', { last_attested_at: new Date(now.getTime() - 91 * 86_400_000) })).toEqual(['owner_attestation']);
    expect(keys('high', { last_attested_at: new Date(now.getTime() - 90 * 86_400_000) })).toEqual([]);
    expect(keys('prohibited', {})).toEqual(['prohibited_in_service']);
    expect(keys('prohibited', { status: 'suspended' })).toEqual([]);
    expect(keys('prohibited', { status: 'revoked' })).toEqual([]);
  });
});
