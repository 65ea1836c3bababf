import { createHash } from 'node:crypto';
import type { ActorPrincipal, PersonPrincipal, RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import { inScope, type Db, type Tx } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import type { Position } from '../../platform/pagination.js';
import { requireConfirmation } from '../../platform/reason.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { auditWithEvidence } from '../evidence/index.js';
import { compileRules, decide, decisionInput, InvalidPolicy, type DecisionSnapshots, type SessionView } from '../gateway/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import {
  getPolicy,
  getVersion,
  insertPolicy,
  insertVersion,
  listPolicies,
  markVersionPublished,
  updatePolicy,
  versionsOf,
  type PolicyRow,
  type VersionRow,
} from './policies.repository.js';
import type { policyIn, rule, simulateIn, statusIn, versionIn } from './policies.schemas.js';
import { latestReplaysOf, type ReplaySummary } from './replay.service.js';
import { canonicalize } from '../../../lib/canonical-json.js';

type RuleIn = z.infer<typeof rule>;

/** A policy with every version, newest first: what each change answers. */
export interface PolicyWithVersions {
  policy: PolicyRow;
  versions: VersionRow[];
  /** The latest replay of each version that has one, by number. */
  replays: Map<number, ReplaySummary>;
}

/** Compiles rules or answers 422 invalid_policy naming each bad rule and condition. */
function checkRules(rules: RuleIn[]): void {
  try {
    compileRules(rules);
  } catch (err) {
    if (err instanceof InvalidPolicy) throw new ApiError('invalid_policy', `The policy is not valid: ${err.message}`, err.problems);
    throw err;
  }
}

const rulesHash = (rules: unknown) => createHash('sha256').update(canonicalize(rules) ?? '').digest('hex');

/** Audit entry and evidence record of a policy change, in its transaction. */
const record = (tx: Tx, req: RequestContext, orgId: string, policy: PolicyRow, action: string, payload: Record<string, unknown>) =>
  auditWithEvidence(
    tx,
    req,
    orgId,
    { action: `policy.${action}`, targetType: 'policy', targetId: policy.id, details: payload },
    { eventType: 'policy_change', controlRef: `policy:${policy.key}`, payload: { policy_id: policy.id, key: policy.key, change: action, ...payload } },
  );

async function policyOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<PolicyRow> {
  const row = await getPolicy(tx, orgId, id, lock);
  if (!row) throw notFound('No such policy.');
  return row;
}

const withVersions = async (tx: Tx, orgId: string, policy: PolicyRow): Promise<PolicyWithVersions> => ({
  policy,
  versions: await versionsOf(tx, orgId, policy.id),
  replays: await latestReplaysOf(tx, orgId, policy.id),
});

export function policiesPage(db: Db, orgId: string, after: Position | undefined, limit: number): Promise<PolicyRow[]> {
  return inScope(db, { orgId }, (tx) => listPolicies(tx, orgId, after, limit));
}

export function policyWithVersions(db: Db, orgId: string, policyId: string): Promise<PolicyWithVersions> {
  return inScope(db, { orgId }, async (tx) => withVersions(tx, orgId, await policyOr404(tx, orgId, policyId)));
}

/** A new policy whose rules become version 1, a draft. */
export async function createPolicy(
  db: Db,
  req: RequestContext,
  actor: ActorPrincipal,
  body: z.output<typeof policyIn>,
  now: Date,
): Promise<PolicyWithVersions> {
  checkRules(body.rules);
  return inScope(db, { orgId: actor.orgId }, async (tx) => {
    const policy = await insertPolicy(tx, actor.orgId, {
      key: body.key,
      name: body.name,
      description: body.description,
      critical: body.critical,
      status: 'active',
      latest_version: 1,
      published_version: null,
      version: 1,
      created_at: now,
      updated_at: now,
    }).catch((err: unknown) => {
      if (isUniqueViolation(err)) throw new ApiError('conflict', 'A policy with this key exists already.', { field: 'key' });
      throw err;
    });
    const version = await insertVersion(tx, actor.orgId, policy.id, {
      number: 1,
      rules: body.rules,
      changeNote: body.change_note,
      authorId: actor.userId,
      createdAt: now,
    });
    await record(tx, req, actor.orgId, policy, 'created', { number: 1, critical: body.critical, rules_sha256: rulesHash(body.rules) });
    return { policy, versions: [version], replays: new Map() };
  });
}

/** A draft version after the latest (If-Match: the policy's record version). */
export async function addVersion(
  db: Db,
  req: RequestContext,
  actor: ActorPrincipal,
  policyId: string,
  ifMatch: string | string[] | undefined,
  body: z.output<typeof versionIn>,
  now: Date,
): Promise<PolicyWithVersions> {
  checkRules(body.rules);
  return inScope(db, { orgId: actor.orgId }, async (tx) => {
    const before = await policyOr404(tx, actor.orgId, policyId, true);
    checkIfMatch(ifMatch, before.version, true);
    const number = before.latest_version + 1;
    await insertVersion(tx, actor.orgId, before.id, {
      number,
      rules: body.rules,
      changeNote: body.change_note,
      authorId: actor.userId,
      createdAt: now,
    });
    const policy = await updatePolicy(tx, actor.orgId, before.id, { latest_version: number, version: before.version + 1, updated_at: now });
    await record(tx, req, actor.orgId, policy, 'version_created', { number, rules_sha256: rulesHash(body.rules), change_note: body.change_note });
    return withVersions(tx, actor.orgId, policy);
  });
}

/** Publishes a version (If-Match): four eyes, so never by the version's author. */
export function publishVersion(
  db: Db,
  req: RequestContext,
  person: PersonPrincipal,
  policyId: string,
  number: number,
  ifMatch: string | string[] | undefined,
  now: Date,
): Promise<PolicyWithVersions> {
  return inScope(db, { orgId: person.orgId }, async (tx) => {
    const before = await policyOr404(tx, person.orgId, policyId, true);
    checkIfMatch(ifMatch, before.version, true);
    const version = await getVersion(tx, person.orgId, before.id, number);
    if (!version) throw notFound('No such version of this policy.');
    if (version.author_id === person.userId) {
      throw new ApiError('four_eyes_required', 'The author of a version cannot publish it: another person with policy:publish must.');
    }
    if (before.published_version === version.number) throw new ApiError('conflict', `Version ${version.number} is already the published one.`);
    // Validated when written; checked again so a version the current operators refuse is never published.
    checkRules(version.rules as RuleIn[]);
    if (!version.published_at) await markVersionPublished(tx, version.id, now, person.userId);
    const policy = await updatePolicy(tx, person.orgId, before.id, { published_version: version.number, version: before.version + 1, updated_at: now });
    await record(tx, req, person.orgId, policy, 'published', {
      number: version.number,
      previous_published_version: before.published_version,
      author_id: version.author_id,
      rules_sha256: rulesHash(version.rules),
    });
    await recordTelemetry(tx, person.orgId, [
      telemetryEvents.policyPublished({
        at: now,
        correlationId: req.id,
        policyId: policy.id,
        key: policy.key,
        number: version.number,
        previous: before.published_version,
        actorId: person.userId,
      }),
    ]);
    return withVersions(tx, person.orgId, policy);
  });
}

/** Activates or deactivates a policy (If-Match); a critical one is deactivated only with confirm and a reason. */
export function setPolicyStatus(
  db: Db,
  req: RequestContext,
  person: PersonPrincipal,
  policyId: string,
  ifMatch: string | string[] | undefined,
  body: z.output<typeof statusIn>,
  now: Date,
): Promise<PolicyWithVersions> {
  const { status, reason } = body;
  return inScope(db, { orgId: person.orgId }, async (tx) => {
    const before = await policyOr404(tx, person.orgId, policyId, true);
    checkIfMatch(ifMatch, before.version, true);
    if (before.critical && status === 'inactive' && before.status !== 'inactive') {
      requireConfirmation(body);
      if (!reason) {
        throw new ApiError('validation_failed', 'Deactivating a critical policy needs a reason.', [{ field: 'reason', message: 'required for a critical policy' }]);
      }
    }
    if (before.status === status) return withVersions(tx, person.orgId, before);
    const policy = await updatePolicy(tx, person.orgId, before.id, { status, version: before.version + 1, updated_at: now });
    await record(tx, req, person.orgId, policy, 'status_changed', { from: before.status, to: status, ...(reason ? { reason } : {}) });
    return withVersions(tx, person.orgId, policy);
  });
}

/** The session facts a simulation was given, as the engine reads them. */
function sessionOf(s: z.output<typeof simulateIn>['session']): SessionView | null {
  if (!s) return null;
  return {
    id: s.id ?? 'simulation',
    facts: {
      maxClassification: s.max_classification,
      untrustedContent: s.untrusted_content,
      tools: s.tools,
      calls: s.calls ?? Object.values(s.tools).reduce((sum, n) => sum + n, 0),
    },
  };
}

/**
 * A dry run through the gateway engine with the decision input submission builds, against the
 * registry as decisions read it; draft rules, when given, replace the published ones.
 */
export async function simulate(db: Db, snapshots: DecisionSnapshots, orgId: string, body: z.output<typeof simulateIn>, now: Date) {
  const drafts = body.draft_rules ?? null;
  if (drafts) checkRules(drafts);
  const state = await inScope(db, { orgId }, async (tx) => {
    const view = await snapshots.load(tx, orgId, [body.agent_id]);
    return view.state(body.agent_id, body.tool);
  });
  if (!state.agent) throw notFound('No such agent.');
  const decision = decide(
    decisionInput(state.agent, body, { identityId: null, now, approvalPresent: body.approval_present, explain: true, session: sessionOf(body.session) }),
    drafts ? { ...state.snapshot, rules: compileRules(drafts) } : state.snapshot,
  );
  return { decision, rulesEvaluated: drafts ? ('draft' as const) : ('published' as const) };
}
