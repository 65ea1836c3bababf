import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEV_EVIDENCE_SIGNING_SEED,
  DEV_SECRET_PEPPER,
  DEV_SESSION_SECRET,
  DEV_TOKEN_SIGNING_SEED,
  loadCheckedConfig,
  loadConfig,
  productionProblems,
} from '../../api/config.js';
import { PLANS } from '../../api/modules/tenants/index.js';
import { SAFE_PRODUCTION_ENV } from '../support/production-env.js';

type Env = Record<string, string | undefined>;

/** A production environment in which every condition of the spec's Operational contract is safe. */
const SAFE: Record<string, string> = {
  ...SAFE_PRODUCTION_ENV,
  DATABASE_URL: 'postgres://tollgate_app:runtime-pw@db.internal:5432/tollgate',
  CORS_ALLOWED_ORIGINS: 'https://portal.example.com,https://admin.example.com',
};

/** The refusal loadCheckedConfig throws for env; fails the test when the configuration is accepted. */
function refusal(env: Env): ConfigError {
  let caught: unknown;
  try {
    loadCheckedConfig(env);
  } catch (err) {
    caught = err;
  }
  expect(caught, 'the production guard accepted an unsafe configuration').toBeInstanceOf(ConfigError);
  return caught as ConfigError;
}

describe('production guard: the spec\'s Operational contract', () => {
  it('a fully safe production environment has no problems and starts', () => {
    expect(productionProblems(loadConfig(SAFE))).toEqual([]);
    const config = loadCheckedConfig(SAFE);
    expect(config.environment).toBe('production');
    expect(config.devLoginEnabled).toBe(false);
    expect(config.cookieSecure).toBe(true);
    expect(config.email.backend).toBe('smtp');
  });

  // One row per condition: what changes from the safe environment, and the variable the refusal must name.
  it.each<[string, Env, string]>([
    ['development sign-in is enabled', { DEV_LOGIN_ENABLED: 'true' }, 'DEV_LOGIN_ENABLED'],
    ['development sign-in is enabled (1)', { DEV_LOGIN_ENABLED: '1' }, 'DEV_LOGIN_ENABLED'],
    ['the signing seed keeps its development value', { TOKEN_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED }, 'TOKEN_SIGNING_SEED'],
    ['the signing seed is unset (development default)', { TOKEN_SIGNING_SEED: undefined }, 'TOKEN_SIGNING_SEED'],
    ['the evidence seed keeps its development value', { EVIDENCE_SIGNING_SEED: DEV_EVIDENCE_SIGNING_SEED }, 'EVIDENCE_SIGNING_SEED'],
    ['the evidence seed is unset (development default)', { EVIDENCE_SIGNING_SEED: undefined }, 'EVIDENCE_SIGNING_SEED'],
    ['the evidence seed equals the token seed', { EVIDENCE_SIGNING_SEED: SAFE.TOKEN_SIGNING_SEED! }, 'EVIDENCE_SIGNING_SEED'],
    [
      'a previous evidence seed is the development evidence seed',
      { EVIDENCE_SIGNING_PREVIOUS_SEEDS: `Pv8Tq3Lm6Wz1Kc4Rn, ${DEV_EVIDENCE_SIGNING_SEED}` },
      'EVIDENCE_SIGNING_PREVIOUS_SEEDS',
    ],
    [
      'a previous evidence seed is the development token seed (what development databases were signed with)',
      { EVIDENCE_SIGNING_PREVIOUS_SEEDS: DEV_TOKEN_SIGNING_SEED },
      'EVIDENCE_SIGNING_PREVIOUS_SEEDS',
    ],
    [
      'a previous evidence seed is the current token seed (whoever holds it could sign evidence)',
      { EVIDENCE_SIGNING_PREVIOUS_SEEDS: SAFE.TOKEN_SIGNING_SEED! },
      'EVIDENCE_SIGNING_PREVIOUS_SEEDS',
    ],
    ['private endpoints are allowed', { ALLOW_PRIVATE_ENDPOINTS: 'true' }, 'ALLOW_PRIVATE_ENDPOINTS'],
    ['connectors may reach a private CIDR', { OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32' }, 'OUTBOUND_ALLOWED_CIDRS'],
    ['the secret pepper keeps its development value', { SECRET_PEPPER: DEV_SECRET_PEPPER }, 'SECRET_PEPPER'],
    ['the secret pepper is unset (development default)', { SECRET_PEPPER: undefined }, 'SECRET_PEPPER'],
    ['the session secret keeps its development value', { SESSION_SECRET: DEV_SESSION_SECRET }, 'SESSION_SECRET'],
    ['the session secret is unset (development default)', { SESSION_SECRET: undefined }, 'SESSION_SECRET'],
    ['secure session cookies are off', { SESSION_COOKIE_SECURE: 'false' }, 'SESSION_COOKIE_SECURE'],
    ['CORS origins are *', { CORS_ALLOWED_ORIGINS: '*' }, 'CORS_ALLOWED_ORIGINS'],
    ['CORS origins contain * among others', { CORS_ALLOWED_ORIGINS: 'https://portal.example.com, *' }, 'CORS_ALLOWED_ORIGINS'],
    ['read-only fail-open without its acknowledgement', { READONLY_FAIL_OPEN: 'true' }, 'READONLY_FAIL_OPEN'],
    [
      'read-only fail-open with the acknowledgement false',
      { READONLY_FAIL_OPEN: 'true', READONLY_FAIL_OPEN_ACK: 'false' },
      'READONLY_FAIL_OPEN',
    ],
    ['the OIDC issuer is missing', { OIDC_ISSUER: undefined }, 'OIDC_ISSUER'],
    ['the OIDC issuer is blank', { OIDC_ISSUER: '  ' }, 'OIDC_ISSUER'],
    ['the OIDC client ID is missing', { OIDC_CLIENT_ID: undefined }, 'OIDC_CLIENT_ID'],
    ['the OIDC client secret is missing', { OIDC_CLIENT_SECRET: undefined }, 'OIDC_CLIENT_SECRET'],
    ['the OIDC redirect URI is missing', { OIDC_REDIRECT_URI: undefined }, 'OIDC_REDIRECT_URI'],
    ['SMTP without a host', { SMTP_HOST: undefined }, 'SMTP_HOST'],
    ['SMTP with a blank host', { SMTP_HOST: ' ' }, 'SMTP_HOST'],
    ['SMTP without a username', { SMTP_USERNAME: undefined }, 'SMTP_USERNAME'],
    ['SMTP without a password', { SMTP_PASSWORD: undefined }, 'SMTP_PASSWORD'],
    ['SMTP without STARTTLS', { SMTP_STARTTLS: 'false' }, 'SMTP_STARTTLS'],
    ['the in-memory email backend', { EMAIL_BACKEND: 'memory' }, 'EMAIL_BACKEND'],
    ['self-service sign-up without its client secret', { SIGNUP_ENABLED: 'true' }, 'SIGNUP_CLIENT_SECRET'],
    [
      'self-service sign-up with a non-SMTP email backend',
      { SIGNUP_ENABLED: 'true', SIGNUP_CLIENT_SECRET: 'signup-client-secret-91ac', EMAIL_BACKEND: 'none' },
      'SIGNUP_ENABLED',
    ],
    ['an auth-events secret of 31 characters', { AUTH_EVENTS_SECRET: 'a'.repeat(31) }, 'AUTH_EVENTS_SECRET'],
    ['an auth-events secret of 1 character', { AUTH_EVENTS_SECRET: 'a' }, 'AUTH_EVENTS_SECRET'],
    ['DATABASE_URL is missing (the embedded database)', { DATABASE_URL: undefined }, 'DATABASE_URL'],
  ])('refuses when %s, naming the variable', (_condition, change, variable) => {
    const env = { ...SAFE, ...change };
    const err = refusal(env);
    expect(err.message).toContain(variable);
    // Only the changed setting is unsafe, so the guard reports exactly one problem, and it is this one.
    expect(err.problems).toHaveLength(1);
    expect(err.problems[0]).toContain(variable);
    expect(productionProblems(loadConfig(env))).toHaveLength(1);
  });

  it.each<[string, Env]>([
    ['read-only fail-open with its acknowledgement', { READONLY_FAIL_OPEN: 'true', READONLY_FAIL_OPEN_ACK: 'true' }],
    ['an auth-events secret of exactly 32 characters', { AUTH_EVENTS_SECRET: 'a'.repeat(32) }],
    ['an auth-events secret longer than 32 characters', { AUTH_EVENTS_SECRET: 'b'.repeat(64) }],
    ['self-service sign-up with its client secret and SMTP', { SIGNUP_ENABLED: 'true', SIGNUP_CLIENT_SECRET: 'signup-client-secret-91ac' }],
    ['STARTTLS left at its default', { SMTP_STARTTLS: undefined }],
    ['no email at all (EMAIL_BACKEND=none)', { EMAIL_BACKEND: 'none', SMTP_HOST: undefined, SMTP_USERNAME: undefined, SMTP_PASSWORD: undefined }],
    ['no CORS origins', { CORS_ALLOWED_ORIGINS: undefined }],
    // The upgrade: evidence of earlier versions was signed with a key derived from the token seed then in use.
    ['the previous token seed among the previous evidence seeds', { EVIDENCE_SIGNING_PREVIOUS_SEEDS: 'Pv8Tq3Lm6Wz1Kc4Rn,Old7TokenSeed2Xw9Lq' }],
    ['private endpoints refused explicitly', { ALLOW_PRIVATE_ENDPOINTS: 'false' }],
    ['no outbound CIDRs (blank)', { OUTBOUND_ALLOWED_CIDRS: ' ' }],
    ['a Vault for credential references', { VAULT_ADDR: 'https://vault.internal:8200', VAULT_TOKEN: 'hvs.production-token' }],
  ])('accepts %s', (_name, change) => {
    const env = { ...SAFE, ...change };
    expect(productionProblems(loadConfig(env))).toEqual([]);
    expect(() => loadCheckedConfig(env)).not.toThrow();
  });

  it('names every unsafe setting at once', () => {
    const err = refusal({
      ENVIRONMENT: 'production',
      DEV_LOGIN_ENABLED: 'true',
      SESSION_COOKIE_SECURE: 'false',
      CORS_ALLOWED_ORIGINS: '*',
      EMAIL_BACKEND: 'memory',
    });
    for (const v of [
      'DEV_LOGIN_ENABLED',
      'TOKEN_SIGNING_SEED',
      'EVIDENCE_SIGNING_SEED',
      'SECRET_PEPPER',
      'SESSION_SECRET',
      'SESSION_COOKIE_SECURE',
      'CORS_ALLOWED_ORIGINS',
      'OIDC_ISSUER',
      'OIDC_CLIENT_ID',
      'OIDC_CLIENT_SECRET',
      'OIDC_REDIRECT_URI',
      'EMAIL_BACKEND',
      'DATABASE_URL',
    ]) {
      expect(err.message).toContain(v);
    }
  });

  it('does not echo secret values in the refusal', () => {
    const secrets = { AUTH_EVENTS_SECRET: 'short-auth-events-xyz', SMTP_PASSWORD: 'smtp-password-2b8e1d' };
    const err = refusal({ ...SAFE, ...secrets, SMTP_STARTTLS: 'false', OIDC_ISSUER: undefined });
    for (const value of [...Object.values(secrets), SAFE.OIDC_CLIENT_SECRET, SAFE.SESSION_SECRET, 'runtime-pw']) {
      expect(err.message).not.toContain(value);
    }
  });

  it.each<[string, string | undefined]>([
    ['unset (development)', undefined],
    ['development', 'development'],
    ['staging', 'staging'],
  ])('lets ENVIRONMENT=%s run with the same unsafe settings', (_name, environment) => {
    const unsafe: Env = {
      ENVIRONMENT: environment,
      DEV_LOGIN_ENABLED: 'true',
      TOKEN_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED,
      EVIDENCE_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED,
      EVIDENCE_SIGNING_PREVIOUS_SEEDS: DEV_EVIDENCE_SIGNING_SEED,
      ALLOW_PRIVATE_ENDPOINTS: 'true',
      OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32',
      SECRET_PEPPER: DEV_SECRET_PEPPER,
      SESSION_SECRET: DEV_SESSION_SECRET,
      SESSION_COOKIE_SECURE: 'false',
      CORS_ALLOWED_ORIGINS: '*',
      READONLY_FAIL_OPEN: 'true',
      EMAIL_BACKEND: 'memory',
      SIGNUP_ENABLED: 'true',
      AUTH_EVENTS_SECRET: 'short',
    };
    expect(productionProblems(loadConfig(unsafe))).toEqual([]);
    expect(() => loadCheckedConfig(unsafe)).not.toThrow();
    // SMTP incomplete and without STARTTLS is equally fine outside production.
    const smtp = { ...unsafe, EMAIL_BACKEND: 'smtp', SMTP_STARTTLS: 'false' };
    expect(productionProblems(loadConfig(smtp))).toEqual([]);
    // And so is an empty environment: the embedded database and the development secrets.
    expect(productionProblems(loadConfig(environment ? { ENVIRONMENT: environment } : {}))).toEqual([]);
  });
});

describe('configuration', () => {
  it('DEFAULT_PLAN takes exactly the plans of the tenants module, developer by default', () => {
    expect(loadConfig({}).defaultPlan).toBe('developer');
    for (const plan of PLANS) expect(loadConfig({ DEFAULT_PLAN: plan }).defaultPlan).toBe(plan);
    expect(() => loadConfig({ DEFAULT_PLAN: 'gold' })).toThrow(/DEFAULT_PLAN/);
  });

  it('HEAP_GROWTH_PERCENT takes 0 (V8 decides) to 1000, nothing else', () => {
    expect(loadConfig({ HEAP_GROWTH_PERCENT: '0' }).heapGrowthPercent).toBe(0);
    expect(loadConfig({ HEAP_GROWTH_PERCENT: '1000' }).heapGrowthPercent).toBe(1000);
    for (const bad of ['-1', '1001', '1.5', 'lots']) expect(() => loadConfig({ HEAP_GROWTH_PERCENT: bad })).toThrow(/HEAP_GROWTH_PERCENT/);
  });

  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.environment).toBe('development');
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.dataDir).toBe('./.data');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.seedDemo).toBe(false);
    expect(c.devLoginEnabled).toBe(true);
    expect(c.cookieSecure).toBe(false);
    expect(c.email.backend).toBe('memory');
    expect(c.runtimeRole).toBe('tollgate_app');
    expect(c.evidenceSigningSeed).toBe(DEV_EVIDENCE_SIGNING_SEED);
    // Development databases of earlier versions were signed with the development token seed's key.
    expect(c.evidencePreviousSeeds).toEqual([DEV_TOKEN_SIGNING_SEED]);
    expect(c.allowPrivateEndpoints).toBe(false);
    expect(c.outbound).toEqual({ allowedCidrs: [], caFile: undefined, ca: undefined });
    expect(c.vault).toEqual({ addr: undefined, token: undefined });
    expect(c.workerPort).toBe(8081);
    expect(c.heapGrowthPercent).toBe(100);
    expect(c.jobs).toEqual({ inProcess: true, concurrency: 2, pollIntervalSeconds: 2, timeoutSeconds: 300, maintenanceIntervalSeconds: 30 });
  });

  it('reads the outbound CIDRs (validated), the outbound CA file and the Vault settings', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-config-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
      writeFileSync(join(dir, 'not.pem'), 'hello');
      const c = loadConfig({
        OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32, 10.0.0.0/8,::1,fd00::/8',
        OUTBOUND_CA_FILE: join(dir, 'ca.pem'),
        VAULT_ADDR: 'http://127.0.0.1:8200/',
        VAULT_TOKEN: 'hvs.dev',
      });
      expect(c.outbound.allowedCidrs).toEqual(['127.0.0.1/32', '10.0.0.0/8', '::1', 'fd00::/8']);
      expect(c.outbound.ca).toContain('BEGIN CERTIFICATE');
      expect(c.vault).toEqual({ addr: 'http://127.0.0.1:8200', token: 'hvs.dev' });
      for (const bad of ['10.0.0.0/33', 'fd00::/129', 'example.com', '10.0.0.0/8/1', '10.0.0/8'])
        expect(() => loadConfig({ OUTBOUND_ALLOWED_CIDRS: bad })).toThrow(/OUTBOUND_ALLOWED_CIDRS/);
      expect(() => loadConfig({ OUTBOUND_CA_FILE: join(dir, 'missing.pem') })).toThrow(/OUTBOUND_CA_FILE: cannot read/);
      expect(() => loadConfig({ OUTBOUND_CA_FILE: join(dir, 'not.pem') })).toThrow(/OUTBOUND_CA_FILE: .* holds no PEM certificate/);
      expect(() => loadConfig({ VAULT_ADDR: 'vault.internal:8200' })).toThrow(/VAULT_ADDR/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs the jobs in the API on the embedded database, in `tollgate worker` on PostgreSQL, unless WORKER_IN_PROCESS says otherwise', () => {
    const pgUrl = 'postgres://app@db/t';
    expect(loadConfig({}).jobs.inProcess).toBe(true);
    expect(loadConfig({ DATABASE_URL: pgUrl }).jobs.inProcess).toBe(false);
    expect(loadConfig({ DATABASE_URL: pgUrl, WORKER_IN_PROCESS: 'true' }).jobs.inProcess).toBe(true);
    expect(loadConfig({ WORKER_IN_PROCESS: 'false' }).jobs.inProcess).toBe(false);
    const c = loadConfig({
      WORKER_PORT: '9091',
      WORKER_CONCURRENCY: '4',
      JOB_POLL_INTERVAL_SECONDS: '0.5',
      JOB_TIMEOUT_SECONDS: '2',
      JOB_MAINTENANCE_INTERVAL_SECONDS: '1',
    });
    expect(c.workerPort).toBe(9091);
    expect(c.jobs).toMatchObject({ concurrency: 4, pollIntervalSeconds: 0.5, timeoutSeconds: 2, maintenanceIntervalSeconds: 1 });
  });

  it('reads the evidence seeds: the current one, then earlier ones comma-separated, none by default outside development', () => {
    const c = loadConfig({ EVIDENCE_SIGNING_SEED: 'Ev5Rk2Nw8Qc3Ld7Hs1Gt', EVIDENCE_SIGNING_PREVIOUS_SEEDS: ' Pv8Tq3Lm6Wz1Kc4Rn , Old7TokenSeed2Xw9Lq,' });
    expect(c.evidenceSigningSeed).toBe('Ev5Rk2Nw8Qc3Ld7Hs1Gt');
    expect(c.evidencePreviousSeeds).toEqual(['Pv8Tq3Lm6Wz1Kc4Rn', 'Old7TokenSeed2Xw9Lq']);
    // A seed of one's own ends the development fallback, and production never has it.
    expect(loadConfig({ EVIDENCE_SIGNING_SEED: 'Ev5Rk2Nw8Qc3Ld7Hs1Gt' }).evidencePreviousSeeds).toEqual([]);
    expect(loadConfig({ ENVIRONMENT: 'production' }).evidencePreviousSeeds).toEqual([]);
    expect(loadConfig({ ALLOW_PRIVATE_ENDPOINTS: 'true' }).allowPrivateEndpoints).toBe(true);
  });

  it('turns development sign-in off by default in production, and on only when asked', () => {
    expect(loadConfig({ ENVIRONMENT: 'production' }).devLoginEnabled).toBe(false);
    expect(loadConfig({ ENVIRONMENT: 'production' }).cookieSecure).toBe(true);
    expect(loadConfig({ ENVIRONMENT: 'production' }).email.backend).toBe('smtp');
    expect(loadConfig({ ENVIRONMENT: 'production', DEV_LOGIN_ENABLED: 'true' }).devLoginEnabled).toBe(true);
    expect(loadConfig({ ENVIRONMENT: 'development' }).devLoginEnabled).toBe(true);
    expect(loadConfig({ ENVIRONMENT: 'development', DEV_LOGIN_ENABLED: 'false' }).devLoginEnabled).toBe(false);
  });

  it('takes overrides from the environment', () => {
    const c = loadConfig({ PORT: '9000', HOST: '0.0.0.0', DATA_DIR: '/var/lib/tollgate', DATABASE_URL: 'postgres://app@db/t' });
    expect(c).toMatchObject({ port: 9000, host: '0.0.0.0', dataDir: '/var/lib/tollgate', databaseUrl: 'postgres://app@db/t' });
    // The migration job falls back to DATABASE_URL, and MIGRATION_DATABASE_URL wins when set.
    expect(c.migrationDatabaseUrl).toBe('postgres://app@db/t');
    expect(loadConfig({ DATABASE_URL: 'postgres://app@db/t', MIGRATION_DATABASE_URL: 'postgres://owner@db/t' }).migrationDatabaseUrl).toBe(
      'postgres://owner@db/t',
    );
  });

  it.each<[string, Env]>([
    ['PORT', { PORT: 'abc' }],
    ['PORT', { PORT: '70000' }],
    ['PORT', { PORT: '-1' }],
    ['ENVIRONMENT', { ENVIRONMENT: 'prod' }],
    ['ENVIRONMENT', { ENVIRONMENT: 'Production' }],
    ['DEV_LOGIN_ENABLED', { DEV_LOGIN_ENABLED: 'maybe' }],
    ['EMAIL_BACKEND', { EMAIL_BACKEND: 'sendgrid' }],
    ['SESSION_SECRET', { SESSION_SECRET: 'short' }],
    ['EVIDENCE_SIGNING_SEED', { EVIDENCE_SIGNING_SEED: 'short' }],
    ['EVIDENCE_SIGNING_PREVIOUS_SEEDS', { EVIDENCE_SIGNING_PREVIOUS_SEEDS: 'Pv8Tq3Lm6Wz1Kc4Rn,short' }],
    ['ALLOW_PRIVATE_ENDPOINTS', { ALLOW_PRIVATE_ENDPOINTS: 'sometimes' }],
    ['DATABASE_RUNTIME_ROLE', { DATABASE_RUNTIME_ROLE: 'app; drop table users' }],
    ['WORKER_PORT', { WORKER_PORT: 'eighty' }],
    ['WORKER_IN_PROCESS', { WORKER_IN_PROCESS: 'sometimes' }],
    ['WORKER_CONCURRENCY', { WORKER_CONCURRENCY: '0' }],
    ['JOB_POLL_INTERVAL_SECONDS', { JOB_POLL_INTERVAL_SECONDS: '0.1' }],
    // pg-boss refuses an expiry of a day or more.
    ['JOB_TIMEOUT_SECONDS', { JOB_TIMEOUT_SECONDS: '86400' }],
    ['JOB_MAINTENANCE_INTERVAL_SECONDS', { JOB_MAINTENANCE_INTERVAL_SECONDS: '0' }],
  ])('rejects an invalid %s, naming it', (variable, env) => {
    for (const load of [loadConfig, loadCheckedConfig]) {
      let caught: unknown;
      try {
        load(env);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).message).toContain(variable);
    }
  });

  it('rejects an invalid value in production too, before the guard runs', () => {
    const err = refusal({ ...SAFE, PORT: 'abc' });
    expect(err.message).toContain('PORT');
  });
});
