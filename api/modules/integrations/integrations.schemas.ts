import { z } from 'zod';
import { reasonBody } from '../../platform/reason.js';
import { timestamp } from '../../platform/schemas.js';
import { FORBIDDEN_CONFIG_KEYS, INTEGRATION_KIND, INTEGRATION_MODE } from './adapters/contract.js';

export const idParam = (name: string) => z.object({ [name]: z.uuid() });

export const RUN_STATUS = ['running', 'succeeded', 'failed'] as const;
export const INTEGRATION_STATUS = ['active', 'disabled'] as const;

/** Integration configuration: non-secret settings, at most 32 keys, 16 kB as JSON. */
const config = z
  .record(z.string().min(1).max(64), z.unknown())
  .default({})
  .refine((c) => Object.keys(c).length <= 32, 'at most 32 keys')
  .refine((c) => JSON.stringify(c).length <= 16_384, 'at most 16 kB')
  .meta({
    description:
      `Non-secret settings of the adapter (see GET /integrations/catalogue for each adapter's keys). A key named ` +
      `${FORBIDDEN_CONFIG_KEYS.join(', ')} (at any depth, in any letter case) is refused with 422 validation_failed, ` +
      `detail code forbidden_config_key: secrets live in the secret store, named by credential_ref_id.`,
  });

export const integrationIn = z.object({
  kind: z.enum(INTEGRATION_KIND),
  name: z.string().trim().min(2).max(200),
  mode: z.enum(INTEGRATION_MODE).default('mock'),
  config,
  credential_ref_id: z.uuid().nullable().optional(),
});

export const integrationStatusIn = reasonBody.extend({ status: z.enum(INTEGRATION_STATUS) });
export const connectorEnabledIn = reasonBody.extend({ enabled: z.boolean() });
export const runIn = z
  .object({ idempotency_key: z.string().max(200).nullable().optional() })
  .default({})
  .meta({ description: 'A retried request with the same idempotency_key answers the original run.' });

export const countersOut = z.object({
  agents_added: z.number().int(),
  models_added: z.number().int(),
  mcp_servers_added: z.number().int(),
  tools_added: z.number().int(),
  resources_added: z.number().int(),
  identities_added: z.number().int(),
  tools_changed: z.number().int(),
  findings_opened: z.number().int(),
});

export const runOut = z.object({
  id: z.uuid(),
  connector_id: z.uuid(),
  integration_id: z.uuid(),
  status: z.enum(RUN_STATUS),
  idempotency_key: z.string().nullable(),
  started_by: z.uuid().nullable(),
  started_at: timestamp,
  finished_at: timestamp.nullable(),
  counters: countersOut,
  warnings: z.array(z.string()),
  error_message: z.string().nullable(),
  correlation_id: z.string(),
});

export const connectorOut = z.object({
  id: z.uuid(),
  adapter_key: z.string(),
  enabled: z.boolean(),
  last_run_at: timestamp.nullable(),
  last_run: runOut.nullable(),
});

export const integrationOut = z.object({
  id: z.uuid(),
  kind: z.enum(INTEGRATION_KIND),
  name: z.string(),
  mode: z.enum(INTEGRATION_MODE),
  config: z.record(z.string(), z.unknown()),
  credential_ref_id: z.uuid().nullable(),
  status: z.enum(INTEGRATION_STATUS),
  connector: connectorOut,
  created_at: timestamp,
  updated_at: timestamp,
});

export const catalogueEntryOut = z.object({
  key: z.string(),
  kind: z.enum(INTEGRATION_KIND),
  mode: z.enum(INTEGRATION_MODE),
  description: z.string(),
  config_keys: z.array(z.string()),
  status: z.enum(['GA', 'Beta', 'Preview']),
  needs_secret: z.boolean(),
});

export type IntegrationIn = z.output<typeof integrationIn>;
export type RunOut = z.output<typeof runOut>;
export type Counters = z.output<typeof countersOut>;
