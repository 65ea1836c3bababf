import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';

export const IDEMPOTENCY_KEY = /^[A-Za-z0-9._:-]{8,200}$/;

export const idempotencyHeaders = z.object({
  'idempotency-key': z.string().regex(IDEMPOTENCY_KEY, '8-200 characters of A-Z a-z 0-9 . _ : -'),
});

/** A session identifier a caller passes for flow rules (docs/policies.md, Flow rules). */
export const SESSION_ID = /^[A-Za-z0-9._:-]{1,200}$/;

export const submissionHeaders = idempotencyHeaders.extend({
  'tollgate-session': z
    .string()
    .regex(SESSION_ID, '1-200 characters of A-Z a-z 0-9 . _ : -')
    .optional()
    .describe("The agent's session, for flow rules (session.* fields); without it the session is the access token's lifetime"),
});

/**
 * The session key of an agent's call: the session it names, else its access token's lifetime. The
 * prefixes keep the two apart, and sessions are the agent's own (agent_sessions is keyed by agent too).
 */
export const agentSession = (named: string | null | undefined, tokenId: string) => (named ? `id:${named}` : `token:${tokenId}`);

export const actionIn = z.object({
  tool: z.string().trim().min(1).max(200),
  operation: z.string().trim().min(1).max(100).default('invoke'),
  target: z
    .string()
    .min(1)
    .max(500)
    .regex(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/\S*$/, 'a URI-like string <scheme>://<path>'),
  parameters: z.record(z.string(), z.unknown()).default({}),
  environment: z.enum(['production', 'staging', 'development']).nullable().optional(),
  on_behalf_of: z.string().max(320).nullable().optional(),
  justification: z.string().max(2000).nullable().optional(),
  approval_token: z.string().max(4000).nullable().optional(),
});

export const STATES = ['received', 'approval_required', 'approved', 'executed', 'failed', 'denied', 'rejected', 'expired', 'cancelled', 'revoked'] as const;

export const approvalSummary = z.object({
  id: z.uuid(),
  status: z.enum(['pending', 'approved', 'rejected', 'expired', 'cancelled']),
  approvals_required: z.number().int(),
  expires_at: timestamp,
});

export const submissionOut = z.object({
  action: z.object({ id: z.uuid(), status: z.enum(STATES) }),
  decision: z.object({ decision: z.enum(['allow', 'deny', 'require_approval']), reason_codes: z.array(z.string()) }),
  execution: z.object({ status: z.string(), output_redacted: z.unknown() }).nullable(),
  approval: approvalSummary.nullable(),
  replayed: z.boolean(),
  idempotency_key: z.string(),
});
export type SubmissionOut = z.infer<typeof submissionOut>;
export type ActionIn = z.output<typeof actionIn>;
