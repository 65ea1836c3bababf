import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { caller } from '../../platform/route.js';
import {
  factorOut,
  factorParams,
  historyOut,
  historyQuery,
  riskAgentParams,
  rulesetOut,
  rulesetPatch,
  scoreOut,
  whatIfIn,
  whatIfOut,
} from './risk.schemas.js';
import { changeFactor, history, readRuleset, readScore, recalculateNow, whatIf } from './risk.service.js';

const tags = ['Risk, findings and telemetry'];

/** The Agent Risk Score (endpoints.md, "Risk, findings and telemetry"; docs/risk-and-graph.md). */
export async function riskRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  r.get(
    '/risks/agents/:agent_id',
    {
      ...caller('risk:read'),
      schema: {
        summary: "The agent's latest explainable risk score: every factor's contribution and why, the total and the band",
        description:
          'Scores are recalculated in the background after every change of what they read (bindings, trust states, ' +
          'containment, findings, attestation, the ruleset) and after discovery runs; `stale` says one is queued.',
        tags,
        params: riskAgentParams,
        response: { 200: scoreOut },
      },
    },
    async (req) => readScore(db, clock, actorOf(req).orgId, req.params.agent_id),
  );

  r.get(
    '/risks/agents/:agent_id/history',
    {
      ...caller('risk:read'),
      schema: {
        summary: "The agent's daily risk score over the last `days` days (one entry per day: the day's last score)",
        tags,
        params: riskAgentParams,
        querystring: historyQuery,
        response: { 200: historyOut },
      },
    },
    async (req) => history(db, clock, actorOf(req).orgId, req.params.agent_id, req.query.days),
  );

  r.post(
    '/risks/agents/:agent_id/recalculate',
    {
      ...caller('risk:configure'),
      schema: {
        summary: "Recalculate the agent's risk score now and answer it (stored, with the day's history and the agent's band)",
        tags,
        params: riskAgentParams,
        response: { 200: scoreOut },
      },
    },
    async (req) => recalculateNow(db, clock, req, actorOf(req).orgId, req.params.agent_id),
  );

  r.post(
    '/risks/agents/:agent_id/what-if',
    {
      ...caller('risk:read'),
      schema: {
        summary: 'What-if: the score with proposed changes applied to a copy of the agent’s inputs; nothing is saved',
        description: 'Answers the current and proposed score and band, and each factor’s difference. Absent or null fields change nothing.',
        tags,
        params: riskAgentParams,
        body: whatIfIn,
        response: { 200: whatIfOut },
      },
    },
    async (req) => whatIf(db, clock, actorOf(req).orgId, req.params.agent_id, req.body),
  );

  r.get(
    '/risks/ruleset',
    {
      ...caller('risk:read'),
      schema: { summary: 'The risk factors (key, description, weight, enabled, parameters) and the band thresholds', tags, response: { 200: rulesetOut } },
    },
    async (req) => readRuleset(db, actorOf(req).orgId),
  );

  r.patch(
    '/risks/ruleset/:factor_key',
    {
      ...caller('risk:configure'),
      schema: {
        summary: 'Switch a risk factor on or off for the organisation, with a reason (audited)',
        description: "Every agent's score is then recalculated in the background (GET /risks/agents/{agent_id} shows `stale` until it is).",
        tags,
        params: factorParams,
        body: rulesetPatch,
        response: { 200: factorOut },
      },
    },
    async (req) => changeFactor(db, clock, req, actorOf(req), req.params.factor_key, req.body),
  );
}
