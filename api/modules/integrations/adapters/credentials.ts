import { createHash } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import { ENV_VARS, type Config } from '../../../config.js';
import { withSystemCas } from '../../../platform/outbound.js';
import { ConnectorError } from './contract.js';

/**
 * Credential resolution (behaviour.md, "Credentials"): an integration stores a reference (provider and
 * path), never a secret; a live run resolves the reference at the moment it needs it and hands the value
 * to its adapter, which sends it only to the provider's endpoint. The value is never stored, logged or
 * returned, and no error here carries it: messages name the reference (provider, path, variable) and at
 * most a status code.
 */

/** A credential reference as the registry keeps it. */
export interface CredentialRef {
  provider: string;
  secret_path: string;
}

/** What resolving needs: the Vault settings and the process environment (injectable for tests). */
export interface ResolveOptions {
  env?: Record<string, string | undefined>;
  /** Vault's time limit for one read (default 10 s). */
  timeoutMs?: number;
}

/** Vault answers with small JSON documents: anything past this is not a KV v2 secret. */
const VAULT_MAX_BYTES = 1024 * 1024;
const VAULT_TIMEOUT_MS = 10_000;

/**
 * Tollgate's own settings, which an `env` reference must not name: whoever may create an integration
 * could otherwise have a connector send the token-signing seed or the database password to an endpoint
 * of their choosing.
 */
const OWN_SETTINGS = new Set([...ENV_VARS, 'PGPASSWORD']);

/**
 * The secret a reference names, read now. Providers: `env` (a process environment variable named by
 * `secret_path`), `mock` (a fixed fictional value, for mock and demo integrations), `vault` (HashiCorp
 * Vault KV v2 at VAULT_ADDR with VAULT_TOKEN; `secret_path` is `mount/path` or `mount/path#field`, field
 * `value` by default). The cloud secret managers are not supported in this version. Every expected
 * failure is a ConnectorError (the run fails with its message).
 */
export async function resolveSecret(
  ref: CredentialRef,
  config: Pick<Config, 'vault' | 'outbound'>,
  options: ResolveOptions = {},
): Promise<string> {
  switch (ref.provider) {
    case 'env':
      return envSecret(ref.secret_path, options.env ?? process.env);
    case 'mock':
      return mockSecret(ref.secret_path);
    case 'vault':
      return vaultSecret(ref.secret_path, config, options.timeoutMs ?? VAULT_TIMEOUT_MS);
    default:
      throw new ConnectorError(`Credential provider ${ref.provider} is not supported in this version.`);
  }
}

function envSecret(name: string, env: Record<string, string | undefined>): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ConnectorError(`Credential reference env:${name} does not name an environment variable.`);
  if (OWN_SETTINGS.has(name)) throw new ConnectorError(`Credential reference env:${name} names one of Tollgate's own settings, which connectors may not use.`);
  const value = env[name];
  if (value === undefined || value.trim() === '') throw new ConnectorError(`The credential env:${name} is not set (environment variable ${name}).`);
  return value;
}

/**
 * A fictional secret for `mock` references: the same for the same path, useless anywhere (mock adapters
 * ignore it; a live adapter sending it to a provider gets a 401).
 */
export function mockSecret(path: string): string {
  return `mock-secret-${createHash('sha256').update(path).digest('hex').slice(0, 24)}`;
}

/** `mount/path#field` split into its parts (field `value` unless named). */
export function vaultLocation(secretPath: string): { mount: string; path: string; field: string } {
  const [location = '', field = 'value', extra] = secretPath.split('#');
  const [mount = '', ...rest] = location.replace(/^\/+|\/+$/g, '').split('/');
  const path = rest.join('/');
  if (extra !== undefined || !mount || !path || !field || rest.some((s) => s === '' || s === '.' || s === '..'))
    throw new ConnectorError(`Credential reference vault:${secretPath} is not of the form mount/path or mount/path#field.`);
  return { mount, path, field };
}

/**
 * Reads one field of a KV v2 secret: `GET {VAULT_ADDR}/v1/{mount}/data/{path}` with `X-Vault-Token`.
 * Vault is infrastructure the operator configured (often on a private address), so this does not pass
 * the connectors' SSRF guard; it is bounded in time and size, follows no redirect, and trusts the system's
 * CAs plus OUTBOUND_CA_FILE's.
 */
async function vaultSecret(secretPath: string, config: Pick<Config, 'vault' | 'outbound'>, timeoutMs: number): Promise<string> {
  const { mount, path, field } = vaultLocation(secretPath);
  const { addr, token } = config.vault;
  if (!addr || !token) throw new ConnectorError('Vault credentials need VAULT_ADDR and VAULT_TOKEN to be configured.');
  const where = `vault:${mount}/${path}`;
  const url = `${addr}/v1/${encodeURIComponent(mount)}/data/${path.split('/').map(encodeURIComponent).join('/')}`;
  const answer = await vaultGet(url, token, config.outbound.ca, timeoutMs, where);
  if (answer.status === 403) throw new ConnectorError(`Vault refused to read ${where} (403): check VAULT_TOKEN's policy.`);
  if (answer.status === 404) throw new ConnectorError(`Vault has no secret ${where} (404).`);
  if (answer.status !== 200) throw new ConnectorError(`Vault answered ${answer.status} reading ${where}.`);
  const value = fieldOf(answer.body, field);
  if (value === undefined) throw new ConnectorError(`Vault's secret ${where} has no text field ${field}.`);
  return value;
}

/** The field of a KV v2 answer (`{data: {data: {...}}}`), when it is a non-empty string. */
function fieldOf(body: string, field: string): string | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    return undefined;
  }
  const data = (doc as { data?: { data?: Record<string, unknown> } } | null)?.data?.data;
  const value = data && typeof data === 'object' ? data[field] : undefined;
  return typeof value === 'string' && value !== '' ? value : undefined;
}

async function vaultGet(url: string, token: string, ca: string | undefined, timeoutMs: number, where: string): Promise<{ status: number; body: string }> {
  const dispatcher: Dispatcher | undefined = ca ? new Agent({ connect: { ca: withSystemCas(ca), timeout: timeoutMs } }) : undefined;
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const answer = await request(url, { method: 'GET', headers: { 'x-vault-token': token }, signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, ...(dispatcher ? { dispatcher } : {}) });
    let bytes = 0;
    const chunks: Buffer[] = [];
    for await (const chunk of answer.body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > VAULT_MAX_BYTES) {
        answer.body.destroy();
        throw new ConnectorError(`Vault's answer for ${where} is larger than ${VAULT_MAX_BYTES} bytes.`);
      }
      chunks.push(chunk);
    }
    return { status: answer.statusCode, body: Buffer.concat(chunks).toString('utf8') };
  } catch (err) {
    if (err instanceof ConnectorError) throw err;
    if (signal.aborted) throw new ConnectorError(`Vault did not answer within ${timeoutMs / 1000} s reading ${where}.`);
    const code = (err as { code?: unknown }).code;
    throw new ConnectorError(`Could not reach Vault reading ${where}${typeof code === 'string' ? ` (${code})` : ''}.`);
  } finally {
    await dispatcher?.close();
  }
}
