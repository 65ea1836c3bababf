import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf, personOf } from '../../platform/auth.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { FIELDS, OPERATOR_SPECS } from '../gateway/index.js';
import type { PolicyRow, VersionRow } from './policies.repository.js';
import { operatorsOut, policyIn, policyOut, type rule, simulateIn, simulationOut, statusIn, versionIn } from './policies.schemas.js';
import { replayIn, replayOut } from './replay.schemas.js';
import { replayVersion, type ReplaySummary } from './replay.service.js';
import {
  addVersion,
  createPolicy,
  policiesPage,
  policyWithVersions,
  publishVersion,
  setPolicyStatus,
  simulate,
  type PolicyWithVersions,
} from './policies.service.js';

const tags = ['Policies'];
type RuleIn = z.infer<typeof rule>;

const PRECEDENCE =
  'Any deny wins, and every deny reason found is reported; otherwise any approval requirement wins (the largest ' +
  'approvals_required), unless a valid approval for this exact request is presented; otherwise allow with ' +
  'PERMISSION_GRANTED plus the reason codes of matching allow rules. An allow rule never lifts the default deny: ' +
  'without a binding the answer is PERMISSION_NOT_GRANTED. The order of rules and policies does not change the decision.';

/** A version's latest replay as versions show it: the summary without its example actions. */
function latestReplay(r: ReplaySummary | undefined) {
  if (!r) return null;
  const { examples: _examples, ...summary } = r;
  return summary;
}

function toVersion(policy: PolicyRow, v: VersionRow, replays?: Map<number, ReplaySummary>) {
  return {
    number: v.number,
    state: v.number === policy.published_version ? ('published' as const) : v.published_at ? ('superseded' as const) : ('draft' as const),
    rules: v.rules as RuleIn[],
    change_note: v.change_note,
    author_id: v.author_id,
    created_at: v.created_at.toISOString(),
    published_at: v.published_at?.toISOString() ?? null,
    published_by: v.published_by,
    latest_replay: latestReplay(replays?.get(v.number)),
  };
}

function toPolicy(p: PolicyRow, versions?: VersionRow[], replays?: Map<number, ReplaySummary>): z.infer<typeof policyOut> {
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
    ...(versions ? { versions: versions.map((v) => toVersion(p, v, replays)) } : {}),
  };
}

/** The policy with its versions, its record version as an entity tag for the next If-Match. */
const withTag = (reply: FastifyReply, { policy, versions, replays }: PolicyWithVersions) => {
  reply.header('etag', `"${policy.version}"`);
  return toPolicy(policy, versions, replays);
};

export async function policiesRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);
  const idParams = z.object({ policy_id: z.uuid() });

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
      const rows = await policiesPage(db, p.orgId, after, limit);
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
      const created = await createPolicy(db, req, actorOf(req), req.body, clock.now());
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
      const out = await policyWithVersions(db, p.orgId, req.params.policy_id);
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
        headers: ifMatchHeaders.required,
        body: versionIn,
        response: { 201: policyOut },
      },
    },
    async (req, reply) => {
      const out = await addVersion(db, req, actorOf(req), req.params.policy_id, req.headers['if-match'], req.body, clock.now());
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
        headers: ifMatchHeaders.required,
        response: { 200: policyOut },
      },
    },
    async (req, reply) => {
      // A person only: a service account (the Kubernetes controller) drafts versions and a person
      // publishes them, whatever roles the account holds, so four eyes survive GitOps.
      const p = personOf(req);
      const out = await publishVersion(db, req, p, req.params.policy_id, req.params.number, req.headers['if-match'], clock.now());
      return withTag(reply, out);
    },
  );

  r.post(
    '/policies/:policy_id/versions/:number/replay',
    {
      ...beyondSpec(caller('action:test')),
      schema: {
        summary:
          'Replay a version over the recorded first decisions of a window: each decided again with the rules in force and with this version in place of the published one, on the current registry; only the summary is stored',
        tags,
        params: idParams.extend({ number: z.coerce.number().int().min(1).max(1_000_000) }),
        body: replayIn,
        response: { 200: replayOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return replayVersion(db, app.deps.snapshots, req, p, req.params.policy_id, req.params.number, req.body, clock.now());
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
        headers: ifMatchHeaders.required,
        body: statusIn,
        response: { 200: policyOut },
      },
    },
    async (req, reply) => {
      // A person only, as publishing: a service account drafts, people decide what is enforced.
      const p = personOf(req);
      const out = await setPolicyStatus(db, req, p, req.params.policy_id, req.headers['if-match'], req.body, clock.now());
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
      const { decision, rulesEvaluated } = await simulate(db, app.deps.snapshots, p.orgId, req.body, clock.now());
      return {
        decision: decision.decision,
        reason_codes: decision.reasonCodes,
        approvals_required: decision.approvalsRequired,
        rules_evaluated: rulesEvaluated,
        trace: decision.trace,
      };
    },
  );
}
