import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { notFound } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import { agentOr404 } from '../agents/index.js';
import { audit } from '../audit/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import {
  clearStale,
  getScore,
  historyOf,
  isStale,
  loadInputs,
  loadRuleset,
  lockOrganisation,
  saveScores,
  staleGenerations,
  upsertOverride,
  type FactorRow,
  type Scored,
} from './risk.repository.js';
import type { FactorOut, RulesetPatch, ScoreOut, WhatIfIn } from './risk.schemas.js';
import { BANDS, score, type FactorResult, type RiskInputs } from './score.js';
import { applyWhatIf } from './what-if.js';

/** The detections window the ruleset asks for (days of denied decisions read). */
function windowDays(ruleset: readonly FactorRow[]): number {
  const w = ruleset.find((f) => f.key === 'detections')?.parameters.window_days;
  return typeof w === 'number' && w >= 1 && w <= 365 ? Math.floor(w) : 7;
}

const toScoreOut = (agentId: string, s: { result: ReturnType<typeof score>; inputs: RiskInputs }, computedAt: Date, stale: boolean): ScoreOut => ({
  agent_id: agentId,
  score: s.result.score,
  band: s.result.band,
  raw_total: s.result.raw,
  factors: s.result.factors,
  inputs: s.inputs as unknown as Record<string, unknown>,
  computed_at: iso(computedAt),
  stale,
});

/**
 * Recalculates the scores of these agents of the organisation and stores them (score, the day's history row, the
 * band on the agent) in one transaction that holds the organisation's recalculation lock: facts are read after the
 * lock, so the last writer of a score always read the newest facts. Then clears the stale marks it saw (a mark moved
 * since stays). Answers what it stored; ids of no agent of the organisation are skipped.
 */
export async function recalculate(db: Db, clock: Clock, orgId: string, agentIds: readonly string[]): Promise<{ now: Date; scored: Scored[] }> {
  const { now, scored, seen } = await inScope(db, { orgId }, (tx) => recalculateIn(tx, clock, orgId, agentIds));
  await inScope(db, { orgId }, (tx) => clearStale(tx, orgId, seen));
  return { now, scored };
}

/**
 * The recalculation's transaction. The stale marks it saw are cleared afterwards, in a transaction of their own:
 * a writer locks the registry version and then the marks at its commit, while a band written here locks the
 * registry version at this commit (migration 0006), so holding marks here could close a cycle.
 */
async function recalculateIn(tx: Tx, clock: Clock, orgId: string, agentIds: readonly string[]) {
  await lockOrganisation(tx, orgId);
  const seen = await staleGenerations(tx, orgId, agentIds);
  const ruleset = await loadRuleset(tx, orgId);
  const now = clock.now();
  const loaded = await loadInputs(tx, orgId, agentIds, now, windowDays(ruleset));
  const scored: Scored[] = [...loaded].map(([agentId, l]) => ({ agentId, inputs: l.inputs, result: score(l.inputs, ruleset, now), previousBand: l.band }));
  await saveScores(tx, orgId, scored, now);
  return { now, scored, seen };
}

/** The inputs and score of one agent now, from the registry as it is, saving nothing. */
async function computeNow(tx: Tx, clock: Clock, orgId: string, agentId: string) {
  const ruleset = await loadRuleset(tx, orgId);
  const now = clock.now();
  const loaded = (await loadInputs(tx, orgId, [agentId], now, windowDays(ruleset))).get(agentId);
  if (!loaded) throw notFound('No such agent.');
  return { ruleset, now, inputs: loaded.inputs, result: score(loaded.inputs, ruleset, now) };
}

/**
 * The agent's latest stored score, `stale` when an input changed since and its recalculation is queued. An agent
 * never scored yet (its first recalculation still queued) is scored now, from the registry, and nothing is saved.
 */
export function readScore(db: Db, clock: Clock, orgId: string, agentId: string): Promise<ScoreOut> {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const stored = await getScore(tx, orgId, agentId);
    if (!stored) {
      const c = await computeNow(tx, clock, orgId, agentId);
      return toScoreOut(agentId, c, c.now, true);
    }
    return {
      agent_id: agentId,
      score: stored.score,
      band: stored.band as ScoreOut['band'],
      raw_total: stored.raw_total,
      factors: stored.factors as FactorResult[],
      inputs: stored.inputs,
      computed_at: iso(stored.computed_at),
      stale: await isStale(tx, orgId, agentId),
    };
  });
}

/** POST .../recalculate: recomputes the agent's score now, stores it and answers it; audited. */
export async function recalculateNow(db: Db, clock: Clock, req: RequestContext, orgId: string, agentId: string): Promise<ScoreOut> {
  const { now, scored, seen } = await inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const r = await recalculateIn(tx, clock, orgId, [agentId]);
    const s = r.scored[0]!;
    await audit(tx, req, orgId, { action: 'risk.recalculated', targetType: 'agent', targetId: agentId, details: { score: s.result.score, band: s.result.band } });
    return r;
  });
  await inScope(db, { orgId }, (tx) => clearStale(tx, orgId, seen));
  return toScoreOut(agentId, scored[0]!, now, false);
}

/** The agent's daily history over the last `days` days (today included), oldest first. */
export function history(db: Db, clock: Clock, orgId: string, agentId: string, days: number) {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const since = iso(new Date(clock.now().getTime() - (days - 1) * 86_400_000)).slice(0, 10);
    const rows = await historyOf(tx, orgId, agentId, since);
    return { agent_id: agentId, days, items: rows.map((r) => ({ day: r.day, score: r.score, band: r.band as ScoreOut['band'], computed_at: iso(r.computed_at) })) };
  });
}

/**
 * What-if: the changes applied to a copy of the agent's inputs as they are now, both scored with the same ruleset
 * and clock; answers both totals, bands and each factor's difference. Reads in one transaction and writes nothing.
 */
export function whatIf(db: Db, clock: Clock, orgId: string, agentId: string, body: WhatIfIn) {
  return inScope(db, { orgId }, async (tx) => {
    // computeNow answers 404 for an agent the organisation does not have.
    const current = await computeNow(tx, clock, orgId, agentId);
    const changed = applyWhatIf(current.inputs, body, current.now);
    const proposed = score(changed.inputs, current.ruleset, current.now);
    return {
      agent_id: agentId,
      applied: changed.applied,
      current: { score: current.result.score, band: current.result.band },
      proposed: { score: proposed.score, band: proposed.band },
      difference: proposed.score - current.result.score,
      factors: proposed.factors.map((p, i) => {
        const c = current.result.factors[i]!;
        return {
          key: p.key,
          description: p.description,
          weight: p.weight,
          enabled: p.enabled,
          current: c.contribution,
          proposed: p.contribution,
          difference: p.contribution - c.contribution,
          why: p.why,
        };
      }),
      saved: false as const,
    };
  });
}

const toFactorOut = (f: FactorRow): FactorOut => ({
  key: f.key,
  position: f.position,
  description: f.description,
  weight: f.weight,
  enabled: f.enabled,
  default_enabled: f.default_enabled,
  parameters: f.parameters,
  override: f.override ? { ...f.override, changed_at: iso(f.override.changed_at) } : null,
});

/** The score ranges of the bands, both ends included. */
export const BAND_RANGES = BANDS.map((b, i) => ({ band: b.band, from: b.from, to: i === 0 ? 100 : BANDS[i - 1]!.from - 1 })).reverse();

export function readRuleset(db: Db, orgId: string) {
  return inScope(db, { orgId }, async (tx) => ({ factors: (await loadRuleset(tx, orgId)).map(toFactorOut), bands: BAND_RANGES }));
}

/**
 * Switches a factor on or off for the organisation, with a reason: audited and recorded as evidence
 * (risk_ruleset_change) in the same transaction. The override's trigger (migration 0010) asks for every agent of the
 * organisation to be recalculated, which the risk job does in the background. A patch that changes nothing writes
 * nothing. 404 for a key not in the ruleset.
 */
export function changeFactor(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, factorKey: string, patch: RulesetPatch): Promise<FactorOut> {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const before = (await loadRuleset(tx, orgId)).find((f) => f.key === factorKey);
    if (!before) throw notFound('No such risk factor.');
    if (before.enabled === patch.enabled) return toFactorOut(before);
    await upsertOverride(tx, orgId, { factor_key: factorKey, enabled: patch.enabled, reason: patch.reason, changed_by: actor.userId, changed_at: clock.now() });
    const enabled = { from: before.enabled, to: patch.enabled };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'risk.factor_changed', targetType: 'risk_factor', targetId: factorKey, details: { reason: patch.reason, enabled } },
      { eventType: 'risk_ruleset_change', payload: { factor_key: factorKey, reason: patch.reason, enabled } },
    );
    const after = (await loadRuleset(tx, orgId)).find((f) => f.key === factorKey)!;
    return toFactorOut(after);
  });
}
