import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { toCheckpoint } from './checkpoints.repository.js';
import { checkpointsPage, newestCheckpoint } from './checkpoints.service.js';
import { toEvidence } from './evidence.repository.js';
import { evidencePage, evidenceRecord, verifyEvidence } from './evidence.service.js';

const tags = ['Evidence and governance'];

const evidenceOut = z.object({
  id: z.uuid(),
  seq: z.number().int(),
  event_type: z.string(),
  agent_id: z.uuid().nullable(),
  action_request_id: z.uuid().nullable(),
  control_ref: z.string().nullable(),
  correlation_id: z.string(),
  payload: z.unknown(),
  created_at: timestamp,
  prev_hash: z.string(),
  hash: z.string(),
  signature: z.string(),
  kid: z.string(),
});

const checkpointOut = z
  .object({
    org_id: z.uuid(),
    seq: z.number().int().describe("the head's seq: the number of records in the chain when the checkpoint was signed"),
    hash: z.string().describe("the head's hash (SHA-256, hex)"),
    created_at: timestamp,
    kid: z.string().describe('the evidence key that signed it (GET /evidence/keys)'),
    signature: z
      .string()
      .describe('Ed25519, base64url, over the SHA-256 of the RFC 8785 canonical JSON of {org_id, seq, hash, created_at}'),
  })
  .describe('A signed checkpoint of the chain head: store it as it is, and verify it later with `tollgate evidence verify` (docs/evidence.md)');

export async function evidenceRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, config, evidence } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/evidence',
    {
      ...caller('evidence:read'),
      schema: {
        summary: 'Evidence records, newest first; filters match exactly',
        tags,
        querystring: pageQuery().extend({
          event_type: z.string().max(80).optional(),
          control_ref: z.string().max(200).optional(),
          agent_id: z.uuid().optional(),
          action_request_id: z.uuid().optional(),
        }),
        response: { 200: pageOf(evidenceOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const { limit, cursor, event_type, control_ref, agent_id, action_request_id } = req.query;
      const scope = `evidence:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await evidencePage(db, p.orgId, { event_type, control_ref, agent_id, action_request_id }, after?.id, limit + 1);
      return cursors.page(scope, rows, limit, (e) => ({ t: iso(e.created_at), id: String(e.seq) }), toEvidence);
    },
  );

  r.get(
    '/evidence/verify',
    {
      ...caller('evidence:read'),
      schema: {
        summary: "Recompute the organisation's chain, hashes and signatures, and name the first broken record",
        tags,
        response: {
          200: z.object({
            valid: z.boolean(),
            records_checked: z.number().int(),
            head_seq: z.number().int(),
            first_broken: z.object({ id: z.uuid().nullable(), seq: z.number().int(), reason: z.string() }).nullable(),
          }),
        },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return verifyEvidence(db, evidence, p.orgId);
    },
  );

  r.get(
    '/evidence/keys',
    {
      ...beyondSpec(caller('evidence:read')),
      schema: {
        summary: 'The public keys that verify evidence here, the signing one first, to verify records offline',
        tags,
        response: {
          200: z.object({
            items: z.array(
              z.object({
                kid: z.string(),
                algorithm: z.literal('Ed25519'),
                public_key: z.string().describe('SubjectPublicKeyInfo, DER, base64url'),
                current: z.boolean().describe('whether this key signs new records'),
              }),
            ),
          }),
        },
      },
    },
    async () => ({ items: evidence.publicKeys().map((k) => ({ ...k, algorithm: 'Ed25519' as const })) }),
  );

  r.get(
    '/evidence/checkpoints',
    {
      ...beyondSpec(caller('evidence:read')),
      schema: {
        summary: "Signed checkpoints of the organisation's chain head, newest first, for an auditor to store",
        tags,
        querystring: pageQuery(),
        response: { 200: pageOf(checkpointOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const { limit, cursor } = req.query;
      const scope = `evidence-checkpoints:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await checkpointsPage(db, p.orgId, after?.id, limit + 1);
      return cursors.page(scope, rows, limit, (c) => ({ t: iso(c.created_at), id: String(c.seq) }), toCheckpoint);
    },
  );

  r.get(
    '/evidence/checkpoints/latest',
    {
      ...beyondSpec(caller('evidence:read')),
      schema: {
        summary: "The newest signed checkpoint of the organisation's chain head; 404 before the first",
        tags,
        response: { 200: checkpointOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return toCheckpoint(await newestCheckpoint(db, p.orgId));
    },
  );

  r.get(
    '/evidence/:evidence_id',
    {
      ...caller('evidence:read'),
      schema: { summary: 'One evidence record', tags, params: z.object({ evidence_id: z.uuid() }), response: { 200: evidenceOut } },
    },
    async (req) => {
      const p = actorOf(req);
      return toEvidence(await evidenceRecord(db, p.orgId, req.params.evidence_id));
    },
  );
}
