import { z } from 'zod';
import { email, timestamp } from '../../platform/schemas.js';
import { storedTimestamp } from '../../platform/schemas.js';

/**
 * An exception's statuses. `expired` is not stored: an approved exception is expired once its `expires_at` has
 * passed (it then no longer covers its control), and so is a pending one that was never decided in time.
 */
export const EXCEPTION_STATUS = ['pending', 'approved', 'rejected', 'expired'] as const;
export type ExceptionStatus = (typeof EXCEPTION_STATUS)[number];

export const EXCEPTION_DECISION = ['approve', 'reject'] as const;

export const exceptionParams = z.object({ exception_id: z.uuid() });

export const exceptionsQuery = z.object({
  status: z.enum(EXCEPTION_STATUS).optional().describe('only exceptions in this status (expired: approved or pending, past expires_at)'),
});

const future = (now: () => Date) =>
  storedTimestamp.refine((v) => Date.parse(v) > now().getTime(), 'must be in the future').describe('when the exception lapses by itself; in the future');

/** A request for an exception; `now` bounds expires_at to the future. */
export const exceptionIn = (now: () => Date) =>
  z.object({
    control_id: z.uuid().describe('the control the exception is for (GET /governance/frameworks names every control)'),
    agent_id: z.uuid().nullable().optional().describe('the one agent it is about; absent or null: the whole organisation'),
    title: z.string().trim().min(5).max(300),
    justification: z.string().trim().min(20).max(4000).describe('why the control cannot be met for now: 20-4000 characters once trimmed'),
    compensating_controls: z.string().trim().max(4000).default('').describe('what is done instead meanwhile'),
    owner_email: email.describe('who answers for the exception; told a week before it lapses when they are a member'),
    expires_at: future(now),
  });
export type ExceptionIn = z.output<ReturnType<typeof exceptionIn>>;

export const decisionIn = z.object({
  decision: z.enum(EXCEPTION_DECISION),
  note: z.string().trim().min(3).max(2000).describe('why: 3-2000 characters once trimmed, kept in the audit log and the evidence'),
});
export type DecisionIn = z.output<typeof decisionIn>;

export const exceptionOut = z.object({
  id: z.uuid(),
  control_id: z.uuid(),
  control_key: z.string().describe('`<framework>:<ref>` of the control'),
  control_title: z.string(),
  agent_id: z.uuid().nullable().describe('null: about the whole organisation (counts for framework coverage); else about that agent only (counts for its gaps)'),
  title: z.string(),
  justification: z.string(),
  compensating_controls: z.string(),
  owner_email: z.string(),
  expires_at: timestamp,
  status: z.enum(EXCEPTION_STATUS),
  requested_by: z.uuid().nullable(),
  created_at: timestamp,
  decided_by: z.uuid().nullable(),
  decided_at: timestamp.nullable(),
  decision_note: z.string().nullable(),
  version: z.number().int(),
});
export type ExceptionOut = z.infer<typeof exceptionOut>;
