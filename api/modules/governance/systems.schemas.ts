import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { AGENT_STATUS, ENVIRONMENT } from '../shared/index.js';
import { AI_SYSTEM_CLASSES } from './gaps.js';
import { taskOut } from './remediation.schemas.js';

export const systemParams = z.object({ agent_id: z.uuid() });

export const systemsQuery = z.object({
  classification: z.enum(AI_SYSTEM_CLASSES).optional().describe('only agents of this class (unclassified: never classified, or classified so)'),
});

export const classifyIn = z.object({
  classification: z.enum(AI_SYSTEM_CLASSES),
  rationale: z.string().trim().min(10).max(4000).describe('why this class: 10-4000 characters once trimmed, kept with the classification and in the evidence'),
});
export type ClassifyIn = z.output<typeof classifyIn>;

export const gapOut = z.object({
  key: z.string().describe('what is missing, e.g. human_oversight, record_keeping (docs/governance.md lists the checks of each class)'),
  title: z.string(),
  why: z.string(),
  control_id: z.uuid().describe('the control the gap leaves unmet for this agent'),
  control_key: z.string(),
  exception_id: z.uuid().nullable().describe('an approved exception in force that covers the gap (for this agent or the whole organisation): no task is opened for it'),
  remediation_task_id: z.uuid().nullable().describe('the open or in-progress task on this agent and control, if any'),
});
export type GapOut = z.infer<typeof gapOut>;

const systemShape = {
  agent_id: z.uuid(),
  agent_name: z.string(),
  agent_slug: z.string(),
  environment: z.enum(ENVIRONMENT),
  agent_status: z.enum(AGENT_STATUS),
  classification: z.enum(AI_SYSTEM_CLASSES).describe('unclassified until someone classifies the agent'),
  rationale: z.string().nullable(),
  classified_at: timestamp.nullable(),
  classified_by: z.uuid().nullable(),
  gaps: z.array(gapOut).describe('the evidence gaps of its class now, over the last 90 days'),
};

export const systemOut = z.object(systemShape);
export type SystemOut = z.infer<typeof systemOut>;

export const classifiedOut = z.object({
  ...systemShape,
  remediation_tasks: z
    .array(taskOut)
    .describe('the tasks this classification opened, one per gap not covered by an exception nor already by an open task on the same agent and control'),
});
