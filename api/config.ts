import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { cidrProblem } from './platform/outbound.js';

/**
 * Configuration comes only from environment variables, validated once at start.
 * Every variable is listed in the README's configuration table; keep the two in step.
 */

// Development values: safe to run locally, refused by the production guard.
export const DEV_SESSION_SECRET = 'development-session-secret-do-not-use-in-production';
export const DEV_TOKEN_SIGNING_SEED = 'development-token-signing-seed-do-not-use-in-production';
export const DEV_SECRET_PEPPER = 'development-secret-pepper-do-not-use-in-production';
export const DEV_EVIDENCE_SIGNING_SEED = 'development-evidence-signing-seed-do-not-use-in-production';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalBool = bool.optional();
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const envSchema = z.object({
  ENVIRONMENT: z.enum(['development', 'staging', 'production']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: int(0, 65535).default(8080),
  DATA_DIR: z.string().min(1).default('./.data'),
  CONSOLE_DIR: optionalString,
  DATABASE_URL: optionalString,
  MIGRATION_DATABASE_URL: optionalString,
  DATABASE_RUNTIME_ROLE: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'a lower-case PostgreSQL role name')
    .default('tollgate_app'),
  DATABASE_POOL_MAX: int(1, 200).default(10),
  SHUTDOWN_TIMEOUT_SECONDS: int(1, 3600).default(20),
  HEAP_GROWTH_PERCENT: int(0, 1000).default(100),
  WORKER_PORT: int(0, 65535).default(8081),
  WORKER_IN_PROCESS: optionalBool,
  WORKER_CONCURRENCY: int(1, 50).default(2),
  JOB_POLL_INTERVAL_SECONDS: z.coerce.number().min(0.5).max(300).default(2),
  // pg-boss refuses expirations of 24 hours or more.
  JOB_TIMEOUT_SECONDS: int(1, 86_399).default(300),
  JOB_MAINTENANCE_INTERVAL_SECONDS: int(1, 3600).default(30),
  TELEMETRY_RETENTION_DAYS: int(1, 3650).default(30),
  SEED_DEMO: optionalBool,
  // The tenants module's PLANS (test/unit/config.test.ts checks that they are the same).
  DEFAULT_PLAN: z.enum(['developer', 'team', 'enterprise']).default('developer'),
  DEV_LOGIN_ENABLED: optionalBool,
  SESSION_SECRET: z.string().min(16).default(DEV_SESSION_SECRET),
  TOKEN_SIGNING_SEED: z.string().min(16).default(DEV_TOKEN_SIGNING_SEED),
  SECRET_PEPPER: z.string().min(16).default(DEV_SECRET_PEPPER),
  EVIDENCE_SIGNING_SEED: z.string().min(16).default(DEV_EVIDENCE_SIGNING_SEED),
  // Seeds of earlier evidence keys, comma-separated: their records still verify, nothing new is signed with them.
  EVIDENCE_SIGNING_PREVIOUS_SEEDS: z
    .string()
    .optional()
    .transform((v) => v?.split(',').map((s) => s.trim()).filter(Boolean))
    .refine((seeds) => !seeds || seeds.every((s) => s.length >= 16), 'every seed at least 16 characters'),
  ALLOW_PRIVATE_ENDPOINTS: optionalBool,
  // Addresses connectors may reach although private (tests and development reach stand-ins on loopback).
  OUTBOUND_ALLOWED_CIDRS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .superRefine((cidrs, ctx) => {
      for (const cidr of cidrs) {
        const problem = cidrProblem(cidr);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }
    }),
  OUTBOUND_CA_FILE: optionalString,
  VAULT_ADDR: optionalString.refine((v) => v === undefined || /^https?:\/\/[^/?#]+/.test(v), 'an http(s) URL such as https://vault.internal:8200'),
  VAULT_TOKEN: optionalString,
  SESSION_COOKIE_SECURE: optionalBool,
  SESSION_TTL_SECONDS: int(300, 30 * 86400).default(8 * 3600),
  ONBOARDING_TTL_SECONDS: int(60, 86400).default(1800),
  CORS_ALLOWED_ORIGINS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)),
  READONLY_FAIL_OPEN: optionalBool,
  READONLY_FAIL_OPEN_ACK: optionalBool,
  OIDC_ISSUER: optionalString,
  OIDC_CLIENT_ID: optionalString,
  OIDC_CLIENT_SECRET: optionalString,
  EMAIL_BACKEND: z.enum(['memory', 'smtp', 'none']).optional(),
  SMTP_HOST: optionalString,
  SMTP_PORT: int(1, 65535).default(587),
  SMTP_USERNAME: optionalString,
  SMTP_PASSWORD: optionalString,
  SMTP_STARTTLS: optionalBool,
  SIGNUP_ENABLED: optionalBool,
  SIGNUP_CLIENT_SECRET: optionalString,
  AUTH_EVENTS_SECRET: optionalString,
  // The callback URL registered at the provider; its origin is the only one return_to may lead to.
  OIDC_REDIRECT_URI: optionalString.refine(
    (v) => v === undefined || /^https?:\/\/[^/?#]+\/[^?#]*$/.test(v),
    'an absolute http(s) URL such as https://tollgate.example.com/api/v1/auth/callback',
  ),
  OIDC_SCOPES: z
    .string()
    .default('openid email profile')
    .transform((v) => v.split(/[\s,]+/).filter(Boolean))
    .refine((scopes) => scopes.includes('openid'), 'must include openid'),
  OIDC_MFA_AMR_VALUES: z.string().default('mfa,otp,hwk,swk').transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)),
  OIDC_MFA_ACR_VALUES: z.string().default('').transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)),
  OIDC_AMR_CLAIM: z.string().regex(/^[A-Za-z0-9_:./-]{1,200}$/, 'a claim name').default('amr'),
  OIDC_ACR_CLAIM: z.string().regex(/^[A-Za-z0-9_:./-]{1,200}$/, 'a claim name').default('acr'),
  OIDC_EMAIL_VERIFIED_CLAIM: z.string().regex(/^[A-Za-z0-9_:./-]{1,200}$/, 'a claim name').default('email_verified'),
  // A provider's private CA certificates (PEM), trusted besides the system's; read once at start.
  OIDC_CA_FILE: optionalString,
  SMTP_FROM: z.string().trim().min(3).max(320).default('Tollgate <no-reply@localhost>'),
  // A private SMTP server's CA certificates (PEM), trusted besides the system's; read once at start.
  SMTP_CA_FILE: optionalString,
  CHALLENGE_VERIFIER: z.enum(['siteverify', 'development', 'none']).optional(),
  CHALLENGE_VERIFY_URL: z
    .string()
    .trim()
    .regex(/^https?:\/\/[^/?#]+/, 'an http(s) URL such as https://challenges.cloudflare.com/turnstile/v0/siteverify')
    .default('https://challenges.cloudflare.com/turnstile/v0/siteverify'),
  CHALLENGE_SITE_KEY: optionalString,
  SALES_EMAIL: optionalString.pipe(z.email().max(254).optional()),
  SALES_ORG_ID: optionalString.pipe(z.uuid().optional()),
  ANALYTICS_ENABLED: optionalBool,
  DOCS_URL: optionalString.refine((v) => v === undefined || /^https?:\/\/[^/?#\s]+\S*$/.test(v), 'an http(s) URL such as https://docs.example.com'),
  BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(1024 * 1024),
  RATE_LIMIT_PERSON_PER_MINUTE: int(1, 1_000_000).default(600),
  RATE_LIMIT_SIGNIN_PER_MINUTE: int(1, 1_000_000).default(30),
  RATE_LIMIT_PUBLIC_PER_MINUTE: int(1, 1_000_000).default(60),
  RATE_LIMIT_GATEWAY_PER_MINUTE: int(1, 1_000_000).default(120),
  RATE_LIMIT_TOKEN_PER_MINUTE: int(1, 1_000_000).default(30),
  RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: int(1, 1_000_000).default(300),
  TOKEN_REVOCATION_CACHE_SECONDS: z.coerce.number().min(0).max(60).default(1),
  TRUST_PROXY: optionalBool,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalString,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalString,
  OTEL_SERVICE_NAME: z.string().min(1).default('tollgate-api'),
  METRICS_ENABLED: optionalBool,
});

export type Env = z.input<typeof envSchema>;

/** Every environment variable Tollgate reads (the README's configuration table lists each). */
export const ENV_VARS = Object.keys(envSchema.shape);

export interface Config {
  environment: 'development' | 'staging' | 'production';
  host: string;
  port: number;
  dataDir: string;
  /** The built web console `tollgate api` serves at `/`; unset: the one built into the package (dist/console). */
  consoleDir: string | undefined;
  databaseUrl: string | undefined;
  migrationDatabaseUrl: string | undefined;
  runtimeRole: string;
  poolMax: number;
  /** How long SIGTERM may take to drain before the process exits anyway. */
  shutdownTimeoutMs: number;
  /**
   * How far V8 lets the heap of `tollgate api` and `tollgate worker` grow past what the last full
   * collection kept, in percent (0: V8's own choice, up to four times); docs/decisions.md D39.
   */
  heapGrowthPercent: number;
  /** Where `tollgate worker` serves /healthz and /readyz (on `host`). */
  workerPort: number;
  /** Background jobs (worker/README.md). */
  jobs: JobSettings;
  /** Telemetry events older than this many days are deleted by the retention job (docs/telemetry.md). */
  telemetryRetentionDays: number;
  seedDemo: boolean;
  /** The plan a new organisation starts on (DEFAULT_PLAN); `tollgate org set-plan` changes one organisation's. */
  defaultPlan: 'developer' | 'team' | 'enterprise';
  devLoginEnabled: boolean;
  sessionSecret: string;
  tokenSigningSeed: string;
  secretPepper: string;
  evidenceSigningSeed: string;
  /** Earlier evidence seeds: they verify the records they signed and sign nothing new. */
  evidencePreviousSeeds: string[];
  /** Whether inventory endpoints may name loopback, private, link-local and metadata hosts (development). */
  allowPrivateEndpoints: boolean;
  /** Connectors' outbound transport (api/platform/outbound.ts): CIDRs reachable although private, extra trusted CA (PEM). */
  outbound: { allowedCidrs: string[]; caFile: string | undefined; ca: string | undefined };
  /** HashiCorp Vault for `vault` credential references (KV v2). The token is a secret: never logged. */
  vault: { addr: string | undefined; token: string | undefined };
  cookieSecure: boolean;
  sessionTtlSeconds: number;
  onboardingTtlSeconds: number;
  corsOrigins: string[];
  readonlyFailOpen: boolean;
  readonlyFailOpenAck: boolean;
  oidc: { issuer?: string; clientId?: string; clientSecret?: string };
  email: {
    backend: 'memory' | 'smtp' | 'none';
    smtp: { host?: string; port: number; username?: string; password?: string; starttls: boolean };
  };
  signup: { enabled: boolean; clientSecret?: string };
  authEventsSecret: string | undefined;
  /** OpenID Connect sign-in beyond issuer and client (docs/authentication.md, OpenID Connect sign-in). */
  oidcSignIn: {
    redirectUri: string | undefined;
    scopes: string[];
    /** An ID token shows multi-factor authentication when its amr claim holds one of these, or its acr claim is one of acrValues. */
    mfaAmrValues: string[];
    mfaAcrValues: string[];
    amrClaim: string;
    acrClaim: string;
    /** The claim that must be true for a first sign-in to be linked by email. */
    emailVerifiedClaim: string;
    /** OIDC_CA_FILE's certificates (PEM), trusted for the provider besides the system's. */
    ca: string | undefined;
  };
  /** The From address of every email, and SMTP_CA_FILE's certificates (PEM) for an SMTP server with a private certificate. */
  mail: { from: string; smtpCa: string | undefined };
  /** How a sign-up's (or a public form's) challenge token is checked (api/modules/auth/challenge.ts). */
  challenge: { verifier: 'siteverify' | 'development' | 'none'; verifyUrl: string; siteKey: string | undefined };
  /** The public website's endpoints (docs/public.md): where leads are announced, who reads them, the form settings. */
  publicSite: {
    /** Each stored lead and quote request is announced to this address; unset sends nothing. */
    salesEmail: string | undefined;
    /** The operator's organisation: its members holding `tenant:manage` read the submissions; unset, nobody does. */
    salesOrgId: string | undefined;
    analyticsEnabled: boolean;
    /** Where the website's forms link for documentation; unset answers null. */
    docsUrl: string | undefined;
  };
  bodyLimitBytes: number;
  rateLimits: {
    personPerMinute: number;
    signInPerMinute: number;
    publicPerMinute: number;
    gatewayPerMinute: number;
    tokenPerMinute: number;
    tokenPerIpPerMinute: number;
  };
  revocationCacheMs: number;
  trustProxy: boolean;
  logLevel: string;
  otel: { tracesEndpoint: string | undefined; serviceName: string };
  /** Whether the API serves Prometheus metrics at GET /metrics (docs/metrics.md). */
  metricsEnabled: boolean;
}

export interface JobSettings {
  /** Whether `tollgate api` works the jobs itself (the embedded database: `make run`), besides or instead of `tollgate worker`. */
  inProcess: boolean;
  /** Jobs of one queue a process runs at once. */
  concurrency: number;
  /** How often an idle worker asks for a job. */
  pollIntervalSeconds: number;
  /** How long a job may stay active: its handler's signal aborts then, and a job whose worker died is retried after it. */
  timeoutSeconds: number;
  /** How often expired jobs are failed (so retried) and old ones archived, by whichever process gets there first. */
  maintenanceIntervalSeconds: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment. Throws ConfigError naming each bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  }
  const e = parsed.data;
  const production = e.ENVIRONMENT === 'production';
  const otlpBase = e.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, '');
  return {
    environment: e.ENVIRONMENT,
    host: e.HOST,
    port: e.PORT,
    dataDir: e.DATA_DIR,
    consoleDir: e.CONSOLE_DIR,
    databaseUrl: e.DATABASE_URL,
    migrationDatabaseUrl: e.MIGRATION_DATABASE_URL ?? e.DATABASE_URL,
    runtimeRole: e.DATABASE_RUNTIME_ROLE,
    poolMax: e.DATABASE_POOL_MAX,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_SECONDS * 1000,
    heapGrowthPercent: e.HEAP_GROWTH_PERCENT,
    workerPort: e.WORKER_PORT,
    jobs: {
      // The embedded database has one process: the API's.
      inProcess: e.WORKER_IN_PROCESS ?? !e.DATABASE_URL,
      concurrency: e.WORKER_CONCURRENCY,
      pollIntervalSeconds: e.JOB_POLL_INTERVAL_SECONDS,
      timeoutSeconds: e.JOB_TIMEOUT_SECONDS,
      maintenanceIntervalSeconds: e.JOB_MAINTENANCE_INTERVAL_SECONDS,
    },
    telemetryRetentionDays: e.TELEMETRY_RETENTION_DAYS,
    seedDemo: e.SEED_DEMO ?? false,
    defaultPlan: e.DEFAULT_PLAN,
    devLoginEnabled: e.DEV_LOGIN_ENABLED ?? !production,
    sessionSecret: e.SESSION_SECRET,
    tokenSigningSeed: e.TOKEN_SIGNING_SEED,
    secretPepper: e.SECRET_PEPPER,
    evidenceSigningSeed: e.EVIDENCE_SIGNING_SEED,
    // Evidence was signed with a key derived from TOKEN_SIGNING_SEED before it had a seed of its own:
    // under the development seeds, records of earlier development databases keep verifying.
    evidencePreviousSeeds:
      e.EVIDENCE_SIGNING_PREVIOUS_SEEDS ??
      (!production && e.EVIDENCE_SIGNING_SEED === DEV_EVIDENCE_SIGNING_SEED ? [DEV_TOKEN_SIGNING_SEED] : []),
    allowPrivateEndpoints: e.ALLOW_PRIVATE_ENDPOINTS ?? false,
    outbound: { allowedCidrs: e.OUTBOUND_ALLOWED_CIDRS, caFile: e.OUTBOUND_CA_FILE, ca: e.OUTBOUND_CA_FILE && readCaFile('OUTBOUND_CA_FILE', e.OUTBOUND_CA_FILE) },
    vault: { addr: e.VAULT_ADDR?.replace(/\/+$/, ''), token: e.VAULT_TOKEN },
    cookieSecure: e.SESSION_COOKIE_SECURE ?? production,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    onboardingTtlSeconds: e.ONBOARDING_TTL_SECONDS,
    corsOrigins: e.CORS_ALLOWED_ORIGINS,
    readonlyFailOpen: e.READONLY_FAIL_OPEN ?? false,
    readonlyFailOpenAck: e.READONLY_FAIL_OPEN_ACK ?? false,
    oidc: { issuer: e.OIDC_ISSUER, clientId: e.OIDC_CLIENT_ID, clientSecret: e.OIDC_CLIENT_SECRET },
    email: {
      backend: e.EMAIL_BACKEND ?? (production ? 'smtp' : 'memory'),
      smtp: {
        host: e.SMTP_HOST,
        port: e.SMTP_PORT,
        username: e.SMTP_USERNAME,
        password: e.SMTP_PASSWORD,
        starttls: e.SMTP_STARTTLS ?? true,
      },
    },
    signup: { enabled: e.SIGNUP_ENABLED ?? false, clientSecret: e.SIGNUP_CLIENT_SECRET },
    authEventsSecret: e.AUTH_EVENTS_SECRET,
    oidcSignIn: {
      redirectUri: e.OIDC_REDIRECT_URI,
      scopes: e.OIDC_SCOPES,
      mfaAmrValues: e.OIDC_MFA_AMR_VALUES,
      mfaAcrValues: e.OIDC_MFA_ACR_VALUES,
      amrClaim: e.OIDC_AMR_CLAIM,
      acrClaim: e.OIDC_ACR_CLAIM,
      emailVerifiedClaim: e.OIDC_EMAIL_VERIFIED_CLAIM,
      ca: e.OIDC_CA_FILE && readCaFile('OIDC_CA_FILE', e.OIDC_CA_FILE),
    },
    mail: { from: e.SMTP_FROM, smtpCa: e.SMTP_CA_FILE && readCaFile('SMTP_CA_FILE', e.SMTP_CA_FILE) },
    challenge: {
      verifier: e.CHALLENGE_VERIFIER ?? (production ? 'siteverify' : 'development'),
      verifyUrl: e.CHALLENGE_VERIFY_URL,
      siteKey: e.CHALLENGE_SITE_KEY,
    },
    publicSite: {
      salesEmail: e.SALES_EMAIL,
      salesOrgId: e.SALES_ORG_ID?.toLowerCase(),
      analyticsEnabled: e.ANALYTICS_ENABLED ?? false,
      docsUrl: e.DOCS_URL,
    },
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    rateLimits: {
      personPerMinute: e.RATE_LIMIT_PERSON_PER_MINUTE,
      signInPerMinute: e.RATE_LIMIT_SIGNIN_PER_MINUTE,
      publicPerMinute: e.RATE_LIMIT_PUBLIC_PER_MINUTE,
      gatewayPerMinute: e.RATE_LIMIT_GATEWAY_PER_MINUTE,
      tokenPerMinute: e.RATE_LIMIT_TOKEN_PER_MINUTE,
      tokenPerIpPerMinute: e.RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE,
    },
    revocationCacheMs: Math.round(e.TOKEN_REVOCATION_CACHE_SECONDS * 1000),
    trustProxy: e.TRUST_PROXY ?? false,
    logLevel: e.LOG_LEVEL,
    otel: {
      tracesEndpoint: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (otlpBase ? `${otlpBase}/v1/traces` : undefined),
      serviceName: e.OTEL_SERVICE_NAME,
    },
    metricsEnabled: e.METRICS_ENABLED ?? true,
  };
}

/** The PEM certificates of a CA file setting (`variable`), read once at start. */
function readCaFile(variable: string, path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([`${variable}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError([`${variable}: ${path} holds no PEM certificate`]);
  return pem;
}

/**
 * The spec's Operational contract: with ENVIRONMENT=production the API and the migration job
 * refuse to start while any unsafe setting holds. Each problem names the variable to change.
 */
export function productionProblems(c: Config): string[] {
  if (c.environment !== 'production') return [];
  const problems: string[] = [];
  if (c.devLoginEnabled) problems.push('DEV_LOGIN_ENABLED: development sign-in must be off in production');
  if (c.tokenSigningSeed === DEV_TOKEN_SIGNING_SEED)
    problems.push('TOKEN_SIGNING_SEED: still the development value; set a secret seed');
  if (c.secretPepper === DEV_SECRET_PEPPER) problems.push('SECRET_PEPPER: still the development value; set a secret');
  if (c.evidenceSigningSeed === DEV_EVIDENCE_SIGNING_SEED)
    problems.push('EVIDENCE_SIGNING_SEED: still the development value; set a secret seed');
  else if (c.evidenceSigningSeed === c.tokenSigningSeed)
    problems.push('EVIDENCE_SIGNING_SEED: equals TOKEN_SIGNING_SEED; whoever holds the token key could sign evidence');
  if (c.evidencePreviousSeeds.some((s) => s === DEV_EVIDENCE_SIGNING_SEED || s === DEV_TOKEN_SIGNING_SEED))
    problems.push('EVIDENCE_SIGNING_PREVIOUS_SEEDS: holds a development value, whose key anyone can sign with');
  else if (c.evidencePreviousSeeds.includes(c.tokenSigningSeed))
    problems.push('EVIDENCE_SIGNING_PREVIOUS_SEEDS: holds TOKEN_SIGNING_SEED; rotate the token seed first (docs/operations.md, Key rotation)');
  if (c.allowPrivateEndpoints)
    problems.push('ALLOW_PRIVATE_ENDPOINTS: loopback, private and metadata endpoints are for development only');
  if (c.outbound.allowedCidrs.length > 0)
    problems.push('OUTBOUND_ALLOWED_CIDRS: opening private addresses to connectors is for tests and development only');
  if (c.sessionSecret === DEV_SESSION_SECRET)
    problems.push('SESSION_SECRET: still the development value; set a secret');
  if (!c.cookieSecure) problems.push('SESSION_COOKIE_SECURE: secure session cookies must be on in production');
  if (c.corsOrigins.includes('*')) problems.push('CORS_ALLOWED_ORIGINS: must not contain "*"');
  if (c.readonlyFailOpen && !c.readonlyFailOpenAck)
    problems.push('READONLY_FAIL_OPEN: set without its acknowledgement READONLY_FAIL_OPEN_ACK=true');
  if (!c.oidc.issuer) problems.push('OIDC_ISSUER: missing');
  if (!c.oidc.clientId) problems.push('OIDC_CLIENT_ID: missing');
  if (!c.oidc.clientSecret) problems.push('OIDC_CLIENT_SECRET: missing');
  if (c.email.backend === 'memory') problems.push('EMAIL_BACKEND: the in-memory backend is for development only');
  if (c.email.backend === 'smtp') {
    const s = c.email.smtp;
    if (!s.host) problems.push('SMTP_HOST: missing for EMAIL_BACKEND=smtp');
    if (!s.username) problems.push('SMTP_USERNAME: missing for EMAIL_BACKEND=smtp');
    if (!s.password) problems.push('SMTP_PASSWORD: missing for EMAIL_BACKEND=smtp');
    if (!s.starttls) problems.push('SMTP_STARTTLS: must be true for EMAIL_BACKEND=smtp');
  }
  if (c.signup.enabled && !c.signup.clientSecret)
    problems.push('SIGNUP_CLIENT_SECRET: missing while SIGNUP_ENABLED=true');
  if (c.signup.enabled && c.email.backend !== 'smtp')
    problems.push('SIGNUP_ENABLED: self-service sign-up needs EMAIL_BACKEND=smtp');
  if (c.authEventsSecret !== undefined && c.authEventsSecret.length < 32)
    problems.push('AUTH_EVENTS_SECRET: shorter than 32 characters');
  if (c.oidc.issuer && !c.oidc.issuer.startsWith('https://')) problems.push('OIDC_ISSUER: must be an https URL in production');
  if (!c.oidcSignIn.redirectUri) problems.push('OIDC_REDIRECT_URI: missing; without it nobody can sign in');
  else if (!c.oidcSignIn.redirectUri.startsWith('https://')) problems.push('OIDC_REDIRECT_URI: must be an https URL in production');
  if (c.oidcSignIn.mfaAmrValues.length === 0 && c.oidcSignIn.mfaAcrValues.length === 0)
    problems.push('OIDC_MFA_AMR_VALUES: empty together with OIDC_MFA_ACR_VALUES; no sign-in could show multi-factor authentication');
  if (c.challenge.verifier === 'development')
    problems.push('CHALLENGE_VERIFIER: the development verifier accepts a published token; use siteverify');
  if (c.signup.enabled && c.challenge.verifier === 'none')
    problems.push('CHALLENGE_VERIFIER: self-service sign-up needs a challenge (siteverify)');
  if (c.challenge.verifier === 'siteverify' && !c.challenge.verifyUrl.startsWith('https://'))
    problems.push('CHALLENGE_VERIFY_URL: must be https (the secret is sent to it)');
  if (c.publicSite.docsUrl?.startsWith('http://')) problems.push('DOCS_URL: must be an https URL in production');
  if (!c.databaseUrl) problems.push('DATABASE_URL: missing; the embedded database is for development only');
  return problems;
}

/** Loads the configuration and applies the production guard; throws ConfigError on any problem. */
export function loadCheckedConfig(env: Record<string, string | undefined> = process.env): Config {
  const config = loadConfig(env);
  const problems = productionProblems(config);
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `ENVIRONMENT=production refuses ${p}`));
  return config;
}
