import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';

export const APPROVAL_STATUS = ['pending', 'approved', 'rejected', 'expired', 'cancelled'] as const;

export const approvalOut = z.object({
  id: z.uuid(),
  status: z.enum(APPROVAL_STATUS),
  approvals_required: z.number().int(),
  expires_at: timestamp,
  created_at: timestamp,
  decided_at: timestamp.nullable(),
  action: z.object({
    id: z.uuid(),
    agent_id: z.uuid(),
    tool: z.string(),
    operation: z.string(),
    target: z.string(),
    parameters: z.unknown(),
    on_behalf_of: z.string().nullable(),
    justification: z.string().nullable(),
    reason_codes: z.array(z.string()),
  }),
  votes: z.array(z.object({ approver_id: z.uuid(), decision: z.enum(['approve', 'reject']), reason: z.string(), at: timestamp })),
});

export const approvalParams = z.object({ approval_id: z.uuid() });

export const approvalDecisionIn = z.object({ decision: z.enum(['approve', 'reject']), reason: z.string().trim().min(3).max(2000) });
