import { z } from 'zod';
import { TOOL_KEY } from '../../inventory/index.js';
import { ENVIRONMENT } from '../../shared/index.js';
import { ConnectorError, emptyResult, type Adapter, type DiscoveredAgent, type DiscoverContext } from './contract.js';
import {
  expectSuccess,
  httpsUrlProblems,
  joinUrl,
  mapLimit,
  parseAnswer,
  problemOf,
  requireSecret,
  sameOrigin,
  send,
  setting,
  textProblems,
  withoutSecret,
} from './live-support.js';

/**
 * The live `code_host` adapter (behaviour.md, "Connector kinds" and "Agent manifest (code_host kind)"): the
 * agent manifests `<manifest_dir>/agent.json` in up to 100 repositories of an organisation. It speaks the
 * GitHub REST API (version 2022-11-28), with `Authorization: Bearer <token>`,
 * `Accept: application/vnd.github+json` and `X-GitHub-Api-Version: 2022-11-28`:
 *
 * - `GET {api}/orgs/{org}/repos?per_page=100&page=1`, following `Link: <…>; rel="next"` (on the API's own
 *   origin only) while fewer than 100 repositories were read;
 * - for each repository `GET {api}/repos/{owner}/{repo}/contents/{manifest_dir}/agent.json`: 404 is a
 *   repository without a manifest (skipped quietly); 200 is `{type: 'file', encoding: 'base64', content}`.
 *
 * A manifest that is not valid is a warning naming the repository and the problem, and is skipped. The
 * manifest's `tools` are granted when those tools exist in the inventory (reconciliation's business).
 * Only GETs: discovery never writes to the code host.
 */

const KEY = 'code_host';
export const CODE_HOST_DEFAULT_API_BASE_URL = 'https://api.github.com';
export const CODE_HOST_DEFAULT_MANIFEST_DIR = '.tollgate';
/** The spec's bound: manifests in up to 100 repositories. */
export const CODE_HOST_REPOSITORIES_MAX = 100;
/** Pages of the repository list followed at most (a host that pages by 1 cannot make this endless). */
const PAGES_MAX = 10;
/** Manifest reads in flight at once. */
const READS_IN_FLIGHT = 6;
/** A manifest is a small document. */
const MANIFEST_MAX_BYTES = 64 * 1024;

/** An organisation's login (the host's rule: letters, digits and single hyphens, at most 39). */
const ORGANISATION = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
/** A relative folder: segments of letters, digits, `.`, `_`, `-`, never `.` or `..` alone. */
const MANIFEST_DIR = /^(?!.*(?:^|\/)\.{1,2}(?:\/|$))[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/;

/** The agent manifest, as the spec lists its fields; other fields are ignored. */
export const agentManifestSchema = z.object({
  name: z.string().trim().min(1).max(200),
  description: z.string().max(4000).default(''),
  purpose: z.string().max(2000).default(''),
  framework: z.string().trim().min(1).max(64).default('custom'),
  environment: z.enum(ENVIRONMENT),
  owner: z.object({ name: z.string().trim().min(1).max(200), email: z.email().max(320) }).optional(),
  tools: z.array(z.string().min(1).max(200).regex(TOOL_KEY, 'a tool key (letters, digits and . _ : -)')).max(500).default([]),
});
export type AgentManifest = z.output<typeof agentManifestSchema>;

const repositorySchema = z.looseObject({
  name: z.string().min(1).max(100),
  full_name: z.string().min(3).max(200),
  owner: z.looseObject({ login: z.string().min(1).max(100) }),
});
const repositoryListSchema = z.array(repositorySchema);
type Repository = z.output<typeof repositorySchema>;

const contentSchema = z.looseObject({
  type: z.string(),
  encoding: z.string().nullish(),
  content: z.string().nullish(),
});

function validateConfig(config: Record<string, unknown>): string[] {
  return [
    ...textProblems(config, 'organisation', { required: true, max: 39, pattern: ORGANISATION, shape: "an organisation's login (letters, digits, hyphens)" }),
    ...textProblems(config, 'manifest_dir', { required: false, max: 200, pattern: MANIFEST_DIR, shape: 'a relative folder such as .tollgate' }),
    ...httpsUrlProblems(config, 'api_base_url'),
  ];
}

/** A manifest as a discovered agent of the repository `fullName`. */
export function manifestToAgent(m: AgentManifest, fullName: string): DiscoveredAgent {
  return {
    external_ref: `${KEY}:${fullName}`,
    name: m.name,
    description: m.description,
    purpose: m.purpose,
    framework: m.framework,
    environment: m.environment,
    model: null,
    owner_name: m.owner?.name ?? null,
    owner_email: m.owner?.email ?? null,
    data_classification: null,
    internet_exposure: null,
    code_execution: null,
    persistent_memory: null,
    human_approval_coverage: null,
    business_unit: null,
    identities: [],
    tool_grants: [...new Set(m.tools)],
    resource_grants: [],
    delegations: [],
  };
}

/** The `rel="next"` URL of a Link header (`<url>; rel="next", <url>; rel="last"`), if any. */
export function nextLink(header: string | undefined): string | null {
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    const rel = match ? /;\s*rel\s*=\s*"?([^";]*)"?/i.exec(match[2]!) : null;
    if (match && rel && rel[1]!.trim().toLowerCase().split(/\s+/).includes('next')) return match[1]!;
  }
  return null;
}

/** Refuses a spent rate limit as one failure rather than a hundred skipped repositories. */
function checkRateLimit(answer: { status: number; headers: Record<string, string> }): void {
  if ((answer.status === 403 || answer.status === 429) && answer.headers['x-ratelimit-remaining'] === '0') {
    throw new ConnectorError(`The code host's rate limit for this credential is spent (${answer.status}); run again later.`);
  }
}

/** Up to 100 repositories of the organisation, and whether there were more. */
async function listRepositories(ctx: DiscoverContext, api: string, org: string, headers: Record<string, string>) {
  const repositories: Repository[] = [];
  let url: string | null = joinUrl(api, `orgs/${encodeURIComponent(org)}/repos`) + '?per_page=100&page=1';
  const warnings: string[] = [];
  for (let page = 0; url && repositories.length < CODE_HOST_REPOSITORIES_MAX; page++) {
    if (page === PAGES_MAX) {
      warnings.push(`the repository list of ${org} is paged too finely: only the first ${PAGES_MAX} pages were read`);
      break;
    }
    const answer = await send(ctx.http, url, { headers });
    checkRateLimit(answer);
    if (answer.status === 404) throw new ConnectorError(`The code host has no organisation ${org} visible to this credential (404).`);
    expectSuccess(answer, url);
    repositories.push(...parseAnswer(repositoryListSchema, answer.body, url));
    const next = nextLink(answer.headers['link']);
    if (next && !sameOrigin(next, api)) {
      warnings.push(`the code host's next page of repositories is on another origin than ${new URL(api).host}; not followed`);
      break;
    }
    url = next;
  }
  if (repositories.length > CODE_HOST_REPOSITORIES_MAX || (url && repositories.length >= CODE_HOST_REPOSITORIES_MAX)) {
    warnings.push(`${org} has more than ${CODE_HOST_REPOSITORIES_MAX} repositories: only the first ${CODE_HOST_REPOSITORIES_MAX} were read`);
  }
  return { repositories: repositories.slice(0, CODE_HOST_REPOSITORIES_MAX), warnings };
}

type ManifestRead = { agent: DiscoveredAgent } | { warning: string } | null;

/** One repository's manifest: an agent, a warning about it, or null when it has none. */
async function readManifest(ctx: DiscoverContext, api: string, dir: string, repo: Repository, headers: Record<string, string>): Promise<ManifestRead> {
  const path = [...dir.split('/'), 'agent.json'].map(encodeURIComponent).join('/');
  const url = joinUrl(api, `repos/${encodeURIComponent(repo.owner.login)}/${encodeURIComponent(repo.name)}/contents/${path}`);
  const file = `${dir}/agent.json`;
  const answer = await send(ctx.http, url, { headers });
  checkRateLimit(answer);
  if (answer.status === 404) return null;
  if (answer.status === 401) expectSuccess(answer, url);
  if (answer.status !== 200) return { warning: `repository ${repo.full_name}: reading ${file} answered ${answer.status}; skipped` };
  const content = parseAnswer(contentSchema, answer.body, url);
  if (content.type !== 'file') return { warning: `repository ${repo.full_name}: ${file} is a ${content.type}, not a file; skipped` };
  if (content.encoding !== 'base64' || typeof content.content !== 'string') {
    return { warning: `repository ${repo.full_name}: ${file} is not delivered inline (encoding ${content.encoding ?? 'none'}); skipped` };
  }
  const bytes = Buffer.from(content.content, 'base64');
  if (bytes.length > MANIFEST_MAX_BYTES) return { warning: `repository ${repo.full_name}: ${file} is larger than ${MANIFEST_MAX_BYTES / 1024} KB; skipped` };
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    return { warning: `repository ${repo.full_name}: ${file} is not JSON; skipped` };
  }
  const manifest = agentManifestSchema.safeParse(doc);
  if (!manifest.success) return { warning: `repository ${repo.full_name}: ${file} is not a valid agent manifest (${problemOf(manifest.error)}); skipped` };
  return { agent: manifestToAgent(manifest.data, repo.full_name) };
}

async function discover(ctx: DiscoverContext) {
  const secret = requireSecret(ctx);
  const result = emptyResult(KEY, 'live');
  const api = setting(ctx.config, 'api_base_url', CODE_HOST_DEFAULT_API_BASE_URL).replace(/\/+$/, '');
  const org = setting(ctx.config, 'organisation', '');
  const dir = setting(ctx.config, 'manifest_dir', CODE_HOST_DEFAULT_MANIFEST_DIR).replace(/^\/+|\/+$/g, '');
  const headers = { authorization: `Bearer ${secret}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' };

  const { repositories, warnings } = await listRepositories(ctx, api, org, headers);
  result.warnings.push(...warnings);
  const reads = await mapLimit(repositories, READS_IN_FLIGHT, (repo) => readManifest(ctx, api, dir, repo, headers));
  for (const read of reads) {
    if (read && 'agent' in read) result.agents.push(read.agent);
    else if (read) result.warnings.push(read.warning);
  }
  return withoutSecret(result, secret);
}

/** `code_host`, live: agent manifests in up to 100 repositories of an organisation on a GitHub-style host. */
export const codeHostAdapter: Adapter = {
  key: KEY,
  kind: 'code_host',
  mode: 'live',
  description:
    'Agent manifests (<manifest_dir>/agent.json, default .tollgate) in up to 100 repositories of an organisation, through the code host\'s GitHub-style REST API. ' +
    'Listed tool keys become the agent\'s permissions when those tools exist. api_base_url (HTTPS) defaults to the public host.',
  configKeys: ['organisation', 'manifest_dir', 'api_base_url'],
  status: 'Preview',
  needsSecret: true,
  validateConfig,
  discover,
};
