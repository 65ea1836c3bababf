import { z } from 'zod';
import { emptyResult, type Adapter, type DiscoverContext } from './contract.js';
import { getJson, httpsUrlProblems, requireSecret, setting, vendorModel, versionedRoot, withoutSecret } from './live-support.js';

/**
 * The live `model_vendor_b` adapter (behaviour.md, "Connector kinds": the models available to the account,
 * `base_url` HTTPS required, default the vendor's public API). It speaks the OpenAI-compatible models list
 * that most vendors and self-hosted servers offer: `GET {root}/models` with `Authorization: Bearer <key>`,
 * answering `{object: 'list', data: [{id, object: 'model', created, owned_by}]}`.
 *
 * `base_url` follows the convention of OpenAI-compatible clients: it is the API's versioned root
 * (`https://api.mistral.ai/v1`, `https://gateway.example.com/openai/v1`), and the list is `{base_url}/models`.
 * A base URL whose path does not end in a version segment (`https://llm.example.com`) gets `/v1` added:
 * `{base_url}/v1/models`. Only GET: discovery never writes to the vendor.
 */

const KEY = 'model_vendor_b';
/** The vendor's public API (an OpenAI-compatible root). */
export const MODEL_VENDOR_B_DEFAULT_BASE_URL = 'https://api.mistral.ai/v1';

const modelListSchema = z.looseObject({
  object: z.literal('list').optional(),
  data: z.array(z.looseObject({ id: z.string().min(1).max(200) })),
});

function validateConfig(config: Record<string, unknown>): string[] {
  return httpsUrlProblems(config, 'base_url');
}

async function discover(ctx: DiscoverContext) {
  const secret = requireSecret(ctx);
  const result = emptyResult(KEY, 'live');
  const url = `${versionedRoot(setting(ctx.config, 'base_url', MODEL_VENDOR_B_DEFAULT_BASE_URL))}/models`;
  const { data } = await getJson(ctx.http, url, { authorization: `Bearer ${secret}` }, modelListSchema);
  result.models.push(...data.data.map((m) => vendorModel(KEY, m.id)));
  return withoutSecret(result, secret);
}

/** `model_vendor_b`, live: the models list of an OpenAI-compatible API at an HTTPS `base_url`. */
export const modelVendorBAdapter: Adapter = {
  key: KEY,
  kind: 'model_vendor_b',
  mode: 'live',
  description:
    'The models available to the account, from an OpenAI-compatible API (GET {base_url}/models). ' +
    'base_url must be HTTPS; it defaults to the vendor\'s public API.',
  configKeys: ['base_url'],
  status: 'Preview',
  needsSecret: true,
  validateConfig,
  discover,
};
