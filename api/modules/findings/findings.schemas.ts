import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';

/** A finding's triage states (the spec's enumeration); the last three close it. */
export const FINDING_STATUS = ['open', 'in_progress', 'resolved', 'accepted', 'false_positive'] as const;
export type FindingStatus = (typeof FINDING_STATUS)[number];

/** States that close a finding: moving into one sets `resolved_at`, moving out clears it. */
export const CLOSED_STATUSES: ReadonlySet<FindingStatus> = new Set(['resolved', 'accepted', 'false_positive']);

export const FINDING_SEVERITY = ['low', 'medium', 'high', 'critical'] as const;
export type FindingSeverity = (typeof FINDING_SEVERITY)[number];

export const findingParams = z.object({ finding_id: z.uuid() });

/** The filters of GET /findings, each optional (absent: any); an unknown status or severity answers 422. */
export const findingsQuery = z.object({
  status: z.enum(FINDING_STATUS).optional(),
  severity: z.enum(FINDING_SEVERITY).optional(),
  category: z.string().max(80).optional().describe('exact category, e.g. tool_poisoning'),
  q: z.string().max(200).optional().describe('searches title and description, case-insensitively'),
  agent_id: z.uuid().optional(),
});
export type FindingFilters = z.output<typeof findingsQuery>;

/**
 * Triage of one finding. Absent or null leaves a field as it is (as every PATCH of the API does); an
 * empty `assigned_to` or `note` clears it.
 */
export const findingPatch = z.object({
  status: z.enum(FINDING_STATUS).nullable().optional(),
  assigned_to: z.string().trim().max(320).nullable().optional().describe('who works on it (free text, e.g. an email); empty clears it'),
  note: z.string().trim().max(2000).nullable().optional().describe('triage note; empty clears it'),
});
export type FindingPatch = z.output<typeof findingPatch>;

export const findingOut = z.object({
  id: z.uuid(),
  category: z.string().describe('what kind of problem, e.g. tool_poisoning, tool_definition_changed, unattested_agent'),
  severity: z.enum(FINDING_SEVERITY),
  status: z.enum(FINDING_STATUS),
  title: z.string(),
  description: z.string(),
  evidence: z.record(z.string(), z.unknown()).describe('what the finding rests on, as the detector recorded it (quoted text, hashes, counts)'),
  agent_id: z.uuid().nullable(),
  mcp_server_id: z.uuid().nullable(),
  tool_id: z.uuid().nullable(),
  run_id: z.uuid().nullable().describe('the discovery run that opened it'),
  assigned_to: z.string().nullable(),
  note: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  resolved_at: timestamp.nullable().describe('when it last moved to resolved, accepted or false_positive; null while open'),
  version: z.number().int(),
});
export type FindingOut = z.infer<typeof findingOut>;
