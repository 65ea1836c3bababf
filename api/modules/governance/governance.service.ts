import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { RequestContext } from '../../platform/context.js';
import { ApiError, notFound, validationFailed } from '../../platform/errors.js';
import { auditWithEvidence, firstSeqSince } from '../evidence/index.js';
import { CATALOGUE, type Control } from './catalogue.js';
import { controlStatus, frameworkCoverage, probeKey, type CoverageFacts, type EvidenceProbe, type FrameworkCoverage } from './coverage.js';
import { isCatalogued } from './evidence-types.js';
import {
  insertMapping,
  listMappings,
  openTasksByControl,
  orgExceptionsInForce,
  probeEvidence,
  toMapping,
  type MappingRow,
} from './governance.repository.js';
import { DEFAULT_WINDOW_DAYS, MAX_CONDITION_CHARS, type MappingIn, type MappingOut } from './governance.schemas.js';

const DAY_MS = 86_400_000;

export interface Window {
  days: number;
  since: Date;
  until: Date;
}

function windowOf(now: Date, days: number): Window {
  if (!Number.isInteger(days) || days < 1 || days > 365) {
    throw validationFailed([{ field: 'days', message: 'must be a whole number of days from 1 to 365' }]);
  }
  return { days, since: new Date(now.getTime() - days * DAY_MS), until: now };
}

export function controlOr404(controlId: string): Control {
  const control = CATALOGUE.byId.get(controlId);
  if (!control) throw notFound('No such control.');
  return control;
}

/** What counts as evidence for a control: the catalogue's default mappings, then the organisation's own. */
function probesOf(control: Control, own: MappingRow[]): EvidenceProbe[] {
  return [
    ...control.evidence,
    ...own.filter((m) => m.control_id === control.id).map((m) => ({ evidence_event_type: m.evidence_event_type, condition: m.condition ?? null })),
  ];
}

/**
 * The facts coverage is decided on for `controls`, read in the caller's transaction: every distinct probe of their
 * mappings checked against the evidence chain from the window's first record on, the open remediation tasks on
 * them, and the organisation's exceptions in force.
 */
async function coverageFacts(tx: Tx, orgId: string, window: Window, controls: Control[], own: MappingRow[]): Promise<CoverageFacts> {
  const distinct = new Map<string, EvidenceProbe>();
  for (const c of controls) for (const p of probesOf(c, own)) distinct.set(probeKey(p), p);
  const probes = [...distinct.values()];
  const fromSeq = await firstSeqSince(tx, orgId, window.since);
  const found = await probeEvidence(tx, orgId, fromSeq, probes);
  const ids = controls.length === CATALOGUE.byId.size ? undefined : controls.map((c) => c.id);
  return {
    windowDays: window.days,
    found: new Set(probes.filter((_, i) => found[i]).map(probeKey)),
    openTasks: await openTasksByControl(tx, orgId, ids),
    exceptions: await orgExceptionsInForce(tx, orgId, window.until),
  };
}

/** Coverage of every framework of the catalogue for the organisation, in the caller's transaction. */
export async function coverageIn(tx: Tx, orgId: string, window: Window): Promise<FrameworkCoverage[]> {
  const own = await listMappings(tx, orgId);
  const facts = await coverageFacts(tx, orgId, window, [...CATALOGUE.byId.values()], own);
  return CATALOGUE.frameworks.map((f) =>
    frameworkCoverage(
      f,
      f.controls.map((c) => controlStatus(c, probesOf(c, own), facts)),
      window,
    ),
  );
}

/**
 * Coverage and readiness of every framework for the organisation over the `windowDays` (1-365) ending at `now`:
 * what GET /governance/frameworks answers, and what the governance readiness report prints.
 */
export function governanceReadiness(db: Db, orgId: string, now: Date, windowDays: number = DEFAULT_WINDOW_DAYS): Promise<FrameworkCoverage[]> {
  const window = windowOf(now, windowDays);
  return inScope(db, { orgId }, (tx) => coverageIn(tx, orgId, window));
}

const defaultMapping = (control: Control) => (m: Control['evidence'][number]): MappingOut => ({
  id: null,
  control_id: control.id,
  source: 'catalogue',
  evidence_event_type: m.evidence_event_type,
  condition: m.condition,
  rationale: m.rationale,
  catalogued: true,
  created_at: null,
  created_by: null,
});

/** One control: its place in the catalogue, every mapping, and its status for the organisation over the default window. */
export async function readControl(db: Db, orgId: string, controlId: string, now: Date) {
  const control = controlOr404(controlId);
  const framework = CATALOGUE.frameworks.find((f) => f.key === control.framework)!;
  const window = windowOf(now, DEFAULT_WINDOW_DAYS);
  return inScope(db, { orgId }, async (tx) => {
    const own = await listMappings(tx, orgId, control.id);
    const status = controlStatus(control, probesOf(control, own), await coverageFacts(tx, orgId, window, [control], own));
    return {
      ...status,
      key: control.key,
      framework: { key: framework.key, name: framework.name, version: framework.version },
      description: control.description,
      window_days: window.days,
      mappings: [...control.evidence.map(defaultMapping(control)), ...own.map(toMapping)],
    };
  });
}

/** An empty condition is none; a condition larger than MAX_CONDITION_CHARS as JSON is refused. */
function conditionOf(body: MappingIn): Record<string, unknown> | null {
  const c = body.condition;
  if (!c || Object.keys(c).length === 0) return null;
  if (JSON.stringify(c).length > MAX_CONDITION_CHARS) {
    throw validationFailed([{ field: 'condition', message: `must be at most ${MAX_CONDITION_CHARS} characters as JSON` }]);
  }
  return c;
}

const duplicate = (what: string) => new ApiError('conflict', what, { field: 'evidence_event_type' });

/**
 * Maps an evidence event type (and optional condition) to a control for the organisation; audited, with evidence
 * (control_mapping). The same type and condition as a mapping the control already has (the catalogue's or the
 * organisation's) answers 409 conflict.
 */
export async function addMapping(db: Db, clock: Clock, req: RequestContext, orgId: string, controlId: string, body: MappingIn): Promise<MappingOut> {
  const control = controlOr404(controlId);
  const condition = conditionOf(body);
  const probe = { evidence_event_type: body.evidence_event_type, condition };
  if (control.evidence.some((m) => probeKey(m) === probeKey(probe))) {
    throw duplicate(`The catalogue already maps ${body.evidence_event_type} with this condition to ${control.key}.`);
  }
  return inScope(db, { orgId }, async (tx) => {
    const row = await insertMapping(tx, {
      id: randomUUID(),
      org_id: orgId,
      control_id: control.id,
      evidence_event_type: body.evidence_event_type,
      rationale: body.rationale,
      condition: condition ? JSON.stringify(condition) : null,
      created_by: req.principal?.userId ?? null,
      created_at: clock.now(),
    });
    if (!row) throw duplicate(`${control.key} already maps ${body.evidence_event_type} with this condition.`);
    const details = {
      mapping_id: row.id,
      control_id: control.id,
      control_key: control.key,
      evidence_event_type: row.evidence_event_type,
      condition,
      rationale: row.rationale,
      ...(isCatalogued(row.evidence_event_type) ? {} : { catalogued: false }),
    };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'control.mapping_added', targetType: 'control', targetId: control.id, details },
      { eventType: 'control_mapping', controlRef: control.key, payload: details },
    );
    return toMapping(row);
  });
}
