import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import Provider from 'oidc-provider';
import { Agent, fetch as undiciFetch } from 'undici';
import { testTls } from './tls.js';

/** A person at the test provider: the claims of their ID token, and how they authenticated. */
export interface TestAccount {
  email: string;
  email_verified?: boolean;
  name?: string;
  /** The ID token's `amr` (e.g. ['pwd', 'otp'] for a password and an authenticator app). */
  amr: string[];
  acr?: string;
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** The CA (PEM) that signed the provider's certificate: what Tollgate's OIDC_CA_FILE holds. */
  ca: string;
  accounts: Map<string, TestAccount>;
  /**
   * A fault for the next token responses: the ID token's claims are changed by this function and the token
   * signed again with the provider's own key (an ID token for another audience, or an expired one).
   */
  tamper: ((claims: JWTPayload) => JWTPayload) | undefined;
  /**
   * Follows `authorizationUrl` as a browser would (redirects, cookies), signs in as `accountId` on the
   * login page, and answers the URL the provider finally redirects to (the callback with code and state).
   */
  signIn(authorizationUrl: string, accountId: string): Promise<URL>;
  close(): Promise<void>;
}

/**
 * A real OpenID provider (the `oidc-provider` package) on loopback over TLS, with the test CA of tls.ts. One
 * confidential client, registered with `redirectUri`; accounts from `accounts` (tests may add more). Its login
 * page is plain: GET /interaction/:uid shows it, POST /interaction/:uid/login with `account=<id>` signs in with
 * that account's `amr`/`acr`. Consent is given at once (a first-party client), so no consent page.
 */
export async function startOidcProvider(opts: { redirectUri: string; accounts?: Record<string, TestAccount> }): Promise<TestOidcProvider> {
  const tls = testTls();
  const accounts = new Map(Object.entries(opts.accounts ?? {}));
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'test-key-1', alg: 'RS256', use: 'sig' };
  const clientId = 'tollgate-test';
  const clientSecret = 'test-client-secret-0c9f2e71a4b8';

  const server: Server = createServer({ cert: tls.cert, key: tls.key });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [opts.redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: ['test-provider-cookie-key-5d1a'] },
    // amr and acr go with the openid scope: every ID token says how the person authenticated.
    claims: { openid: ['sub', 'amr', 'acr', 'auth_time'], email: ['email', 'email_verified'], profile: ['name'] },
    // Scope claims in the ID token itself (the relying party reads no userinfo).
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: false } },
    pkce: { required: () => true },
    async findAccount(_ctx, id) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, email: account.email, email_verified: account.email_verified ?? true, name: account.name ?? id };
        },
      };
    },
    async loadExistingGrant(ctx) {
      const accountId = ctx.oidc.session?.accountId;
      if (!accountId || !ctx.oidc.client) return undefined;
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId });
      grant.addOIDCScope(String(ctx.oidc.params?.scope ?? 'openid'));
      await grant.save();
      return grant;
    },
  });

  const fault: { tamper: TestOidcProvider['tamper'] } = { tamper: undefined };
  provider.use(async (ctx, next) => {
    await next();
    const body = ctx.body as { id_token?: string } | undefined;
    if (fault.tamper && ctx.path === '/token' && body?.id_token) {
      const claims = fault.tamper(decodeJwt(body.id_token));
      ctx.body = { ...body, id_token: await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: jwk.kid }).sign(privateKey) };
    }
  });

  const callback = provider.callback();
  server.on('request', (req, res) => {
    void (async () => {
      const m = /^\/interaction\/([\w-]+)(\/login)?$/.exec(new URL(req.url ?? '/', issuer).pathname);
      if (!m) return callback(req, res);
      const details = await provider.interactionDetails(req, res);
      if (!m[2]) {
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`sign in: POST /interaction/${details.uid}/login`);
        return;
      }
      const accountId = new URLSearchParams(await bodyOf(req)).get('account') ?? '';
      const account = accounts.get(accountId);
      if (!account) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end('unknown account');
        return;
      }
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId, amr: account.amr, ...(account.acr ? { acr: account.acr } : {}), remember: false } },
        { mergeWithLastSubmission: false },
      );
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });

  const dispatcher = new Agent({ connect: { ca: tls.ca } });
  return {
    issuer,
    clientId,
    clientSecret,
    ca: tls.ca,
    accounts,
    get tamper() {
      return fault.tamper;
    },
    set tamper(fn) {
      fault.tamper = fn;
    },
    async signIn(authorizationUrl, accountId) {
      // A fresh browser each time: no provider session is carried from one sign-in to the next.
      const jar = new Map<string, string>();
      const go = async (url: URL, init: { method?: string; body?: string } = {}) => {
        const res = await undiciFetch(url, {
          method: init.method ?? 'GET',
          redirect: 'manual',
          dispatcher,
          headers: {
            cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
            ...(init.body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
          },
          ...(init.body ? { body: init.body } : {}),
        });
        for (const c of res.headers.getSetCookie()) {
          const [pair] = c.split(';');
          const eq = pair!.indexOf('=');
          jar.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
        }
        await res.text();
        return res;
      };
      let url = new URL(authorizationUrl);
      for (let hop = 0; hop < 10; hop++) {
        if (!url.href.startsWith(issuer)) return url;
        const res = await go(url);
        if (res.status === 200 && /^\/interaction\//.test(url.pathname)) {
          const done = await go(new URL(`${url.pathname}/login`, issuer), { method: 'POST', body: `account=${encodeURIComponent(accountId)}` });
          url = new URL(done.headers.get('location')!, issuer);
          continue;
        }
        const location = res.headers.get('location');
        if (res.status < 300 || res.status >= 400 || !location) throw new Error(`provider answered ${res.status} at ${url.pathname}`);
        url = new URL(location, issuer);
      }
      throw new Error('too many redirects at the provider');
    },
    async close() {
      await dispatcher.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString('utf8')));
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}
