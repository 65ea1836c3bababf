import { z } from 'zod';
import { CLASSIFICATION, ENVIRONMENT } from '../../shared/index.js';
import { ConnectorError, emptyResult, type Adapter, type DiscoveredAgent, type DiscoverContext } from './contract.js';
import {
  expectSuccess,
  httpsUrlProblems,
  oneOfProblems,
  parseAnswer,
  plausibleEmail,
  requireSecret,
  send,
  setting,
  vendorModel,
  versionedRoot,
  whereOf,
  withoutSecret,
} from './live-support.js';

/**
 * The live `model_vendor_a` adapter (behaviour.md, "Connector kinds": models, and managed agents where the
 * key has access, otherwise the model inventory). It speaks the OpenAI REST API:
 *
 * - managed agents: the Assistants API v2, `GET {base}/v1/assistants?limit=100&order=asc[&after=<last_id>]`
 *   with `Authorization: Bearer <key>` and `OpenAI-Beta: assistants=v2`, answering
 *   `{object: 'list', data: [assistant], first_id, last_id, has_more}`;
 * - models: `GET {base}/v1/models`, answering `{object: 'list', data: [{id, object: 'model', created, owned_by}]}`.
 *
 * A key that may not list assistants (401 or 403 there, while the models list works) is a key without that
 * access, not a bad key: the run falls back to the model inventory with a warning. A key refused on both is
 * a refused credential. Only GETs: discovery never writes to the vendor.
 *
 * Assistants carry no owner, environment or classification of their own; organisations commonly keep them in
 * the assistant's `metadata` (string pairs), and these keys are read when present: `owner_name`,
 * `owner_email`, `purpose`, `environment`, `data_classification`, `business_unit`. Otherwise the agent's
 * environment is the configuration's `environment` (default `development`).
 */

const KEY = 'model_vendor_a';
/** The vendor's public API. */
export const MODEL_VENDOR_A_DEFAULT_BASE_URL = 'https://api.openai.com';
/** 20 pages of 100: more assistants than that is reported, not read. */
const ASSISTANT_PAGES_MAX = 20;
/** Function names listed in one warning, at most. */
const FUNCTION_NAMES_SHOWN = 10;

const metadataSchema = z.record(z.string(), z.string().nullable()).nullish();

const assistantToolSchema = z.looseObject({
  type: z.string(),
  function: z.looseObject({ name: z.string().max(200) }).optional(),
});

const assistantSchema = z.looseObject({
  id: z.string().min(1).max(200),
  name: z.string().max(512).nullish(),
  description: z.string().max(4000).nullish(),
  model: z.string().min(1).max(200),
  tools: z.array(assistantToolSchema).max(256).nullish(),
  metadata: metadataSchema,
});

const assistantPageSchema = z.looseObject({
  object: z.literal('list'),
  data: z.array(assistantSchema),
  last_id: z.string().nullish(),
  has_more: z.boolean(),
});

const modelListSchema = z.looseObject({
  object: z.literal('list'),
  data: z.array(z.looseObject({ id: z.string().min(1).max(200), owned_by: z.string().nullish() })),
});

type Assistant = z.output<typeof assistantSchema>;

function validateConfig(config: Record<string, unknown>): string[] {
  return [...oneOfProblems(config, 'environment', ENVIRONMENT), ...httpsUrlProblems(config, 'base_url')];
}

/** A metadata value, when it is non-empty text. */
function meta(a: Assistant, key: string): string | null {
  const value = a.metadata?.[key];
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

function oneOf<T extends string>(values: readonly T[], value: string | null): T | null {
  return value !== null && (values as readonly string[]).includes(value) ? (value as T) : null;
}

/** An assistant as a discovered agent: its tools say whether it runs code (code_interpreter) and keeps documents (file_search). */
export function assistantToAgent(a: Assistant, environment: DiscoveredAgent['environment']): DiscoveredAgent {
  const types = new Set((a.tools ?? []).map((t) => t.type));
  return {
    external_ref: `${KEY}:${a.id}`,
    name: a.name?.trim() || a.id,
    description: a.description ?? '',
    purpose: meta(a, 'purpose') ?? '',
    framework: 'model_vendor_a_assistants',
    environment: oneOf(ENVIRONMENT, meta(a, 'environment')) ?? environment,
    model: `${KEY}/${a.model}`,
    owner_name: meta(a, 'owner_name'),
    owner_email: plausibleEmail(meta(a, 'owner_email')),
    data_classification: oneOf(CLASSIFICATION, meta(a, 'data_classification')),
    internet_exposure: null,
    code_execution: types.has('code_interpreter') ? 'sandboxed' : 'none',
    persistent_memory: types.has('file_search') ? 'bounded' : null,
    human_approval_coverage: null,
    business_unit: meta(a, 'business_unit'),
    identities: [],
    // Function tools run in the calling application under names of its own (no registry tool key has that
    // shape), so nothing is granted; the warning below names them.
    tool_grants: [],
    resource_grants: [],
    delegations: [],
  };
}

/** The warning for an assistant's function tools, which Tollgate does not govern until they are registered. */
export function functionToolsWarning(a: Assistant): string | null {
  const names = (a.tools ?? []).flatMap((t) => (t.type === 'function' && t.function ? [t.function.name] : []));
  if (names.length === 0) return null;
  const shown = names.slice(0, FUNCTION_NAMES_SHOWN).join(', ') + (names.length > FUNCTION_NAMES_SHOWN ? `, … (${names.length} in all)` : '');
  return `assistant ${a.name?.trim() || a.id} (${a.id}) declares function tools that run in the calling application and are not registry tools: ${shown}; not granted`;
}

type Listing = { status: 'listed'; assistants: Assistant[]; truncated: boolean } | { status: 'refused'; code: number };

const refusal = (status: number) => status === 401 || status === 403;

/** Every assistant, page by page (`after` the last id), or `refused` when the key may not list them. */
async function listAssistants(ctx: DiscoverContext, root: string, headers: Record<string, string>): Promise<Listing> {
  const assistants: Assistant[] = [];
  let after: string | null = null;
  for (let page = 0; page < ASSISTANT_PAGES_MAX; page++) {
    const url: string = `${root}/assistants?limit=100&order=asc${after ? `&after=${encodeURIComponent(after)}` : ''}`;
    const answer = await send(ctx.http, url, { headers: { ...headers, 'openai-beta': 'assistants=v2' } });
    if (page === 0 && refusal(answer.status)) return { status: 'refused', code: answer.status };
    expectSuccess(answer, url);
    const data: z.output<typeof assistantPageSchema> = parseAnswer(assistantPageSchema, answer.body, url);
    assistants.push(...data.data);
    if (!data.has_more) return { status: 'listed', assistants, truncated: false };
    const last: string | null = data.last_id ?? data.data.at(-1)?.id ?? null;
    if (!last || last === after) throw new ConnectorError(`Malformed answer from ${whereOf(url, 'GET')}: has_more is true but last_id does not move on.`);
    after = last;
  }
  return { status: 'listed', assistants, truncated: true };
}

/** The models, or null when the key may not list them but did list assistants (a narrower key, not a refused one). */
async function listModels(ctx: DiscoverContext, root: string, headers: Record<string, string>, listing: Listing) {
  const url = `${root}/models`;
  const answer = await send(ctx.http, url, { headers });
  if (listing.status === 'listed' && refusal(answer.status)) return null;
  expectSuccess(answer, url);
  return parseAnswer(modelListSchema, answer.body, url).data;
}

async function discover(ctx: DiscoverContext) {
  const secret = requireSecret(ctx);
  const result = emptyResult(KEY, 'live');
  const root = versionedRoot(setting(ctx.config, 'base_url', MODEL_VENDOR_A_DEFAULT_BASE_URL));
  const environment = setting(ctx.config, 'environment', 'development') as DiscoveredAgent['environment'];
  const headers = { accept: 'application/json', authorization: `Bearer ${secret}` };

  const listing = await listAssistants(ctx, root, headers);
  if (listing.status === 'listed') {
    for (const a of listing.assistants) {
      result.agents.push(assistantToAgent(a, environment));
      const warning = functionToolsWarning(a);
      if (warning) result.warnings.push(warning);
    }
    if (listing.truncated) result.warnings.push(`more than ${ASSISTANT_PAGES_MAX * 100} assistants: only the first ${ASSISTANT_PAGES_MAX * 100} were read`);
  } else {
    result.warnings.push(`the key may not list managed agents (${listing.code}); only the model inventory was read`);
  }
  const models = await listModels(ctx, root, headers, listing);
  if (models) result.models.push(...models.map((m) => vendorModel(KEY, m.id)));
  else result.warnings.push('the key may not list models; only managed agents were read');
  return withoutSecret(result, secret);
}

/** `model_vendor_a`, live: managed agents (assistants) and models of an OpenAI-style API. */
export const modelVendorAAdapter: Adapter = {
  key: KEY,
  kind: 'model_vendor_a',
  mode: 'live',
  description:
    'Managed agents (assistants) and models of the vendor\'s OpenAI-style REST API; the model inventory only when the key may not list assistants. ' +
    'environment (default development) is the environment of the agents found; base_url (HTTPS) defaults to the vendor\'s public API.',
  configKeys: ['environment', 'base_url'],
  status: 'Preview',
  needsSecret: true,
  validateConfig,
  discover,
};
