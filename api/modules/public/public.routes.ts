import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { beyondSpec, caller } from '../../platform/route.js';
import type { Mailer } from '../mail/index.js';
import type { NewSubmission } from './public.repository.js';
import { formConfigOut, leadIn, pricingOut, quoteIn, receivedOut, submissionOut, submissionsQuery } from './public.schemas.js';
import {
  exportSubmissions,
  formConfig,
  listSubmissionsPage,
  receiveLead,
  receiveQuote,
  salesNotification,
  type Client,
  type SubmissionDeps,
} from './public.service.js';
import { PRICING } from './pricing.js';

const tags = ['Public website'];

const received = { status: 'received' as const };

const clientOf = (req: FastifyRequest): Client => ({ ip: req.ip, userAgent: req.headers['user-agent'] });

/**
 * Tells sales about a stored submission (SALES_EMAIL), after its transaction committed. A failed send loses
 * nothing (the submission is stored and staff list it) and is logged without the submitter's data: the error's
 * name and code and the submission's id only.
 */
async function notifySales(mailer: Mailer, to: string | undefined, s: NewSubmission, log: FastifyBaseLogger): Promise<void> {
  if (!to) return;
  try {
    await mailer.send(salesNotification(to, s));
  } catch (err) {
    const e = err as { name?: string; code?: string };
    log.warn({ submission_id: s.id, error: { name: e.name, code: e.code } }, 'sales notification not sent; the submission is stored');
  }
}

export async function publicRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  // The mailer of EMAIL_BACKEND and the challenge verifier of CHALLENGE_VERIFIER, as api/app.ts builds them.
  const { db, clock, config, mailer, challenge } = app.deps;
  const cursors = new Cursors(config.sessionSecret);
  const deps: SubmissionDeps = { db, clock, config, challenge };
  const salesEmail = config.publicSite.salesEmail;

  r.get(
    '/public/form-config',
    {
      ...caller('public'),
      schema: {
        summary: "The website forms' settings: challenge site key, analytics, documentation link",
        tags,
        response: { 200: formConfigOut },
      },
    },
    async () => formConfig(config),
  );

  r.post(
    '/public/leads',
    {
      ...caller('public'),
      schema: {
        summary: 'Ask for a demo or an assessment',
        description:
          'Stored for the operator\'s sales staff and announced to SALES_EMAIL (docs/public.md). `consent` must be true ' +
          '(false answers 422); `challenge_token` is checked when form-config names a challenge site key. A filled ' +
          '`website` (the honeypot) is answered 202 like any other and nothing is kept. Rate-limited per client address.',
        tags,
        body: leadIn,
        response: { 202: receivedOut },
      },
    },
    async (req, reply) => {
      const stored = await receiveLead(deps, req.body, clientOf(req));
      if (stored) await notifySales(mailer, salesEmail, stored, req.log);
      return reply.status(202).send(received);
    },
  );

  r.get(
    '/public/pricing',
    {
      ...caller('public'),
      schema: {
        summary: 'Indicative pricing, schema version 1',
        description: 'Tiers with their indicative prices and what each includes; a quote (POST /public/pricing-quote) gives the real price.',
        tags,
        response: { 200: pricingOut },
      },
    },
    async () => PRICING,
  );

  r.post(
    '/public/pricing-quote',
    {
      ...caller('public'),
      schema: {
        summary: 'Ask for a pricing quote',
        description:
          'Stored for the operator\'s sales staff and announced to SALES_EMAIL (docs/public.md). `privacy_consent` must be ' +
          'true (false answers 422). A filled `website` (the honeypot) is answered 202 like any other and nothing is ' +
          'kept. Rate-limited per client address.',
        tags,
        body: quoteIn,
        response: { 202: receivedOut },
      },
    },
    async (req, reply) => {
      const stored = await receiveQuote(deps, req.body, clientOf(req));
      if (stored) await notifySales(mailer, salesEmail, stored, req.log);
      return reply.status(202).send(received);
    },
  );

  const staffNote =
    'Only for members of the operator\'s organisation (SALES_ORG_ID) holding tenant:manage; anyone else is answered 404 ' +
    `(docs/public.md). Submissions older than the retention are not shown.`;

  r.get(
    '/public-submissions',
    {
      ...beyondSpec(caller('tenant:manage')),
      schema: {
        summary: "The website's leads and quote requests, newest first",
        description: staffNote,
        tags,
        querystring: pageQuery().extend(submissionsQuery.shape),
        response: { 200: pageOf(submissionOut) },
      },
    },
    async (req) => listSubmissionsPage(db, clock, config, cursors, actorOf(req), req.query),
  );

  r.get(
    '/public-submissions/export',
    {
      ...beyondSpec(caller('tenant:manage')),
      schema: {
        summary: "The website's leads and quote requests as CSV",
        description:
          `${staffNote} UTF-8 with a byte-order mark, a header row, CRLF line ends, RFC 4180 quoting; a cell starting ` +
          'with = + - @ (or a tab or carriage return) is prefixed with an apostrophe so that a spreadsheet shows it as ' +
          'text. Newest first, at most 50 000 rows. Exports are audited.',
        tags,
        querystring: submissionsQuery,
        response: {
          200: {
            description: 'The submissions',
            content: { 'text/csv': { schema: z.string().describe('a header row, then one row per submission') } },
          },
        },
      },
    },
    async (req, reply) => {
      const out = await exportSubmissions(db, clock, config, req, actorOf(req), req.query.kind);
      return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${out.fileName}"`).send(out.csv);
    },
  );
}
