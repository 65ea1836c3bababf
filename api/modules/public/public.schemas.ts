import { z } from 'zod';
import { email, timestamp } from '../../platform/schemas.js';

/** What a lead asks for (the spec's enumerations). */
export const LEAD_KIND = ['demo', 'assessment'] as const;
export const LEAD_REQUEST_TYPE = ['demo', 'risk-assessment', 'support', 'partnership', 'other'] as const;
export const LEAD_TOPIC = [
  'demo',
  'contact',
  'design-partner',
  'mcp-security-workshop',
  'architecture-consultation',
  'governance-readiness-review',
  'soc-demo',
  'devsec-pilot',
  'industry-discovery',
  'security-packs-pilot',
  'industry-packs-pilot',
  'security-report',
] as const;

/** What staff read: demo and assessment requests are leads, pricing quote requests are quotes. */
export const SUBMISSION_KIND = ['lead', 'quote'] as const;
export type SubmissionKind = (typeof SUBMISSION_KIND)[number];

/** The assessment answers a lead may carry: any JSON object, at most this long once written out. */
export const MAX_ASSESSMENT_BYTES = 16 * 1024;

const honeypot = z
  .string()
  .max(200)
  .default('')
  .describe('Leave empty. A form field people do not see: a request that fills it is answered 202 and dropped.');

/** Free text the spec bounds; surrounding white space does not count. */
const text = (min: number, max: number) => z.string().trim().min(min).max(max);

export const leadIn = z.object({
  kind: z.enum(LEAD_KIND),
  name: text(2, 120),
  email,
  company: text(2, 160),
  request_type: z.enum(LEAD_REQUEST_TYPE).nullable().optional(),
  topic: z.enum(LEAD_TOPIC).nullable().optional(),
  role: text(0, 120).nullable().optional(),
  message: text(0, 4000).nullable().optional(),
  consent: z
    .boolean()
    .default(false)
    .describe('Consent to be contacted about this request and to keep it (docs/public.md). Must be true: false answers 422.'),
  source_page: text(0, 200).nullable().optional().describe('the page of the website the form was sent from'),
  challenge_token: z.string().max(2048).nullable().optional().describe('the token of the challenge widget (form-config `challenge_site_key`)'),
  assessment: z
    .record(z.string().max(200), z.unknown())
    .nullable()
    .optional()
    .refine((a) => a == null || JSON.stringify(a).length <= MAX_ASSESSMENT_BYTES, `at most ${MAX_ASSESSMENT_BYTES} characters as JSON`)
    .describe('answers of the self-assessment, as the website collected them'),
  website: honeypot,
});
export type LeadIn = z.output<typeof leadIn>;

export const quoteIn = z.object({
  full_name: text(2, 120),
  work_email: email,
  company: text(2, 160),
  job_title: text(2, 120),
  country: text(2, 80),
  estimated_agents: z.number().int().min(1).max(1_000_000),
  deployment_model: text(0, 40),
  retention_period: text(0, 40),
  privacy_consent: z.boolean().describe('Agreement to the privacy notice for this request. Must be true: false answers 422.'),
  tier: text(0, 40).nullable().optional().describe('the pricing tier asked about (GET /public/pricing `tiers[].key`), free text'),
  products: z.array(text(1, 80)).max(20).default([]).describe('products of interest, at most 20'),
  message: text(0, 4000).default(''),
  website: honeypot,
});
export type QuoteIn = z.output<typeof quoteIn>;

/** The same answer for a stored request and a dropped one: a form learns nothing from it. */
export const receivedOut = z.object({ status: z.literal('received') });

export const formConfigOut = z.object({
  challenge_site_key: z.string().nullable().describe('site key of the challenge widget; null when forms need no challenge'),
  analytics_enabled: z.boolean().describe('whether the website may load its analytics'),
  docs_url: z.string().nullable().describe('where the website links for documentation; null when not configured'),
});

/** The pricing data file (pricing.json), schema version 1: what GET /public/pricing serves. */
export const pricingOut = z.object({
  schema_version: z.literal(1),
  currency: z.string().regex(/^[A-Z]{3}$/),
  indicative: z.literal(true).describe('prices are indicative; a quote (POST /public/pricing-quote) gives the real one'),
  updated: z.iso.date(),
  tiers: z
    .array(
      z.object({
        key: z.string().regex(/^[a-z][a-z0-9-]{0,39}$/),
        name: z.string().min(1).max(80),
        summary: z.string().min(1).max(300),
        price: z
          .object({
            amount: z.number().int().min(0),
            unit: z.enum(['per_agent', 'flat']),
            period: z.enum(['month', 'year']),
          })
          .nullable()
          .describe('null: priced on request'),
        agents: z.object({ min: z.number().int().min(0), max: z.number().int().min(1).nullable() }),
        includes: z.array(z.string().min(1).max(200)).min(1),
      }),
    )
    .min(1),
  notes: z.array(z.string().min(1).max(300)),
});
export type Pricing = z.infer<typeof pricingOut>;

export const submissionsQuery = z.object({
  kind: z.enum(SUBMISSION_KIND).optional().describe('only leads or only quotes; absent: both'),
});

export const submissionOut = z.object({
  id: z.uuid(),
  kind: z.enum(SUBMISSION_KIND),
  name: z.string(),
  email: z.string(),
  company: z.string(),
  details: z.record(z.string(), z.unknown()).describe("the rest of the form as it was sent (the lead's or the quote's fields)"),
  consent_given: z.boolean(),
  consented_at: timestamp.nullable(),
  client_address_hash: z.string().describe('a keyed hash of the client address: equal for submissions from one address'),
  user_agent: z.string().nullable(),
  created_at: timestamp,
});
export type SubmissionOut = z.infer<typeof submissionOut>;
