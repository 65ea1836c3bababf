import { z } from 'zod';
import { email, storedTimestamp, timestamp } from '../../platform/schemas.js';

/** A remediation task's statuses (the spec's enumeration); done and cancelled are final. */
export const TASK_STATUS = ['open', 'in_progress', 'done', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUS)[number];

/** The statuses that hold a task open: it keeps its control from being met. */
export const OPEN_TASK_STATUSES = ['open', 'in_progress'] as const satisfies readonly TaskStatus[];

/** Where a task may move from each status (docs/governance.md, Remediation); anything else answers 409 conflict. */
export const TASK_MOVES: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  open: ['in_progress', 'cancelled'],
  in_progress: ['done', 'cancelled'],
  done: [],
  cancelled: [],
};

export const TASK_PRIORITY = ['low', 'medium', 'high', 'critical'] as const;
export type TaskPriority = (typeof TASK_PRIORITY)[number];

export const taskParams = z.object({ task_id: z.uuid() });

export const tasksQuery = z.object({
  status: z.enum(TASK_STATUS).optional(),
  agent_id: z.uuid().optional(),
});
export type TaskFilters = z.output<typeof tasksQuery>;

export const taskIn = z.object({
  title: z.string().trim().min(5).max(300),
  description: z.string().trim().max(4000).default(''),
  control_id: z.uuid().nullable().optional().describe('the control the task puts right; while the task is open or in progress the control is not met'),
  agent_id: z.uuid().nullable().optional(),
  finding_id: z.uuid().nullable().optional(),
  assignee_email: email.nullable().optional(),
  due_at: storedTimestamp.nullable().optional(),
  priority: z.enum(TASK_PRIORITY).default('medium'),
});
export type TaskIn = z.output<typeof taskIn>;

/** A change of status and/or assignee. Absent or null leaves a field as it is; an empty assignee_email clears it. */
export const taskPatch = z.object({
  status: z
    .enum(TASK_STATUS)
    .nullable()
    .optional()
    .describe('open → in_progress → done; open or in_progress → cancelled; done and cancelled are final (409 conflict otherwise)'),
  assignee_email: z.union([email, z.literal('')]).nullable().optional().describe('who works on it; empty clears it'),
});
export type TaskPatch = z.output<typeof taskPatch>;

export const taskOut = z.object({
  id: z.uuid(),
  title: z.string(),
  description: z.string(),
  control_id: z.uuid().nullable(),
  control_key: z.string().nullable().describe('`<framework>:<ref>` of the control, when there is one'),
  agent_id: z.uuid().nullable(),
  finding_id: z.uuid().nullable(),
  assignee_email: z.string().nullable(),
  due_at: timestamp.nullable(),
  priority: z.enum(TASK_PRIORITY),
  status: z.enum(TASK_STATUS),
  source: z.enum(['manual', 'classification']).describe('manual: created with POST; classification: opened for a gap of the agent’s AI-system class'),
  gap: z.string().nullable().describe('the gap a classification opened it for (docs/governance.md, Classification)'),
  created_by: z.uuid().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  closed_at: timestamp.nullable().describe('when it became done or cancelled'),
  version: z.number().int(),
});
export type TaskOut = z.infer<typeof taskOut>;
