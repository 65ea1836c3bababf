/**
 * An environment in which every condition of the production guard (the spec's Operational contract) is safe, but
 * for the database: tests add DATABASE_URL (a real one to start a process, a made-up one to load the configuration),
 * and override what they test (a real OpenID provider, a real SMTP server).
 */
export const SAFE_PRODUCTION_ENV: Readonly<Record<string, string>> = {
  ENVIRONMENT: 'production',
  DEV_LOGIN_ENABLED: 'false',
  TOKEN_SIGNING_SEED: 'k9Vq2rT7xLm4Pz8sWc3Nd6Hb1Yf5Gj0A',
  EVIDENCE_SIGNING_SEED: 'Ev5Rk2Nw8Qc3Ld7Hs1Gt6Yb9Mf4Jx0Pz',
  SECRET_PEPPER: 'Qe7Rt2Yu9Io4Pa6Sd1Fg8Hj3Kl5Zx0Cv',
  SESSION_SECRET: 'Mn3Bv8Cx1Zl6Kj4Hg9Fd2Sa7Po5Iu0Yt',
  SESSION_COOKIE_SECURE: 'true',
  OIDC_ISSUER: 'https://id.example.com/realms/tollgate',
  OIDC_CLIENT_ID: 'tollgate-api',
  OIDC_CLIENT_SECRET: 'oidc-client-secret-7f3a9c',
  OIDC_REDIRECT_URI: 'https://tollgate.example.com/api/v1/auth/callback',
  EMAIL_BACKEND: 'smtp',
  SMTP_HOST: 'smtp.example.com',
  SMTP_USERNAME: 'tollgate-mailer',
  SMTP_PASSWORD: 'smtp-password-2b8e1d',
  SMTP_STARTTLS: 'true',
};
