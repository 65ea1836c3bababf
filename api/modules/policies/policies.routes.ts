import { createHash, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import type { PoliciesTable, PolicyVersionsTable } from '../../db/schema.js';
import { actorOf, personOf } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { auditWithEvidence } from '../evidence/record.js';
import { compileRules, FIELDS, InvalidPolicy, OPERATOR_SPECS } from '../gateway/engine/compile.js';
import { decide } from '../gateway/engine/decide.js';
import { operatorsOut, policyIn, policyOut, type rule, simulateIn, simulationOut, statusIn, versionIn } from './policies.schemas.js';

const canonicalize = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string | undefined;

const tags = ['Policies'];
type PolicyRow = Selectable<PoliciesTable>;
type VersionRow = Selectable<PolicyVersionsTable>;
type RuleIn = z.infer<typeof rule>;

export const PRECEDENCE =
  'Any deny wins, and every deny reason found is reported; otherwise any approval requirement wins (the largest ' +
  'approvals_required), unless a valid approval for this exact request is presented; otherwise allow with ' +
  'PERMISSION_GRANTED plus the reason codes of matching allow rules. An allow rule never lifts the default deny: ' +
  'without a binding the answer is PERMISSION_NOT_GRANTED. The order of rules and policies does not change the decision.';

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

function toVersion(policy: PolicyRow, v: VersionRow) {
  return {
    number: v.number,
    state: v.number === policy.published_version ? ('published' as const) : v.published_at ? ('superseded' as const) : ('draft' as const),
    rules: v.rules as RuleIn[],
    change_note: v.change_note,
    author_id: v.author_id,
    created_at: v.created_at.toISOString(),
    published_at: v.published_at?.toISOString() ?? null,
    published_by: v.published_by,
  };
}

function toPolicy(p: PolicyRow, versions?: VersionRow[]): z.infer<typeof policyOut> {
  return {
    id: p.id,
    key: p.key,
    name: p.name,
    description: p.description,
    critical: p.critical,
    status: p.status as 'active' | 'inactive',
    version: p.version,
    latest_version: p.latest_version,
    published_version: p.published_version,
    created_at: p.created_at.toISOString(),
    updated_at: p.updated_at.toISOString(),
    ...(versions ? { versions: versions.map((v) => toVersion(p, v)) } : {}),
  };
}

async function policyOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<PolicyRow> {
  let q = tx.selectFrom('policies').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound('No such policy.');
  return row;
}

const versionsOf = (tx: Tx, orgId: string, policyId: string) =>
  tx.selectFrom('policy_versions').selectAll().where('org_id', '=', orgId).where('policy_id', '=', policyId).orderBy('number', 'desc').execute();

/** The record version as an entity tag, for the next If-Match. */
const withTag = <T extends { version: number }>(reply: FastifyReply, body: T) => {
  reply.header('etag', `"${body.version}"`);
  return body;
};

export async function policiesRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);
  const idParams = z.object({ policy_id: z.uuid() });

  /** Audit entry and evidence record of a policy change, in its transaction. */
  const record = (tx: Tx, req: FastifyRequest, orgId: string, policy: PolicyRow, action: string, payload: Record<string, unknown>) =>
    auditWithEvidence(
      tx,
      req,
      orgId,
      { action: `policy.${action}`, targetType: 'policy', targetId: policy.id, details: payload },
      { eventType: 'policy_change', controlRef: `policy:${policy.key}`, payload: { policy_id: policy.id, key: policy.key, change: action, ...payload } },
    );

  r.get(
    '/policies',
    {
      ...caller('policy:read'),
      schema: { summary: 'Policies, by key', tags, querystring: pageQuery(), response: { 200: pageOf(policyOut) } },
    },
    async (req) => {
      const p = actorOf(req);
      const { limit, cursor } = req.query;
      const scope = `policies:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('policies').selectAll().where('org_id', '=', p.orgId);
        // The position's `t` carries the key: policies are listed by key, which is unique.
        if (after) q = q.where(sql<boolean>`(key, id) > (${after.t}, ${after.id}::uuid)`);
        return q.orderBy('key').orderBy('id').limit(limit + 1).execute();
      });
      return cursors.page(scope, rows, limit, (row) => ({ t: row.key, id: row.id }), (row) => toPolicy(row));
    },
  );

  r.post(
    '/policies',
    {
      ...caller('policy:write'),
      schema: {
        summary: 'Create a policy; its rules become version 1, a draft that no decision reads until published',
        tags,
        body: policyIn,
        response: { 201: policyOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const body = req.body;
      checkRules(body.rules);
      const now = clock.now();
      const created = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const policy = await tx
          .insertInto('policies')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
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
          })
          .returningAll()
          .executeTakeFirstOrThrow()
          .catch((err: unknown) => {
            if (isUniqueViolation(err)) throw new ApiError('conflict', 'A policy with this key exists already.', { field: 'key' });
            throw err;
          });
        const version = await tx
          .insertInto('policy_versions')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            policy_id: policy.id,
            number: 1,
            rules: JSON.stringify(body.rules),
            change_note: body.change_note,
            author_id: p.userId,
            created_at: now,
            published_at: null,
            published_by: null,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await record(tx, req, p.orgId, policy, 'created', { number: 1, critical: body.critical, rules_sha256: rulesHash(body.rules) });
        return toPolicy(policy, [version]);
      });
      reply.code(201);
      return withTag(reply, created);
    },
  );

  r.get(
    '/policies/operators',
    {
      ...caller('policy:read'),
      schema: { summary: 'The condition operators with their operand types, the fields, and the precedence of effects', tags, response: { 200: operatorsOut } },
    },
    async () => ({
      operators: Object.entries(OPERATOR_SPECS).map(([op, s]) => ({ op, operand: s.operand, description: s.description, field_types: s.fieldTypes })),
      fields: [
        ...Object.entries(FIELDS).map(([field, f]) => ({ field, type: f.type, description: f.description })),
        { field: 'action.parameters.<name>', type: 'any', description: 'One parameter of the request, by name (dots reach into objects)' },
      ],
      precedence: PRECEDENCE,
    }),
  );

  r.get(
    '/policies/:policy_id',
    {
      ...caller('policy:read'),
      schema: { summary: 'A policy with every version, newest first', tags, params: idParams, response: { 200: policyOut } },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const out = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const policy = await policyOr404(tx, p.orgId, req.params.policy_id);
        return toPolicy(policy, await versionsOf(tx, p.orgId, policy.id));
      });
      return withTag(reply, out);
    },
  );

  r.post(
    '/policies/:policy_id/versions',
    {
      ...caller('policy:write'),
      schema: {
        summary: 'Add a draft version (If-Match: the policy version); live decisions are unchanged until it is published',
        tags,
        params: idParams,
        body: versionIn,
        response: { 201: policyOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      checkRules(req.body.rules);
      const now = clock.now();
      const out = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await policyOr404(tx, p.orgId, req.params.policy_id, true);
        checkIfMatch(req.headers['if-match'], before.version, true);
        const number = before.latest_version + 1;
        await tx
          .insertInto('policy_versions')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            policy_id: before.id,
            number,
            rules: JSON.stringify(req.body.rules),
            change_note: req.body.change_note,
            author_id: p.userId,
            created_at: now,
            published_at: null,
            published_by: null,
          })
          .execute();
        const policy = await tx
          .updateTable('policies')
          .set({ latest_version: number, version: before.version + 1, updated_at: now })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await record(tx, req, p.orgId, policy, 'version_created', { number, rules_sha256: rulesHash(req.body.rules), change_note: req.body.change_note });
        return toPolicy(policy, await versionsOf(tx, p.orgId, policy.id));
      });
      reply.code(201);
      return withTag(reply, out);
    },
  );

  r.post(
    '/policies/:policy_id/versions/:number/publish',
    {
      ...caller('policy:publish'),
      schema: {
        summary: "Publish a version (If-Match: the policy version); a second person: never the version's author",
        tags,
        params: idParams.extend({ number: z.coerce.number().int().min(1).max(1_000_000) }),
        response: { 200: policyOut },
      },
    },
    async (req, reply) => {
      // A person only: a service account (the Kubernetes controller) drafts versions and a person
      // publishes them, whatever roles the account holds, so four eyes survive GitOps.
      const p = personOf(req);
      const now = clock.now();
      const out = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await policyOr404(tx, p.orgId, req.params.policy_id, true);
        checkIfMatch(req.headers['if-match'], before.version, true);
        const version = await tx
          .selectFrom('policy_versions')
          .selectAll()
          .where('org_id', '=', p.orgId)
          .where('policy_id', '=', before.id)
          .where('number', '=', req.params.number)
          .executeTakeFirst();
        if (!version) throw notFound('No such version of this policy.');
        if (version.author_id === p.userId) {
          throw new ApiError('four_eyes_required', 'The author of a version cannot publish it: another person with policy:publish must.');
        }
        if (before.published_version === version.number) throw new ApiError('conflict', `Version ${version.number} is already the published one.`);
        // Validated when written; checked again so a version the current operators refuse is never published.
        checkRules(version.rules as RuleIn[]);
        if (!version.published_at) {
          await tx.updateTable('policy_versions').set({ published_at: now, published_by: p.userId }).where('id', '=', version.id).execute();
        }
        const policy = await tx
          .updateTable('policies')
          .set({ published_version: version.number, version: before.version + 1, updated_at: now })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await record(tx, req, p.orgId, policy, 'published', {
          number: version.number,
          previous_published_version: before.published_version,
          author_id: version.author_id,
          rules_sha256: rulesHash(version.rules),
        });
        return toPolicy(policy, await versionsOf(tx, p.orgId, policy.id));
      });
      return withTag(reply, out);
    },
  );

  r.post(
    '/policies/:policy_id/status',
    {
      ...caller('policy:publish'),
      schema: {
        summary: 'Activate or deactivate a policy (If-Match); a critical policy is deactivated only with confirm and a reason',
        tags,
        params: idParams,
        body: statusIn,
        response: { 200: policyOut },
      },
    },
    async (req, reply) => {
      // A person only, as publishing: a service account drafts, people decide what is enforced.
      const p = personOf(req);
      const { status, reason } = req.body;
      const now = clock.now();
      const out = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await policyOr404(tx, p.orgId, req.params.policy_id, true);
        checkIfMatch(req.headers['if-match'], before.version, true);
        if (before.critical && status === 'inactive' && before.status !== 'inactive') {
          requireConfirmation(req.body);
          if (!reason) {
            throw new ApiError('validation_failed', 'Deactivating a critical policy needs a reason.', [{ field: 'reason', message: 'required for a critical policy' }]);
          }
        }
        if (before.status === status) return toPolicy(before, await versionsOf(tx, p.orgId, before.id));
        const policy = await tx
          .updateTable('policies')
          .set({ status, version: before.version + 1, updated_at: now })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await record(tx, req, p.orgId, policy, 'status_changed', { from: before.status, to: status, ...(reason ? { reason } : {}) });
        return toPolicy(policy, await versionsOf(tx, p.orgId, policy.id));
      });
      return withTag(reply, out);
    },
  );

  r.post(
    '/policies/simulate',
    {
      ...caller('action:test'),
      schema: {
        summary: 'Dry run through the gateway engine: draft rules instead of the published ones; nothing is stored or run',
        tags,
        body: simulateIn,
        response: { 200: simulationOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const body = req.body;
      const drafts = body.draft_rules ?? null;
      if (drafts) checkRules(drafts);
      const now = clock.now();
      const state = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const view = await app.deps.snapshots.load(tx, p.orgId, [body.agent_id]);
        return view.state(body.agent_id, body.tool);
      });
      if (!state.agent) throw notFound('No such agent.');
      const decision = decide(
        {
          agent: state.agent,
          identityId: null,
          action: {
            tool: body.tool,
            operation: body.operation,
            target: body.target,
            parameters: body.parameters,
            environment: body.environment ?? null,
            onBehalfOf: body.on_behalf_of ?? null,
            justification: body.justification ?? null,
          },
          now: now.toISOString(),
          approvalPresent: body.approval_present,
          explain: true,
        },
        drafts ? { ...state.snapshot, rules: compileRules(drafts) } : state.snapshot,
      );
      return {
        decision: decision.decision,
        reason_codes: decision.reasonCodes,
        approvals_required: decision.approvalsRequired,
        rules_evaluated: drafts ? ('draft' as const) : ('published' as const),
        trace: decision.trace,
      };
    },
  );
}
