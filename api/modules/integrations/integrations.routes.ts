import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { caller } from '../../platform/route.js';
import { catalogue } from './adapters/index.js';
import {
  catalogueEntryOut,
  connectorEnabledIn,
  idParam,
  integrationIn,
  integrationOut,
  integrationStatusIn,
  runIn,
  runOut,
} from './integrations.schemas.js';
import {
  createIntegration,
  listIntegrations,
  listRuns,
  setConnectorEnabled,
  setIntegrationStatus,
  startRun,
} from './integrations.service.js';

const tags = ['Integrations'];
const items = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item) });

/** Integrations, their connectors and discovery runs (behaviour.md, "Discovery and integrations"). */
export async function integrationsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  r.post(
    '/connectors/:connector_id/enabled',
    {
      ...caller('integration:manage'),
      schema: {
        summary: 'Enable or disable a connector (containment), with a reason',
        tags,
        params: idParam('connector_id'),
        body: connectorEnabledIn,
        response: { 200: integrationOut },
      },
    },
    async (req) => setConnectorEnabled(db, clock, req, actorOf(req).orgId, req.params.connector_id as string, req.body),
  );

  r.post(
    '/connectors/:connector_id/run',
    {
      ...caller('connector:run'),
      schema: {
        summary: 'Start a discovery run; it answers at once with the run, running',
        description:
          'The run is recorded `running` and its job queued in one transaction; the worker moves it to `succeeded` or ' +
          '`failed`. An `idempotency_key` already used on this connector answers that run. 409 conflict while another ' +
          'run of the connector is running, or when the connector or its integration is disabled, or for a webhook integration.',
        tags,
        params: idParam('connector_id'),
        body: runIn,
        response: { 200: runOut },
      },
    },
    async (req) => startRun(db, clock, req, actorOf(req).orgId, req.params.connector_id as string, req.body ?? {}),
  );

  r.get(
    '/connectors/:connector_id/runs',
    {
      ...caller('integration:read'),
      schema: { summary: "The connector's last 50 runs, newest first", tags, params: idParam('connector_id'), response: { 200: items(runOut) } },
    },
    async (req) => ({ items: await listRuns(db, actorOf(req).orgId, req.params.connector_id as string) }),
  );

  r.get(
    '/integrations',
    { ...caller('integration:read'), schema: { summary: 'Integrations, each with its connector and latest run', tags, response: { 200: items(integrationOut) } } },
    async (req) => ({ items: await listIntegrations(db, actorOf(req).orgId) }),
  );

  r.post(
    '/integrations',
    {
      ...caller('integration:manage'),
      schema: {
        summary: 'Configure an integration; it gets its connector',
        description:
          'A configuration key named secret, password, api_key, token or client_secret, at any depth, answers 422 ' +
          '`validation_failed` with detail code `forbidden_config_key`: secrets stay in the secret store and the ' +
          'integration names them with `credential_ref_id`. The adapter checks its own keys (see the catalogue).',
        tags,
        body: integrationIn,
        response: { 201: integrationOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createIntegration(db, clock, req, actorOf(req).orgId, req.body)),
  );

  r.post(
    '/integrations/:integration_id/status',
    {
      ...caller('integration:manage'),
      schema: {
        summary: 'Activate or disable an integration, with a reason',
        tags,
        params: idParam('integration_id'),
        body: integrationStatusIn,
        response: { 200: integrationOut },
      },
    },
    async (req) => setIntegrationStatus(db, clock, req, actorOf(req).orgId, req.params.integration_id as string, req.body),
  );

  r.get(
    '/integrations/catalogue',
    {
      ...caller('integration:read'),
      schema: { summary: 'The adapters, with their configuration keys and status', tags, response: { 200: items(catalogueEntryOut) } },
    },
    async () => ({ items: catalogue() }),
  );
}
