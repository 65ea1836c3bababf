import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../api/config.js';
import { createLogger } from '../../api/platform/logger.js';
import { ConnectorError } from '../../api/modules/integrations/adapters/contract.js';
import { mockSecret, resolveSecret, vaultLocation } from '../../api/modules/integrations/adapters/credentials.js';
import { startStandin, type Standin } from '../support/standin.js';

/**
 * Resolving credential references at run time (issue 15, "Adapters"): env, mock, and HashiCorp Vault KV v2
 * against a stand-in that speaks Vault's wire format and checks the token. No secret value ever appears in
 * an error message.
 */

const TOKEN = 'hvs.test-vault-token-0123456789';
const SECRETS: Record<string, Record<string, unknown>> = {
  'secret/payments/openai': { value: 'sk-vault-secret-value-1', api_key: 'sk-vault-field-value-2' },
  'kv/team a/vendor': { value: 'sk-vault-secret-value-3' },
  'secret/empty': { value: '' },
};

let vault: Standin;
let config: Pick<Config, 'vault' | 'outbound'>;

/** A KV v2 read: GET /v1/{mount}/data/{path}, X-Vault-Token, `{data: {data, metadata}}`. */
beforeAll(async () => {
  vault = await startStandin({
    handler: async (req, res) => {
      const json = (status: number, doc: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
      const match = /^\/v1\/([^/]+)\/data\/(.+)$/.exec(req.url ?? '');
      if (req.method !== 'GET' || !match) return json(404, { errors: [] });
      if (req.headers['x-vault-token'] !== TOKEN) return json(403, { errors: ['permission denied'] });
      const key = `${decodeURIComponent(match[1]!)}/${match[2]!.split('/').map(decodeURIComponent).join('/')}`;
      if (key === 'secret/broken') return json(500, { errors: ['internal error; the token was hvs.test-vault-token-0123456789'] });
      if (key === 'secret/huge') return json(200, { data: { data: { value: 'x'.repeat(2 * 1024 * 1024) } } });
      if (key === 'secret/slow') return; // never answers
      if (key === 'secret/redirect') return void res.writeHead(307, { location: '/v1/secret/data/payments/openai' }).end();
      const data = SECRETS[key];
      if (!data) return json(404, { errors: [] });
      json(200, { request_id: 'a1b2', lease_id: '', renewable: false, data: { data, metadata: { version: 3, destroyed: false } } });
    },
  });
  config = loadConfig({ VAULT_ADDR: `${vault.url}/`, VAULT_TOKEN: TOKEN });
});

afterAll(async () => {
  await vault.close();
});

/** The ConnectorError a resolution fails with; its message must not carry any secret of this file. */
async function failure(promise: Promise<string>): Promise<string> {
  const e = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ConnectorError);
  const message = (e as ConnectorError).message;
  for (const secret of [TOKEN, 'sk-vault-secret-value', 'sk-vault-field-value', 'sk-env-secret', 'wrong-token-value']) expect(message).not.toContain(secret);
  return message;
}

describe('vault (KV v2)', () => {
  it('reads the field `value` of mount/path with the configured token', async () => {
    expect(await resolveSecret({ provider: 'vault', secret_path: 'secret/payments/openai' }, config)).toBe('sk-vault-secret-value-1');
    const last = vault.requests.at(-1)!;
    expect(last).toMatchObject({ method: 'GET', path: '/v1/secret/data/payments/openai' });
    expect(last.headers['x-vault-token']).toBe(TOKEN);
  });

  it('reads a named field, and encodes each path segment', async () => {
    expect(await resolveSecret({ provider: 'vault', secret_path: 'secret/payments/openai#api_key' }, config)).toBe('sk-vault-field-value-2');
    expect(await resolveSecret({ provider: 'vault', secret_path: 'kv/team a/vendor' }, config)).toBe('sk-vault-secret-value-3');
    expect(vault.requests.at(-1)!.path).toBe('/v1/kv/data/team%20a/vendor');
  });

  it('a wrong token: Vault answers 403, the message says so and carries neither token', async () => {
    const wrong = { ...config, vault: { addr: config.vault.addr, token: 'wrong-token-value' } };
    const message = await failure(resolveSecret({ provider: 'vault', secret_path: 'secret/payments/openai' }, wrong));
    expect(message).toBe("Vault refused to read vault:secret/payments/openai (403): check VAULT_TOKEN's policy.");
  });

  it.each([
    ['secret/missing', 'Vault has no secret vault:secret/missing (404).'],
    ['secret/broken', 'Vault answered 500 reading vault:secret/broken.'],
    ['secret/redirect', 'Vault answered 307 reading vault:secret/redirect.'],
    ['secret/payments/openai#nope', "Vault's secret vault:secret/payments/openai has no text field nope."],
    ['secret/empty', "Vault's secret vault:secret/empty has no text field value."],
    ['secret/huge', "Vault's answer for vault:secret/huge is larger than 1048576 bytes."],
    ['secret', 'Credential reference vault:secret is not of the form mount/path or mount/path#field.'],
    ['secret/a/../b', 'Credential reference vault:secret/a/../b is not of the form mount/path or mount/path#field.'],
  ])('%s fails: %s', async (secret_path, expected) => {
    expect(await failure(resolveSecret({ provider: 'vault', secret_path }, config))).toBe(expected);
  });

  it('times out on a Vault that never answers', async () => {
    const message = await failure(resolveSecret({ provider: 'vault', secret_path: 'secret/slow' }, config, { timeoutMs: 300 }));
    expect(message).toBe('Vault did not answer within 0.3 s reading vault:secret/slow.');
  });

  it('needs VAULT_ADDR and VAULT_TOKEN', async () => {
    const message = await failure(resolveSecret({ provider: 'vault', secret_path: 'secret/payments/openai' }, loadConfig({})));
    expect(message).toBe('Vault credentials need VAULT_ADDR and VAULT_TOKEN to be configured.');
  });

  it('an unreachable Vault', async () => {
    const closed = await startStandin({ handler: (_req, res) => void res.end() });
    await closed.close();
    const unreachable = loadConfig({ VAULT_ADDR: closed.url, VAULT_TOKEN: TOKEN });
    expect(await failure(resolveSecret({ provider: 'vault', secret_path: 'secret/x' }, unreachable))).toBe(
      'Could not reach Vault reading vault:secret/x (ECONNREFUSED).',
    );
  });

  it('the logger redacts VAULT_TOKEN wherever the settings are logged', () => {
    const out = new PassThrough();
    let written = '';
    out.on('data', (chunk: Buffer) => (written += chunk.toString('utf8')));
    const log = createLogger('info', out);
    log.info({ vault: config.vault }, 'vault settings');
    log.info({ config: { vault: config.vault } }, 'settings');
    expect(written).toContain(config.vault.addr);
    expect(written).not.toContain(TOKEN);
  });

  it('splits secret paths', () => {
    expect(vaultLocation('secret/a/b#f')).toEqual({ mount: 'secret', path: 'a/b', field: 'f' });
    expect(vaultLocation('/secret/a/')).toEqual({ mount: 'secret', path: 'a', field: 'value' });
  });
});

describe('env', () => {
  const env = { VENDOR_API_KEY: 'sk-env-secret-1', BLANK: '  ' };

  it('reads the variable the path names', async () => {
    expect(await resolveSecret({ provider: 'env', secret_path: 'VENDOR_API_KEY' }, config, { env })).toBe('sk-env-secret-1');
  });

  it.each([
    ['MISSING_KEY', 'The credential env:MISSING_KEY is not set (environment variable MISSING_KEY).'],
    ['BLANK', 'The credential env:BLANK is not set (environment variable BLANK).'],
    ['NOT-A-NAME', 'Credential reference env:NOT-A-NAME does not name an environment variable.'],
    ['TOKEN_SIGNING_SEED', "Credential reference env:TOKEN_SIGNING_SEED names one of Tollgate's own settings, which connectors may not use."],
    ['VAULT_TOKEN', "Credential reference env:VAULT_TOKEN names one of Tollgate's own settings, which connectors may not use."],
  ])('%s fails', async (secret_path, expected) => {
    const own = { ...env, TOKEN_SIGNING_SEED: 'sk-env-secret-seed', VAULT_TOKEN: TOKEN };
    expect(await failure(resolveSecret({ provider: 'env', secret_path }, config, { env: own }))).toBe(expected);
  });

  it('reads the process environment by default', async () => {
    process.env.TOLLGATE_TEST_CREDENTIAL = 'sk-env-secret-process';
    try {
      expect(await resolveSecret({ provider: 'env', secret_path: 'TOLLGATE_TEST_CREDENTIAL' }, config)).toBe('sk-env-secret-process');
    } finally {
      delete process.env.TOLLGATE_TEST_CREDENTIAL;
    }
  });
});

describe('mock and unsupported providers', () => {
  it('mock answers a fixed fictional value per path', async () => {
    const a = await resolveSecret({ provider: 'mock', secret_path: 'demo/vendor-a' }, config);
    expect(a).toBe(mockSecret('demo/vendor-a'));
    expect(a).toMatch(/^mock-secret-[0-9a-f]{24}$/);
    expect(await resolveSecret({ provider: 'mock', secret_path: 'demo/vendor-a' }, config)).toBe(a);
    expect(await resolveSecret({ provider: 'mock', secret_path: 'demo/vendor-b' }, config)).not.toBe(a);
  });

  it.each(['cloud_a_secrets_manager', 'cloud_b_key_vault', 'cloud_c_secret_manager'])('%s is not supported in this version', async (provider) => {
    expect(await failure(resolveSecret({ provider, secret_path: 'x/y' }, config))).toBe(`Credential provider ${provider} is not supported in this version.`);
  });
});
