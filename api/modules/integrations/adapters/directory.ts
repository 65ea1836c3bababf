import { z } from 'zod';
import { ENVIRONMENT } from '../../shared/index.js';
import { ConnectorError, emptyResult, type Adapter, type DiscoveredAgent, type DiscoverContext } from './contract.js';
import {
  expectSuccess,
  getJson,
  httpsUrlProblems,
  joinUrl,
  oneOfProblems,
  parseAnswer,
  plausibleEmail,
  requireSecret,
  sameOrigin,
  send,
  setting,
  textProblems,
  whereOf,
  withoutSecret,
} from './live-support.js';

/**
 * The live `directory` adapter (behaviour.md, "Connector kinds": service principals carrying a tag, default
 * `svc-agent`). It speaks Microsoft Graph with the Microsoft identity platform:
 *
 * 1. An app-only token by the OAuth 2.0 client-credentials grant:
 *    `POST {login_base_url}/{directory_tenant_id}/oauth2/v2.0/token`, form `client_id`, `client_secret`
 *    (the secret), `scope={graph_base_url}/.default`, `grant_type=client_credentials`, answering
 *    `{token_type: 'Bearer', expires_in, access_token}`. The secret goes to this endpoint and nowhere else.
 * 2. `GET {graph_base_url}/v1.0/servicePrincipals?$filter=tags/any(t:t eq '<tag>')&$select=…&$top=100` with
 *    the access token and `ConsistencyLevel: eventual`, answering `{value: [servicePrincipal], '@odata.nextLink'}`;
 *    next pages are followed only on the Graph base URL's own origin, so the token never leaves for another host.
 *
 * Each service principal becomes an agent with the service-principal identity (subject its `appId`, issuer
 * the tenant's v2.0 issuer). Tags of the form `env:<environment>` and `owner:<email>` on the principal are
 * read when present; otherwise the environment is the configuration's `environment` (default `development`).
 * Discovery never writes to the directory.
 */

const KEY = 'directory';
export const DIRECTORY_DEFAULT_LOGIN_BASE_URL = 'https://login.microsoftonline.com';
export const DIRECTORY_DEFAULT_GRAPH_BASE_URL = 'https://graph.microsoft.com';
export const DIRECTORY_DEFAULT_AGENT_TAG = 'svc-agent';
/** 50 pages of 100 principals: more is reported, not read. */
const PAGES_MAX = 50;

/** A tenant: its id (a GUID) or one of its domain names. */
const TENANT = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;
/** An application (client) id: a GUID, or an identifier URI's plain form. */
const CLIENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const tokenSchema = z.looseObject({
  token_type: z.string().regex(/^bearer$/i, 'expected Bearer'),
  expires_in: z.union([z.number(), z.string()]).optional(),
  access_token: z.string().min(1).max(16_384),
});

const tokenErrorSchema = z.looseObject({ error: z.string().regex(/^[a-z_]{1,64}$/) });

const principalSchema = z.looseObject({
  id: z.string().min(1).max(200),
  appId: z.string().min(1).max(200),
  displayName: z.string().max(512).nullish(),
  description: z.string().max(4000).nullish(),
  tags: z.array(z.string().max(512)).max(500).nullish(),
  notes: z.string().max(4000).nullish(),
});

const pageSchema = z.looseObject({
  value: z.array(principalSchema),
  '@odata.nextLink': z.string().max(8192).nullish(),
});

type Principal = z.output<typeof principalSchema>;

function validateConfig(config: Record<string, unknown>): string[] {
  return [
    ...textProblems(config, 'directory_tenant_id', { required: true, max: 253, pattern: TENANT, shape: 'a tenant id (GUID) or domain name' }),
    ...textProblems(config, 'client_id', { required: true, max: 128, pattern: CLIENT_ID, shape: 'an application (client) id' }),
    ...textProblems(config, 'agent_tag', { required: false, max: 256, pattern: /^[^\u0000-\u001f\u007f]+$/, shape: 'text without control characters' }),
    ...oneOfProblems(config, 'environment', ENVIRONMENT),
    ...httpsUrlProblems(config, 'login_base_url'),
    ...httpsUrlProblems(config, 'graph_base_url'),
  ];
}

/** The OData filter for principals carrying `tag` (a single quote in the value is doubled, as OData escapes it). */
export function tagFilter(tag: string): string {
  return `tags/any(t:t eq '${tag.replace(/'/g, "''")}')`;
}

/** The value of the first tag `<prefix>:<value>` (prefix compared without case). */
function tagValue(tags: readonly string[], ...prefixes: string[]): string | null {
  for (const tag of tags) {
    const colon = tag.indexOf(':');
    if (colon > 0 && prefixes.includes(tag.slice(0, colon).toLowerCase())) return tag.slice(colon + 1).trim() || null;
  }
  return null;
}

/** A service principal as a discovered agent with its service-principal identity. */
export function principalToAgent(p: Principal, issuer: string, fallbackEnvironment: DiscoveredAgent['environment']): DiscoveredAgent {
  const tags = p.tags ?? [];
  const env = tagValue(tags, 'env', 'environment')?.toLowerCase() ?? null;
  return {
    external_ref: `${KEY}:${p.id}`,
    name: p.displayName?.trim() || p.appId,
    description: p.description ?? '',
    purpose: p.notes ?? '',
    framework: 'custom',
    environment: (ENVIRONMENT as readonly string[]).includes(env ?? '') ? (env as DiscoveredAgent['environment']) : fallbackEnvironment,
    model: null,
    owner_name: null,
    owner_email: plausibleEmail(tagValue(tags, 'owner')),
    data_classification: null,
    internet_exposure: null,
    code_execution: null,
    persistent_memory: null,
    human_approval_coverage: null,
    business_unit: null,
    identities: [{ identity_type: 'service_principal', subject: p.appId, issuer, authentication_strength: 'moderate' }],
    tool_grants: [],
    resource_grants: [],
    delegations: [],
  };
}

/** The app-only access token for Graph (client credentials); the directory's refusal names its error code, never the secret. */
async function accessToken(ctx: DiscoverContext, login: string, tenant: string, clientId: string, scope: string, secret: string): Promise<string> {
  const url = joinUrl(login, `${encodeURIComponent(tenant)}/oauth2/v2.0/token`);
  const body = new URLSearchParams({ client_id: clientId, client_secret: secret, scope, grant_type: 'client_credentials' }).toString();
  const answer = await send(ctx.http, url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body,
  });
  if (answer.status === 400 || answer.status === 401) {
    let code = '';
    try {
      const parsed = tokenErrorSchema.safeParse(JSON.parse(answer.body));
      if (parsed.success) code = ` ${parsed.data.error}`;
    } catch {
      // no error code to name
    }
    throw new ConnectorError(`The directory refused the client credentials (${answer.status}${code}) at ${whereOf(url, 'POST')}.`);
  }
  expectSuccess(answer, url, 'POST');
  return parseAnswer(tokenSchema, answer.body, url, 'POST').access_token;
}

async function discover(ctx: DiscoverContext) {
  const secret = requireSecret(ctx);
  const result = emptyResult(KEY, 'live');
  const login = setting(ctx.config, 'login_base_url', DIRECTORY_DEFAULT_LOGIN_BASE_URL).replace(/\/+$/, '');
  const graph = setting(ctx.config, 'graph_base_url', DIRECTORY_DEFAULT_GRAPH_BASE_URL).replace(/\/+$/, '');
  const tenant = setting(ctx.config, 'directory_tenant_id', '');
  const clientId = setting(ctx.config, 'client_id', '');
  const tag = setting(ctx.config, 'agent_tag', DIRECTORY_DEFAULT_AGENT_TAG);
  const environment = setting(ctx.config, 'environment', 'development') as DiscoveredAgent['environment'];
  const issuer = `${login}/${tenant}/v2.0`;

  const token = await accessToken(ctx, login, tenant, clientId, `${graph}/.default`, secret);
  const headers = { authorization: `Bearer ${token}`, consistencylevel: 'eventual' };
  const query = `$filter=${encodeURIComponent(tagFilter(tag))}&$select=id,appId,displayName,description,tags,notes&$top=100`;
  let url: string | null = `${joinUrl(graph, 'v1.0/servicePrincipals')}?${query}`;
  for (let page = 0; url; page++) {
    if (page === PAGES_MAX) {
      result.warnings.push(`more than ${PAGES_MAX * 100} service principals carry the tag ${tag}: only the first ${PAGES_MAX * 100} were read`);
      break;
    }
    const hint = 'The application needs permission to read service principals (Application.Read.All).';
    const { data }: { data: z.output<typeof pageSchema> } = await getJson(ctx.http, url, headers, pageSchema, hint);
    result.agents.push(...data.value.map((p) => principalToAgent(p, issuer, environment)));
    const next: string | null = data['@odata.nextLink'] ?? null;
    if (next && !sameOrigin(next, graph)) {
      result.warnings.push(`the directory's next page is on another origin than ${new URL(graph).host}; not followed`);
      break;
    }
    url = next;
  }
  return withoutSecret(result, secret);
}

/** `directory`, live: service principals carrying the agent tag, from a Graph-style directory. */
export const directoryAdapter: Adapter = {
  key: KEY,
  kind: 'directory',
  mode: 'live',
  description:
    'Service principals carrying a tag (agent_tag, default svc-agent) in a directory tenant, through its Graph-style API (a client-credentials token, ' +
    'then the service principals). Needs directory_tenant_id and client_id; the credential is the client secret. ' +
    'login_base_url and graph_base_url (HTTPS) default to the public cloud; environment (default development) applies where a principal has no env: tag.',
  configKeys: ['directory_tenant_id', 'client_id', 'agent_tag', 'environment', 'login_base_url', 'graph_base_url'],
  status: 'Preview',
  needsSecret: true,
  validateConfig,
  discover,
};
