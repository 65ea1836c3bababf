import { z } from 'zod';
import { reasonBody } from '../../platform/reason.js';
import { email, timestamp } from '../../platform/schemas.js';
import {
  AGENT_SOURCE,
  AGENT_STATUS,
  CLASSIFICATION,
  CODE_EXECUTION,
  CRITICALITY,
  ENVIRONMENT,
  HUMAN_APPROVAL_COVERAGE,
  INTERNET_EXPOSURE,
  OWNER_TYPE,
  PERSISTENT_MEMORY,
  RISK_BAND,
} from '../shared/index.js';

const tags = z.array(z.string().trim().min(1).max(64)).max(50);

export const ownerIn = z.object({
  name: z.string().trim().min(1).max(200),
  email,
  owner_type: z.enum(OWNER_TYPE).default('accountable'),
});

export const SLUG = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

export const agentIn = z.object({
  name: z.string().trim().min(2).max(200),
  slug: z
    .string()
    .max(100)
    .regex(/^$|^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, 'lower-case letters, digits and inner hyphens')
    .nullable()
    .optional(),
  description: z.string().max(4000).default(''),
  purpose: z.string().max(4000).default(''),
  framework: z.string().max(64).default('custom'),
  environment: z.enum(ENVIRONMENT).default('development'),
  business_unit: z.string().max(120).nullable().optional(),
  criticality: z.enum(CRITICALITY).default('medium'),
  data_classification: z.enum(CLASSIFICATION).optional(),
  internet_exposure: z.enum(INTERNET_EXPOSURE).default('none'),
  code_execution: z.enum(CODE_EXECUTION).default('none'),
  persistent_memory: z.enum(PERSISTENT_MEMORY).default('none'),
  human_approval_coverage: z.enum(HUMAN_APPROVAL_COVERAGE).default('none'),
  tags: tags.default([]),
  owners: z.array(ownerIn).max(20).default([]),
});

export const agentPatch = z.object({
  name: z.string().trim().min(2).max(200).nullable().optional(),
  description: z.string().max(4000).nullable().optional(),
  purpose: z.string().max(4000).nullable().optional(),
  framework: z.string().max(64).nullable().optional(),
  environment: z.enum(ENVIRONMENT).nullable().optional(),
  business_unit: z.string().max(120).nullable().optional(),
  criticality: z.enum(CRITICALITY).nullable().optional(),
  data_classification: z.enum(CLASSIFICATION).nullable().optional(),
  internet_exposure: z.enum(INTERNET_EXPOSURE).nullable().optional(),
  code_execution: z.enum(CODE_EXECUTION).nullable().optional(),
  persistent_memory: z.enum(PERSISTENT_MEMORY).nullable().optional(),
  human_approval_coverage: z.enum(HUMAN_APPROVAL_COVERAGE).nullable().optional(),
  gateway_enforced: z.boolean().nullable().optional(),
  tags: tags.nullable().optional(),
});

export const ownerOut = z.object({
  id: z.uuid(),
  name: z.string(),
  email: z.string(),
  owner_type: z.enum(OWNER_TYPE),
  created_at: timestamp,
});

export const agentOut = z.object({
  id: z.uuid(),
  slug: z.string(),
  agent_uri: z.string(),
  name: z.string(),
  description: z.string(),
  purpose: z.string(),
  framework: z.string(),
  environment: z.enum(ENVIRONMENT),
  business_unit: z.string().nullable(),
  criticality: z.enum(CRITICALITY),
  data_classification: z.enum(CLASSIFICATION),
  internet_exposure: z.enum(INTERNET_EXPOSURE),
  code_execution: z.enum(CODE_EXECUTION),
  persistent_memory: z.enum(PERSISTENT_MEMORY),
  human_approval_coverage: z.enum(HUMAN_APPROVAL_COVERAGE),
  gateway_enforced: z.boolean(),
  tags: z.array(z.string()),
  status: z.enum(AGENT_STATUS),
  gateway_access: z.boolean(),
  source: z.enum(AGENT_SOURCE),
  external_ref: z.string().nullable().describe('a discovered agent: its reference in its source, `<kind>:<id>`; null otherwise'),
  integration_id: z.uuid().nullable().describe('a discovered agent: the integration whose discovery found it first'),
  last_seen_at: timestamp.nullable().describe('a discovered agent: when discovery last saw it in its source'),
  risk_band: z.enum(RISK_BAND).nullable(),
  owners: z.array(ownerOut),
  last_attested_at: timestamp.nullable(),
  version: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const agentsQuery = z.object({
  q: z.string().max(200).optional(),
  environment: z.enum(ENVIRONMENT).optional(),
  status: z.enum(AGENT_STATUS).optional(),
  risk_band: z.enum(RISK_BAND).optional(),
  source: z.enum(AGENT_SOURCE).optional(),
});

export const agentParams = z.object({ agent_id: z.uuid() });

export const versionIn = z.object({
  version_label: z.string().trim().min(1).max(64),
  model_id: z.uuid().nullable().optional(),
  manifest: z.record(z.string(), z.unknown()).default({}),
  change_summary: z.string().max(2000).default(''),
});
export const versionOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  version_label: z.string(),
  model_id: z.uuid().nullable(),
  manifest: z.record(z.string(), z.unknown()),
  change_summary: z.string(),
  created_by: z.uuid().nullable(),
  created_at: timestamp,
});

export const attestIn = z.object({ statement: z.string().trim().min(10).max(2000) });
export const attestationOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  statement: z.string(),
  attested_by: z.uuid(),
  attested_at: timestamp,
});

export const containmentEventOut = z.object({
  id: z.uuid(),
  action: z.string(),
  reason: z.string(),
  actor_id: z.uuid().nullable(),
  correlation_id: z.string(),
  details: z.record(z.string(), z.unknown()),
  at: timestamp,
});

/** Switching gateway access is a containment operation: it takes a reason and a confirmation. */
export const gatewayAccessIn = reasonBody.extend({ enabled: z.boolean() });
