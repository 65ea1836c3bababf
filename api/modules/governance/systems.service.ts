import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { notFound } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { auditWithEvidence, firstSeqSince } from '../evidence/index.js';
import { exceptionsCoveringAgents } from './exceptions.repository.js';
import { GAP_PRIORITY, gapsFor, type AiSystemClass, type Gap } from './gaps.js';
import { DEFAULT_WINDOW_DAYS } from './governance.schemas.js';
import { insertGapTask, openTasksOfAgents, toTask, type TaskRow } from './remediation.repository.js';
import type { ClassifyIn, GapOut, SystemOut } from './systems.schemas.js';
import { getClassification, getSystem, listSystems, lockAgent, upsertClassification, type SystemRow } from './systems.repository.js';

const DAY_MS = 86_400_000;

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** What covers an agent's gaps: approved exceptions in force, and open tasks on the agent and a control. */
interface Cover {
  exceptions: Array<{ id: string; control_id: string; agent_id: string | null }>;
  tasks: Array<{ id: string; agent_id: string | null; control_id: string | null }>;
}

async function coverOf(tx: Tx, orgId: string, agentIds: string[], now: Date): Promise<Cover> {
  return { exceptions: await exceptionsCoveringAgents(tx, orgId, agentIds, now), tasks: await openTasksOfAgents(tx, orgId, agentIds) };
}

function gapOut(agentId: string, gap: Gap, cover: Cover): GapOut {
  const exception = cover.exceptions.find((e) => e.control_id === gap.control.id && (e.agent_id === null || e.agent_id === agentId));
  const task = cover.tasks.find((t) => t.agent_id === agentId && t.control_id === gap.control.id);
  return {
    key: gap.key,
    title: gap.title,
    why: gap.why,
    control_id: gap.control.id,
    control_key: gap.control.key,
    exception_id: exception?.id ?? null,
    remediation_task_id: task?.id ?? null,
  };
}

const classOf = (r: SystemRow): AiSystemClass => r.classification ?? 'unclassified';

function toSystem(r: SystemRow, gaps: GapOut[]): SystemOut {
  return {
    agent_id: r.agent_id,
    agent_name: r.name,
    agent_slug: r.slug,
    environment: r.environment as SystemOut['environment'],
    agent_status: r.status as SystemOut['agent_status'],
    classification: classOf(r),
    rationale: r.rationale,
    classified_at: r.classified_at ? iso(r.classified_at) : null,
    classified_by: r.classified_by,
    gaps,
  };
}

/** The window the gaps are read over, ending now; its first evidence record. */
async function windowStart(tx: Tx, orgId: string, now: Date) {
  return firstSeqSince(tx, orgId, new Date(now.getTime() - DEFAULT_WINDOW_DAYS * DAY_MS));
}

/** One page of the AI-system register: every agent, in the order registered, with its class and its gaps now. */
export function listSystemsPage(
  db: Db,
  clock: Clock,
  cursors: Cursors,
  orgId: string,
  query: { classification?: AiSystemClass; limit: number; cursor?: string },
) {
  const scope = `systems:${orgId}:${query.classification ?? ''}`;
  const after = cursors.decode(scope, query.cursor);
  const now = clock.now();
  const ctx = { now, windowDays: DEFAULT_WINDOW_DAYS };
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listSystems(tx, orgId, await windowStart(tx, orgId, now), query.classification, after, query.limit);
    const cover = await coverOf(tx, orgId, rows.slice(0, query.limit).map((r) => r.agent_id), now);
    return cursors.page(
      scope,
      rows,
      query.limit,
      (r) => ({ t: iso(r.created_at), id: r.agent_id }),
      (r) => toSystem(r, gapsFor(classOf(r), r, ctx).map((g) => gapOut(r.agent_id, g, cover))),
    );
  });
}

/**
 * Classifies an agent as an AI system and opens a remediation task for each gap of its class that no exception
 * in force covers and no open task on the same agent and control already does: classifying again opens nothing
 * twice. Classifications of one agent run one after the other (its row is locked). Audited, with evidence
 * (ai_system_classification). Answers the agent as the register shows it, with the tasks opened now.
 */
export function classifySystem(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, agentId: string, body: ClassifyIn) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    if (!(await lockAgent(tx, orgId, agentId))) throw notFound('No such agent.');
    const before = await getClassification(tx, orgId, agentId);
    await upsertClassification(tx, {
      org_id: orgId,
      agent_id: agentId,
      classification: body.classification,
      rationale: body.rationale,
      classified_by: actor.userId,
      classified_by_type: actor.kind === 'service' ? 'service_account' : 'person',
      classified_at: now,
    });
    const system = (await getSystem(tx, orgId, agentId, await windowStart(tx, orgId, now)))!;
    const gaps = gapsFor(body.classification, system, { now, windowDays: DEFAULT_WINDOW_DAYS });
    const cover = await coverOf(tx, orgId, [agentId], now);
    const opened: TaskRow[] = [];
    for (const gap of gaps) {
      const covered = gapOut(agentId, gap, cover);
      if (covered.exception_id || covered.remediation_task_id) continue;
      const task = await insertGapTask(tx, {
        id: randomUUID(),
        org_id: orgId,
        title: clip(`${gap.title}: ${system.name}`, 300),
        description: clip(
          `${system.name} is classified ${body.classification}, and ${gap.why}. ${gap.remedy} ` +
            `Until this task is done or cancelled, ${gap.control.key} (${gap.control.title}) is not met.`,
          4000,
        ),
        control_id: gap.control.id,
        agent_id: agentId,
        finding_id: null,
        assignee_email: null,
        due_at: null,
        priority: GAP_PRIORITY[body.classification],
        source: 'classification',
        gap: gap.key,
        created_by: actor.userId,
        created_at: now,
        updated_at: now,
        closed_at: null,
      });
      if (task) opened.push(task);
    }
    const after = await coverOf(tx, orgId, [agentId], now);
    const gapsNow = gaps.map((g) => gapOut(agentId, g, after));
    const classification = { from: before?.classification ?? 'unclassified', to: body.classification };
    const details = { classification, rationale: body.rationale, gaps: gaps.map((g) => g.key), remediation_task_ids: opened.map((t) => t.id) };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'ai_system.classified', targetType: 'agent', targetId: agentId, details },
      { eventType: 'ai_system_classification', agentId, payload: details },
    );
    return { ...toSystem(system, gapsNow), remediation_tasks: opened.map(toTask) };
  });
}
