import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEV_SECRET_PEPPER,
  DEV_SESSION_SECRET,
  DEV_TOKEN_SIGNING_SEED,
  loadCheckedConfig,
  loadConfig,
  productionProblems,
} from '../../api/config.js';

/** A production environment with every setting of the Operational contract safe. */
const SAFE: Record<string, string> = {
  ENVIRONMENT: 'production',
  DATABASE_URL: 'postgres://tollgate_app:pw@db:5432/tollgate',
  DEV_LOGIN_ENABLED: 'false',
  TOKEN_SIGNING_SEED: 'a-real-signing-seed-0123456789abcdef',
  SECRET_PEPPER: 'a-real-secret-pepper-0123456789abcdef',
  SESSION_SECRET: 'a-real-session-secret-0123456789abcd',
  SESSION_COOKIE_SECURE: 'true',
  CORS_ALLOWED_ORIGINS: 'https://portal.example.com',
  OIDC_ISSUER: 'https://id.example.com',
  OIDC_CLIENT_ID: 'tollgate',
  OIDC_CLIENT_SECRET: 'oidc-secret',
  EMAIL_BACKEND: 'smtp',
  SMTP_HOST: 'smtp.example.com',
  SMTP_USERNAME: 'tollgate',
  SMTP_PASSWORD: 'smtp-secret',
  SMTP_STARTTLS: 'true',
};

function refusal(env: Record<string, string | undefined>): string {
  try {
    loadCheckedConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('the configuration was accepted');
}

describe('production guard (spec: Operational contract)', () => {
  it('accepts a safe production configuration', () => {
    expect(productionProblems(loadConfig(SAFE))).toEqual([]);
    expect(() => loadCheckedConfig(SAFE)).not.toThrow();
  });

  // One row per condition: the change that makes it unsafe, and the variable the message must name.
  it.each<[string, Record<string, string | undefined>, string]>([
    ['development sign-in enabled', { DEV_LOGIN_ENABLED: 'true' }, 'DEV_LOGIN_ENABLED'],
    ['signing seed keeps its development value', { TOKEN_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED }, 'TOKEN_SIGNING_SEED'],
    ['signing seed left unset', { TOKEN_SIGNING_SEED: undefined }, 'TOKEN_SIGNING_SEED'],
    ['secret pepper keeps its development value', { SECRET_PEPPER: DEV_SECRET_PEPPER }, 'SECRET_PEPPER'],
    ['session secret keeps its development value', { SESSION_SECRET: DEV_SESSION_SECRET }, 'SESSION_SECRET'],
    ['secure session cookies off', { SESSION_COOKIE_SECURE: 'false' }, 'SESSION_COOKIE_SECURE'],
    ['CORS origins contain *', { CORS_ALLOWED_ORIGINS: 'https://a.example.com,*' }, 'CORS_ALLOWED_ORIGINS'],
    ['read-only fail-open without acknowledgement', { READONLY_FAIL_OPEN: 'true' }, 'READONLY_FAIL_OPEN'],
    ['OIDC issuer missing', { OIDC_ISSUER: undefined }, 'OIDC_ISSUER'],
    ['OIDC client ID missing', { OIDC_CLIENT_ID: '' }, 'OIDC_CLIENT_ID'],
    ['OIDC client secret missing', { OIDC_CLIENT_SECRET: undefined }, 'OIDC_CLIENT_SECRET'],
    ['SMTP without host', { SMTP_HOST: undefined }, 'SMTP_HOST'],
    ['SMTP without username', { SMTP_USERNAME: undefined }, 'SMTP_USERNAME'],
    ['SMTP without password', { SMTP_PASSWORD: undefined }, 'SMTP_PASSWORD'],
    ['SMTP without STARTTLS', { SMTP_STARTTLS: 'false' }, 'SMTP_STARTTLS'],
    ['in-memory email backend', { EMAIL_BACKEND: 'memory' }, 'EMAIL_BACKEND'],
    ['sign-up without its client secret', { SIGNUP_ENABLED: 'true' }, 'SIGNUP_CLIENT_SECRET'],
    ['sign-up without SMTP', { SIGNUP_ENABLED: 'true', SIGNUP_CLIENT_SECRET: 's', EMAIL_BACKEND: 'none' }, 'SIGNUP_ENABLED'],
    ['auth-events secret shorter than 32', { AUTH_EVENTS_SECRET: 'x'.repeat(31) }, 'AUTH_EVENTS_SECRET'],
    ['embedded database', { DATABASE_URL: undefined }, 'DATABASE_URL'],
  ])('refuses: %s', (_name, change, variable) => {
    const message = refusal({ ...SAFE, ...change });
    expect(message).toContain('ENVIRONMENT=production refuses');
    expect(message).toContain(variable);
  });

  it.each<[string, Record<string, string>]>([
    ['read-only fail-open with its acknowledgement', { READONLY_FAIL_OPEN: 'true', READONLY_FAIL_OPEN_ACK: 'true' }],
    ['auth-events secret of 32 characters', { AUTH_EVENTS_SECRET: 'x'.repeat(32) }],
    ['sign-up with its secret and SMTP', { SIGNUP_ENABLED: 'true', SIGNUP_CLIENT_SECRET: 'signup-secret' }],
  ])('accepts: %s', (_name, change) => {
    expect(productionProblems(loadConfig({ ...SAFE, ...change }))).toEqual([]);
  });

  it('names every problem at once', () => {
    const problems = productionProblems(loadConfig({ ENVIRONMENT: 'production' }));
    for (const v of ['TOKEN_SIGNING_SEED', 'SECRET_PEPPER', 'OIDC_ISSUER', 'SMTP_HOST', 'DATABASE_URL']) {
      expect(problems.join('\n')).toContain(v);
    }
    // Development sign-in is off by default in production: only an explicit setting turns it on.
    expect(problems.join('\n')).not.toContain('DEV_LOGIN_ENABLED');
  });

  it('lets development run with the development values', () => {
    expect(productionProblems(loadConfig({}))).toEqual([]);
    expect(productionProblems(loadConfig({ ...SAFE, ENVIRONMENT: 'development', CORS_ALLOWED_ORIGINS: '*' }))).toEqual([]);
  });
});

describe('configuration', () => {
  it('has the defaults of the README', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      environment: 'development',
      host: '127.0.0.1',
      port: 8080,
      dataDir: './.data',
      databaseUrl: undefined,
      devLoginEnabled: true,
      cookieSecure: false,
      runtimeRole: 'tollgate_app',
      bodyLimitBytes: 1048576,
      rateLimits: { personPerMinute: 600, signInPerMinute: 30, publicPerMinute: 60 },
    });
    expect(loadConfig({ ENVIRONMENT: 'production' })).toMatchObject({ devLoginEnabled: false, cookieSecure: true });
    expect(loadConfig({ PORT: '9000' }).port).toBe(9000);
    expect(loadConfig({ DATABASE_URL: 'postgres://x/y' }).migrationDatabaseUrl).toBe('postgres://x/y');
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }).otel.tracesEndpoint).toBe('http://c:4318/v1/traces');
  });

  it.each([
    ['PORT', { PORT: 'abc' }],
    ['PORT', { PORT: '70000' }],
    ['ENVIRONMENT', { ENVIRONMENT: 'prod' }],
    ['DEV_LOGIN_ENABLED', { DEV_LOGIN_ENABLED: 'maybe' }],
    ['DATABASE_RUNTIME_ROLE', { DATABASE_RUNTIME_ROLE: 'app; drop table users' }],
    ['SESSION_SECRET', { SESSION_SECRET: 'short' }],
  ])('rejects a bad %s, naming it', (variable, env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(variable);
  });
});
