import { z } from 'zod';
import { storedTimestamp, timestamp } from '../../platform/schemas.js';
import { PRINCIPAL_TYPE, TARGET_KIND } from '../shared/index.js';
import { agentParams } from './agents.schemas.js';

/**
 * The constraint object of a permission binding (docs/registry.md). Unknown keys are refused, so a
 * typo never silently widens a permission.
 */
export const constraintsSchema = z
  .object({
    max_amount: z.number().nonnegative().optional().describe('largest parameters.amount a call may carry'),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'an ISO 4217 code such as EUR')
      .optional()
      .describe('the only currency a call may name in parameters.currency'),
    allowed_targets: z
      .array(z.string().min(1).max(500))
      .min(1)
      .max(50)
      .optional()
      .describe('glob patterns (* matches any run of characters) the action target must match'),
  })
  .strict();

const future = (now: () => Date) =>
  storedTimestamp.nullable().optional().refine((v) => !v || Date.parse(v) > now().getTime(), 'must be in the future');

/** What a binding allows: shared with the Agent CRD (scripts/gen-crds.ts). */
export const bindingActions = z.array(z.string().trim().min(1).max(100)).min(1).max(50);

/** A delegation's body; `now` bounds expires_at to the future. Shared with the Agent CRD. */
export const delegationIn = (now?: () => Date) =>
  z.object({
    principal_ref: z.string().trim().min(3).max(320),
    display_name: z.string().trim().min(1).max(200),
    principal_type: z.enum(PRINCIPAL_TYPE).default('user'),
    scopes: z.array(z.string().trim().min(1).max(200)).max(100),
    expires_at: now ? future(now) : timestamp.nullable().optional(),
  });

export const delegationOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  principal_ref: z.string(),
  display_name: z.string(),
  principal_type: z.enum(PRINCIPAL_TYPE),
  scopes: z.array(z.string()),
  expires_at: timestamp.nullable(),
  created_at: timestamp,
});

export const bindingOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  target_kind: z.enum(TARGET_KIND),
  target_id: z.uuid(),
  actions: z.array(z.string()),
  delegated: z.boolean(),
  constraints: constraintsSchema,
  expires_at: timestamp.nullable(),
  identity_id: z.uuid().nullable(),
  pinned_definition_hash: z
    .string()
    .nullable()
    .describe(
      "on a tool: the hash of the tool's definition (description and input schema) the binding was granted or last re-approved " +
        'against; null until the tool has been discovered',
    ),
  pinned_at: timestamp.nullable(),
  definition_changed: z
    .boolean()
    .describe(
      "the tool's definition is no longer the pinned one: the gateway refuses calls under this binding (TOOL_DEFINITION_CHANGED) " +
        'until it is re-approved (POST .../reapprove)',
    ),
  created_at: timestamp,
});

/** A permission binding's body; `now` bounds expires_at to the future. */
export const bindingIn = (now: () => Date) =>
  z.object({
    target_kind: z.enum(TARGET_KIND),
    target_id: z.uuid(),
    actions: bindingActions,
    delegated: z.boolean().default(false),
    constraints: constraintsSchema.default({}),
    expires_at: future(now),
    identity_id: z.uuid().nullable().optional(),
  });

export const bindingParams = agentParams.extend({ binding_id: z.uuid() });
export const delegationParams = agentParams.extend({ delegation_id: z.uuid() });

/** Why a binding is re-approved against its tool's new definition, kept in the audit entry and the evidence. */
export const reapproveIn = z.object({
  reason: z.string().trim().min(5).max(2000).describe('why the new definition is acceptable: 5-2000 characters once trimmed'),
});

/** Why a binding or delegation is removed, kept in the audit entry. */
export const removalQuery = z.object({ reason: z.string().max(2000).optional() });
