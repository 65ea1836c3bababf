import { createHmac, randomUUID } from 'node:crypto';
import type { Config } from '../../config.js';
import { inScope, type Db } from '../../db/database.js';
import type { Clock } from '../../../lib/clock.js';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { notFound, validationFailed } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { escapeHtml, type MailMessage } from '../mail/index.js';
import { toCsv } from '../reports/index.js';
import {
  deleteSubmissionsBefore,
  insertSubmission,
  listSubmissions,
  toSubmission,
  type NewSubmission,
  type SubmissionRow,
} from './public.repository.js';
import type { LeadIn, QuoteIn, SubmissionKind } from './public.schemas.js';

/** How long a submission is kept (docs/public.md, Retention): expired ones are deleted on the next submission and never served. */
export const SUBMISSION_RETENTION_DAYS = 365;
/** The most rows one export holds, newest first (docs/public.md). */
export const EXPORT_MAX_ROWS = 50_000;
/** The user agent is kept to tell a browser from a script, not to fingerprint: its first characters are enough. */
const USER_AGENT_MAX = 400;

/** Who sent a form, as far as the service keeps it. */
export interface Client {
  ip: string;
  userAgent: string | undefined;
}

/** Checks a challenge widget's token (api/modules/auth/challenge.ts implements it). */
export interface Challenge {
  verify(token: string | null | undefined, remoteIp: string): Promise<boolean>;
}

/** What a form submission needs besides its body. */
export interface SubmissionDeps {
  db: Db;
  clock: Clock;
  config: Config;
  /** Asked only when a challenge site key is configured (the website shows the widget exactly then). */
  challenge: Challenge;
}

/** The form settings the website reads: the challenge widget's site key, analytics, the documentation link. */
export function formConfig(config: Config) {
  return {
    challenge_site_key: config.challenge.siteKey ?? null,
    analytics_enabled: config.publicSite.analyticsEnabled,
    docs_url: config.publicSite.docsUrl ?? null,
  };
}

/**
 * A keyed hash of the client address: submissions from one address share it, and the address itself is not
 * kept. Keyed with the secret pepper, so that the hash of a guessed address cannot be computed from the data.
 */
export function clientAddressHash(pepper: string, ip: string): string {
  return createHmac('sha256', pepper).update('tollgate:public-client-address:v1\n').update(ip).digest('hex').slice(0, 32);
}

const retentionCutoff = (now: Date) => new Date(now.getTime() - SUBMISSION_RETENTION_DAYS * 86_400_000);

/** A filled honeypot: a person does not see the field, so whatever fills it is a script. */
const isBot = (website: string) => website.trim() !== '';

/** Stores a submission (after deleting expired ones) in one transaction of its own. */
async function store(deps: SubmissionDeps, s: Omit<NewSubmission, 'id' | 'createdAt' | 'consentedAt' | 'clientAddressHash' | 'userAgent'>, client: Client) {
  const now = deps.clock.now();
  const row: NewSubmission = {
    ...s,
    id: randomUUID(),
    createdAt: now,
    // Consent is required (docs/public.md), so a stored submission was consented to when it arrived.
    consentedAt: now,
    clientAddressHash: clientAddressHash(deps.config.secretPepper, client.ip),
    userAgent: client.userAgent ? client.userAgent.slice(0, USER_AGENT_MAX) : null,
  };
  await inScope(deps.db, {}, async (tx) => {
    await deleteSubmissionsBefore(tx, retentionCutoff(now));
    await insertSubmission(tx, row);
  });
  return row;
}

/** Whether the challenge was passed; asked only when the website shows one. */
async function checkChallenge(deps: SubmissionDeps, token: string | null | undefined, client: Client): Promise<void> {
  if (!deps.config.challenge.siteKey) return;
  if (!(await deps.challenge.verify(token, client.ip))) {
    throw validationFailed([{ field: 'challenge_token', message: 'the challenge was not passed; solve it again', code: 'challenge_failed' }]);
  }
}

const consentRequired = (field: string) =>
  validationFailed(
    [{ field, message: 'must be true: a request is kept and answered only with consent', code: 'consent_required' }],
    'Consent is required to send this form.',
  );

/**
 * POST /public/leads: a demo or assessment request. A filled honeypot answers as a stored one would and keeps
 * nothing; without consent it answers 422; otherwise it is stored. Answers the stored row (null when dropped).
 */
export async function receiveLead(deps: SubmissionDeps, body: LeadIn, client: Client): Promise<NewSubmission | null> {
  if (isBot(body.website)) return null;
  if (!body.consent) throw consentRequired('consent');
  await checkChallenge(deps, body.challenge_token, client);
  const { website: _w, challenge_token: _c, name, email, company, consent: _consent, ...details } = body;
  return store(deps, { kind: 'lead', name, email, company, payload: details }, client);
}

/** POST /public/pricing-quote: the same for a quote request, whose consent is `privacy_consent`. */
export async function receiveQuote(deps: SubmissionDeps, body: QuoteIn, client: Client): Promise<NewSubmission | null> {
  if (isBot(body.website)) return null;
  if (!body.privacy_consent) throw consentRequired('privacy_consent');
  const { website: _w, full_name, work_email, company, privacy_consent: _consent, ...details } = body;
  return store(deps, { kind: 'quote', name: full_name, email: work_email, company, payload: details }, client);
}

/**
 * Submissions are the operator's: only a member of the operator's organisation (SALES_ORG_ID) reaches them
 * (the route's permission decides which members). Anyone else, and everyone while it is unset, is answered
 * 404 as if the operation did not exist.
 */
function operatorOrgOr404(config: Config, actor: ActorPrincipal): string {
  const orgId = config.publicSite.salesOrgId;
  if (!orgId || actor.orgId !== orgId) throw notFound();
  return orgId;
}

/** One page of the submissions, newest first; `query.cursor` continues a listing. */
export function listSubmissionsPage(
  db: Db,
  clock: Clock,
  config: Config,
  cursors: Cursors,
  actor: ActorPrincipal,
  query: { kind?: SubmissionKind; limit: number; cursor?: string },
) {
  const orgId = operatorOrgOr404(config, actor);
  const scope = `public-submissions:${query.kind ?? 'all'}`;
  const after = cursors.decode(scope, query.cursor);
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listSubmissions(tx, retentionCutoff(clock.now()), query.kind, after, query.limit);
    return cursors.page(scope, rows, query.limit, (r) => ({ t: iso(r.created_at), id: r.id }), toSubmission);
  });
}

const CSV_HEADER = [
  'id',
  'kind',
  'created_at',
  'name',
  'email',
  'company',
  'lead_kind',
  'request_type',
  'topic',
  'role',
  'job_title',
  'country',
  'estimated_agents',
  'deployment_model',
  'retention_period',
  'tier',
  'products',
  'message',
  'source_page',
  'assessment',
  'consent_given',
  'consented_at',
  'client_address_hash',
  'user_agent',
] as const;

function csvRow(r: SubmissionRow): unknown[] {
  const d = (r.payload ?? {}) as Record<string, unknown>;
  return [
    r.id,
    r.kind,
    r.created_at,
    r.name,
    r.email,
    r.company,
    // A lead's own kind (demo or assessment) is `kind` in its form.
    r.kind === 'lead' ? d.kind : null,
    d.request_type,
    d.topic,
    d.role,
    d.job_title,
    d.country,
    d.estimated_agents,
    d.deployment_model,
    d.retention_period,
    d.tier,
    d.products,
    d.message,
    d.source_page,
    d.assessment,
    r.consent_given,
    r.consented_at,
    r.client_address_hash,
    r.user_agent,
  ];
}

/**
 * Every submission kept (of one kind or both, newest first, at most EXPORT_MAX_ROWS) as CSV, for a
 * spreadsheet or a CRM import; cells a spreadsheet would run as formulas are written as text. The export is
 * audited in the operator's organisation (who, how many), without the submissions' content.
 */
export async function exportSubmissions(db: Db, clock: Clock, config: Config, req: RequestContext, actor: ActorPrincipal, kind: SubmissionKind | undefined) {
  const orgId = operatorOrgOr404(config, actor);
  const now = clock.now();
  const rows = await inScope(db, { orgId }, async (tx) => {
    const found = (await listSubmissions(tx, retentionCutoff(now), kind, undefined, EXPORT_MAX_ROWS)).slice(0, EXPORT_MAX_ROWS);
    await audit(tx, req, orgId, {
      action: 'public_submission.export',
      targetType: 'public_submission',
      details: { kind: kind ?? 'all', rows: found.length },
    });
    return found;
  });
  return {
    csv: toCsv(CSV_HEADER, rows.map(csvRow)),
    fileName: `public-submissions-${kind ?? 'all'}-${iso(now).slice(0, 16).replace(/[-:]/g, '').replace('T', '-')}.csv`,
  };
}

/** The form's fields, in the order a person reads them, for the sales notification. */
function fieldsOf(s: NewSubmission): Array<[string, string]> {
  const shown = (v: unknown) => (v === null || v === undefined || v === '' ? null : Array.isArray(v) ? v.join(', ') : typeof v === 'object' ? JSON.stringify(v) : String(v));
  const all: Array<[string, unknown]> = [
    ['Name', s.name],
    ['Email', s.email],
    ['Company', s.company],
    ...Object.entries(s.payload).map(([k, v]): [string, unknown] => [k.replaceAll('_', ' '), v]),
    ['Received', iso(s.createdAt)],
    ['Submission', s.id],
  ];
  return all.flatMap(([k, v]) => {
    const text = shown(v);
    return text === null ? [] : [[k, text] as [string, string]];
  });
}

/**
 * The email that tells sales about a stored submission. The subject names no one: the memory and none
 * backends log subjects, and the submitter's data stays out of logs.
 */
export function salesNotification(to: string, s: NewSubmission): MailMessage {
  const what =
    s.kind === 'quote'
      ? 'pricing quote request'
      : (s.payload as { kind?: string }).kind === 'assessment'
        ? 'assessment request'
        : 'demo request';
  const fields = fieldsOf(s);
  const text = [
    `A new ${what} came in through the website.`,
    '',
    ...fields.map(([k, v]) => `${k}: ${v}`),
    '',
    'Staff of the operator organisation can list and export submissions: GET /api/v1/public-submissions.',
  ].join('\n');
  const rows = fields.map(([k, v]) => `<tr><th align="left" valign="top">${escapeHtml(k)}</th><td style="white-space: pre-wrap">${escapeHtml(v)}</td></tr>`);
  const html = `<p>A new ${what} came in through the website.</p>\n<table>\n${rows.join('\n')}\n</table>\n`;
  return { to, subject: `New ${what} from the website`, text, html };
}
