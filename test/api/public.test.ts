import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, productionProblems } from '../../api/config.js';
import { DEV_CHALLENGE_TOKEN } from '../../api/modules/auth/challenge.js';
import type { MemoryMailer } from '../../api/modules/mail/index.js';
import { SUBMISSION_RETENTION_DAYS } from '../../api/modules/public/index.js';
import { parseCsv } from '../../api/modules/reports/index.js';
import { freePort } from '../support/postgres-cluster.js';
import { addMember, api, asOwner, Client, expectValidation, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * The public website's endpoints on real PostgreSQL: form settings and pricing, leads and quote requests stored
 * (honeypot, consent, challenge, bounds), rate-limited per client address, announced to sales by email, and
 * read only by the operator organisation's staff.
 */
describe('public website endpoints', () => {
  const clock = new TestClock();
  const SALES = 'sales@operator.example';
  const LIMIT = 5;
  /** Boots the database and the operator's organisation; `t` is the app configured with it. */
  let boot: TestApp;
  let t: TestApp;
  let operator: Client;
  let operatorOrgId: string;
  let operatorEmail: string;

  /** Every request comes from an address of its own unless a test says otherwise, so the rate limit stays out of the way. */
  let nextAddress = 0;
  const address = () => `10.20.${Math.floor(++nextAddress / 250)}.${(nextAddress % 250) + 1}`;
  const send = (method: 'GET' | 'POST', path: string, body?: object, ip = address(), headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url: api(path),
      headers: { 'x-forwarded-for': ip, 'user-agent': 'Mozilla/5.0 (test browser)', ...headers },
      ...(body ? { payload: body } : {}),
    });

  const lead = (over: Record<string, unknown> = {}) => ({
    kind: 'demo',
    name: 'Grace Hopper',
    email: 'grace@navy.example',
    company: 'Navy Labs',
    request_type: 'demo',
    topic: 'soc-demo',
    role: 'CISO',
    message: 'We run forty agents against our ticketing system.',
    consent: true,
    source_page: '/pricing',
    challenge_token: DEV_CHALLENGE_TOKEN,
    assessment: null,
    website: '',
    ...over,
  });
  const quote = (over: Record<string, unknown> = {}) => ({
    full_name: 'Katherine Johnson',
    work_email: 'katherine@orbit.example',
    company: 'Orbit Analytics',
    job_title: 'Head of Platform',
    country: 'United Kingdom',
    estimated_agents: 120,
    deployment_model: 'self-hosted',
    retention_period: '1 year',
    privacy_consent: true,
    tier: 'team',
    products: ['gateway', 'governance'],
    message: '',
    website: '',
    ...over,
  });

  const mails = () => (t.app.deps.mailer as MemoryMailer).messages;
  const storedCount = async () =>
    asOwner(t, async (c) => Number((await c.query('select count(*)::int as n from public_submissions')).rows[0].n));
  const staffList = async (client: Client, query = '') => client.get(api(`/public-submissions${query}`));

  beforeAll(async () => {
    boot = await startTestApp({ clock });
    const admin = await onboardAdmin(boot.app, 'Tollgate Operator');
    operatorOrgId = admin.tenant.id;
    operatorEmail = admin.email;
    t = await startTestApp({
      clock,
      share: boot,
      env: {
        TRUST_PROXY: 'true',
        RATE_LIMIT_PUBLIC_PER_MINUTE: String(LIMIT),
        SALES_EMAIL: SALES,
        SALES_ORG_ID: operatorOrgId,
        ANALYTICS_ENABLED: 'true',
        DOCS_URL: 'https://docs.operator.example/tollgate',
        CHALLENGE_SITE_KEY: 'site-key-for-tests',
        EMAIL_BACKEND: 'memory',
      },
    });
    // The session lives in the database: the same cookies sign in to the configured app.
    operator = new Client(t.app);
    for (const [k, v] of admin.client.cookies) operator.cookies.set(k, v);
  });
  afterAll(async () => {
    await t?.close();
    await boot?.close();
  });

  describe('GET /public/form-config and GET /public/pricing', () => {
    it('answers the challenge site key, analytics flag and docs URL from the configuration', async () => {
      const res = await send('GET', '/public/form-config');
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ challenge_site_key: 'site-key-for-tests', analytics_enabled: true, docs_url: 'https://docs.operator.example/tollgate' });
    });

    it('answers nulls and false when nothing is configured', async () => {
      const res = await boot.app.inject({ method: 'GET', url: api('/public/form-config') });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ challenge_site_key: null, analytics_enabled: false, docs_url: null });
    });

    it('serves indicative pricing of schema version 1 from the data file', async () => {
      const res = await send('GET', '/public/pricing');
      expect(res.statusCode).toBe(200);
      const pricing = res.json();
      expect(pricing.schema_version).toBe(1);
      expect(pricing.indicative).toBe(true);
      expect(pricing.tiers.map((x: { key: string }) => x.key)).toEqual(['developer', 'team', 'enterprise']);
      for (const tier of pricing.tiers) {
        expect(tier.name).toEqual(expect.any(String));
        expect(tier.includes.length).toBeGreaterThan(0);
        expect(tier.price === null || typeof tier.price.amount === 'number').toBe(true);
      }
    });
  });

  describe('POST /public/leads', () => {
    it('stores a lead with its consent time, a hash of the client address and the user agent, and tells sales', async () => {
      const before = mails().length;
      const res = await send('POST', '/public/leads', lead(), '203.0.113.7');
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json()).toEqual({ status: 'received' });
      const items = (await staffList(operator)).json().items;
      expect(items[0]).toMatchObject({
        kind: 'lead',
        name: 'Grace Hopper',
        email: 'grace@navy.example',
        company: 'Navy Labs',
        consent_given: true,
        consented_at: clock.now().toISOString(),
        user_agent: 'Mozilla/5.0 (test browser)',
        created_at: clock.now().toISOString(),
        details: { kind: 'demo', request_type: 'demo', topic: 'soc-demo', role: 'CISO', source_page: '/pricing', assessment: null },
      });
      // Neither the honeypot nor the challenge token nor the address is kept.
      expect(items[0].details).not.toHaveProperty('website');
      expect(items[0].details).not.toHaveProperty('challenge_token');
      expect(items[0].client_address_hash).toMatch(/^[0-9a-f]{32}$/);
      const raw = await asOwner(t, async (c) => JSON.stringify((await c.query('select * from public_submissions')).rows));
      expect(raw).not.toContain('203.0.113.7');

      const sent = mails().slice(before);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.to).toBe(SALES);
      expect(sent[0]!.subject).toBe('New demo request from the website');
      // The subject is logged by the memory backend: it names no one.
      expect(sent[0]!.subject).not.toContain('Grace');
      expect(sent[0]!.text).toContain('Email: grace@navy.example');
      expect(sent[0]!.text).toContain('We run forty agents');
      expect(sent[0]!.html).toContain('Navy Labs');
    });

    it('hashes one address alike and two addresses apart', async () => {
      await send('POST', '/public/leads', lead({ name: 'Second From Same' }), '203.0.113.7');
      await send('POST', '/public/leads', lead({ name: 'From Elsewhere' }), '198.51.100.9');
      const items = (await staffList(operator, '?kind=lead&limit=3')).json().items as Array<{ name: string; client_address_hash: string }>;
      const hash = (name: string) => items.find((i) => i.name === name)!.client_address_hash;
      expect(hash('Second From Same')).toBe(hash('Grace Hopper'));
      expect(hash('From Elsewhere')).not.toBe(hash('Grace Hopper'));
    });

    it('escapes what the submitter wrote in the HTML of the sales email', async () => {
      await send('POST', '/public/leads', lead({ company: '<script>alert(1)</script> Ltd', kind: 'assessment', assessment: { agents: 12 } }));
      const m = mails().at(-1)!;
      expect(m.subject).toBe('New assessment request from the website');
      expect(m.html).not.toContain('<script>');
      expect(m.html).toContain('&lt;script&gt;');
      expect(m.text).toContain('assessment: {"agents":12}');
    });

    it('answers a filled honeypot 202 like any other and keeps and sends nothing', async () => {
      const [count, sent] = [await storedCount(), mails().length];
      const res = await send('POST', '/public/leads', lead({ website: 'http://spam.example' }));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ status: 'received' });
      expect(await storedCount()).toBe(count);
      expect(mails().length).toBe(sent);
    });

    it('refuses a lead without consent (422 naming consent) and keeps nothing', async () => {
      const count = await storedCount();
      expectValidation(await send('POST', '/public/leads', lead({ consent: false })), 'consent');
      const { consent: _omitted, ...absent } = lead();
      expectValidation(await send('POST', '/public/leads', absent), 'consent');
      expect(await storedCount()).toBe(count);
    });

    it('refuses a lead whose challenge was not passed, while a site key is configured', async () => {
      expectValidation(await send('POST', '/public/leads', lead({ challenge_token: 'made-up' })), 'challenge_token');
      expectValidation(await send('POST', '/public/leads', lead({ challenge_token: null })), 'challenge_token');
      // Without a site key the website shows no challenge, and none is asked for.
      const res = await boot.app.inject({ method: 'POST', url: api('/public/leads'), payload: lead({ challenge_token: null }) });
      expect(res.statusCode).toBe(202);
    });

    const long = (n: number) => 'x'.repeat(n);
    const badLeads: Array<[string, Record<string, unknown>, string]> = [
      ['kind not in the enumeration', { kind: 'sales' }, 'kind'],
      ['kind missing', { kind: undefined }, 'kind'],
      ['name too short', { name: 'A' }, 'name'],
      ['name only spaces', { name: '   ' }, 'name'],
      ['name too long', { name: long(121) }, 'name'],
      ['name missing', { name: undefined }, 'name'],
      ['email not an email', { email: 'grace-at-navy' }, 'email'],
      ['email too long', { email: `${long(250)}@x.example` }, 'email'],
      ['email missing', { email: undefined }, 'email'],
      ['company too short', { company: 'N' }, 'company'],
      ['company too long', { company: long(161) }, 'company'],
      ['company missing', { company: undefined }, 'company'],
      ['request_type not in the enumeration', { request_type: 'sales' }, 'request_type'],
      ['topic not in the enumeration', { topic: 'pricing' }, 'topic'],
      ['role too long', { role: long(121) }, 'role'],
      ['message too long', { message: long(4001) }, 'message'],
      ['consent not a boolean', { consent: 'yes' }, 'consent'],
      ['source_page too long', { source_page: long(201) }, 'source_page'],
      ['challenge_token too long', { challenge_token: long(2049) }, 'challenge_token'],
      ['assessment not an object', { assessment: 'all good' }, 'assessment'],
      ['assessment an array', { assessment: [1, 2] }, 'assessment'],
      ['assessment too large', { assessment: { answers: long(17_000) } }, 'assessment'],
      ['website too long', { website: long(201) }, 'website'],
    ];
    it.each(badLeads)('422 when %s', async (_what, over, field) => {
      const count = await storedCount();
      expectValidation(await send('POST', '/public/leads', lead(over)), field);
      expect(await storedCount()).toBe(count);
    });

    it('accepts every value at the bounds and every topic and request type', async () => {
      const topics = ['demo', 'contact', 'design-partner', 'mcp-security-workshop', 'architecture-consultation', 'governance-readiness-review',
        'soc-demo', 'devsec-pilot', 'industry-discovery', 'security-packs-pilot', 'industry-packs-pilot', 'security-report'];
      const types = ['demo', 'risk-assessment', 'support', 'partnership', 'other', null];
      for (const [i, topic] of topics.entries()) {
        const res = await send('POST', '/public/leads', lead({ topic, request_type: types[i % types.length] }));
        expect(res.statusCode, `${topic}: ${res.body}`).toBe(202);
      }
      const edges = lead({
        name: long(120), company: long(160), email: `${long(242)}@x.example`, role: '', message: long(4000), source_page: long(200),
        topic: null, request_type: null, assessment: { q1: 'yes' }, website: '',
      });
      expect((await send('POST', '/public/leads', edges)).statusCode).toBe(202);
      const minimal = { kind: 'assessment', name: 'Al', email: 'al@b.example', company: 'AB', consent: true, challenge_token: DEV_CHALLENGE_TOKEN };
      expect((await send('POST', '/public/leads', minimal)).statusCode).toBe(202);
    });
  });

  describe('POST /public/pricing-quote', () => {
    it('stores a quote request and tells sales', async () => {
      const before = mails().length;
      const res = await send('POST', '/public/pricing-quote', quote());
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json()).toEqual({ status: 'received' });
      const items = (await staffList(operator, '?kind=quote')).json().items;
      expect(items).toHaveLength(1);
      expect(items[0]).toMatchObject({
        kind: 'quote',
        name: 'Katherine Johnson',
        email: 'katherine@orbit.example',
        company: 'Orbit Analytics',
        consent_given: true,
        details: {
          job_title: 'Head of Platform',
          country: 'United Kingdom',
          estimated_agents: 120,
          deployment_model: 'self-hosted',
          retention_period: '1 year',
          tier: 'team',
          products: ['gateway', 'governance'],
          message: '',
        },
      });
      const sent = mails().slice(before);
      expect(sent.map((m) => [m.to, m.subject])).toEqual([[SALES, 'New pricing quote request from the website']]);
      expect(sent[0]!.text).toContain('estimated agents: 120');
    });

    it('answers a filled honeypot 202 and keeps and sends nothing', async () => {
      const [count, sent] = [await storedCount(), mails().length];
      expect((await send('POST', '/public/pricing-quote', quote({ website: 'x' }))).statusCode).toBe(202);
      expect(await storedCount()).toBe(count);
      expect(mails().length).toBe(sent);
    });

    it('refuses a quote without privacy consent (422 naming privacy_consent)', async () => {
      expectValidation(await send('POST', '/public/pricing-quote', quote({ privacy_consent: false })), 'privacy_consent');
    });

    const long = (n: number) => 'x'.repeat(n);
    const badQuotes: Array<[string, Record<string, unknown>, string]> = [
      ['full_name too short', { full_name: 'K' }, 'full_name'],
      ['full_name too long', { full_name: long(121) }, 'full_name'],
      ['full_name missing', { full_name: undefined }, 'full_name'],
      ['work_email not an email', { work_email: 'katherine' }, 'work_email'],
      ['work_email too long', { work_email: `${long(250)}@x.example` }, 'work_email'],
      ['work_email missing', { work_email: undefined }, 'work_email'],
      ['company too short', { company: 'O' }, 'company'],
      ['company too long', { company: long(161) }, 'company'],
      ['job_title too short', { job_title: 'H' }, 'job_title'],
      ['job_title too long', { job_title: long(121) }, 'job_title'],
      ['job_title missing', { job_title: undefined }, 'job_title'],
      ['country too short', { country: 'U' }, 'country'],
      ['country too long', { country: long(81) }, 'country'],
      ['country missing', { country: undefined }, 'country'],
      ['estimated_agents zero', { estimated_agents: 0 }, 'estimated_agents'],
      ['estimated_agents above a million', { estimated_agents: 1_000_001 }, 'estimated_agents'],
      ['estimated_agents a fraction', { estimated_agents: 1.5 }, 'estimated_agents'],
      ['estimated_agents text', { estimated_agents: '12' }, 'estimated_agents'],
      ['estimated_agents missing', { estimated_agents: undefined }, 'estimated_agents'],
      ['deployment_model too long', { deployment_model: long(41) }, 'deployment_model'],
      ['deployment_model missing', { deployment_model: undefined }, 'deployment_model'],
      ['retention_period too long', { retention_period: long(41) }, 'retention_period'],
      ['retention_period missing', { retention_period: undefined }, 'retention_period'],
      ['privacy_consent missing', { privacy_consent: undefined }, 'privacy_consent'],
      ['privacy_consent not a boolean', { privacy_consent: 'true' }, 'privacy_consent'],
      ['tier too long', { tier: long(41) }, 'tier'],
      ['products not an array', { products: 'gateway' }, 'products'],
      ['products with an empty name', { products: [''] }, 'products.0'],
      ['products too many', { products: Array.from({ length: 21 }, (_, i) => `p${i}`) }, 'products'],
      ['message too long', { message: long(4001) }, 'message'],
      ['website too long', { website: long(201) }, 'website'],
    ];
    it.each(badQuotes)('422 when %s', async (_what, over, field) => {
      const count = await storedCount();
      expectValidation(await send('POST', '/public/pricing-quote', quote(over)), field);
      expect(await storedCount()).toBe(count);
    });

    it('accepts the bounds: 1 and 1 000 000 agents, empty optional text, no tier', async () => {
      for (const over of [
        { estimated_agents: 1, deployment_model: '', retention_period: '', tier: null, products: [] },
        { estimated_agents: 1_000_000, full_name: long(120), job_title: long(120), country: long(80), message: long(4000), tier: long(40) },
        { message: undefined, products: undefined, website: undefined, tier: undefined },
      ]) {
        const res = await send('POST', '/public/pricing-quote', quote(over));
        expect(res.statusCode, res.body).toBe(202);
      }
    });
  });

  describe('rate limit per client address', () => {
    it(`answers 429 with Retry-After after ${LIMIT} public requests a minute from one address, and not for another address`, async () => {
      const ip = '192.0.2.77';
      for (let i = 0; i < LIMIT; i++) expect((await send('GET', '/public/pricing', undefined, ip)).statusCode).toBe(200);
      const count = await storedCount();
      const refused = await send('POST', '/public/leads', lead(), ip);
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error.code).toBe('rate_limited');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect((await send('POST', '/public/pricing-quote', quote(), ip)).statusCode).toBe(429);
      expect(await storedCount()).toBe(count);
      expect((await send('POST', '/public/leads', lead(), '192.0.2.78')).statusCode).toBe(202);
    });
  });

  describe('staff access: GET /public-submissions and /public-submissions/export', () => {
    it('lists newest first, filters by kind and pages with a cursor', async () => {
      const all = (await staffList(operator, '?limit=200')).json();
      expect(all.next_cursor).toBeNull();
      const times = all.items.map((i: { created_at: string; id: string }) => i.created_at);
      expect([...times].sort().reverse()).toEqual(times);
      expect(new Set(all.items.map((i: { kind: string }) => i.kind))).toEqual(new Set(['lead', 'quote']));
      const quotes = (await staffList(operator, '?kind=quote&limit=200')).json().items;
      expect(quotes.every((i: { kind: string }) => i.kind === 'quote')).toBe(true);
      expect(quotes.length).toBe(all.items.filter((i: { kind: string }) => i.kind === 'quote').length);

      const first = (await staffList(operator, '?limit=2')).json();
      expect(first.items).toHaveLength(2);
      const second = (await staffList(operator, `?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`)).json();
      expect(second.items.map((i: { id: string }) => i.id)).toEqual(all.items.slice(2, 4).map((i: { id: string }) => i.id));
      // A cursor of the unfiltered list does not continue the filtered one.
      expect((await staffList(operator, `?kind=lead&cursor=${encodeURIComponent(first.next_cursor)}`)).json().error.code).toBe('invalid_cursor');
      expectValidation(await staffList(operator, '?kind=spam'), 'query.kind');
      expectValidation(await staffList(operator, '?limit=0'), 'query.limit');
    });

    it('exports CSV that parses, with formula cells written as text, and audits the export', async () => {
      // A second later than the others, so that it is the newest.
      clock.advance(1);
      await send('POST', '/public/leads', lead({ company: '=HYPERLINK("http://evil.example","x")', message: 'line one\nline "two", three' }));
      const res = await operator.get(api('/public-submissions/export?kind=lead'));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/csv/);
      expect(res.headers['content-disposition']).toMatch(/^attachment; filename="public-submissions-lead-\d{8}-\d{4}\.csv"$/);
      const rows = parseCsv(res.body);
      const header = rows[0]!;
      expect(header.slice(0, 6)).toEqual(['id', 'kind', 'created_at', 'name', 'email', 'company']);
      const listed = (await staffList(operator, '?kind=lead&limit=200')).json().items;
      expect(rows.length - 1).toBe(listed.length);
      const col = (name: string) => header.indexOf(name);
      const newest = rows[1]!;
      expect(newest[col('id')]).toBe(listed[0].id);
      expect(newest[col('company')]).toBe('\'=HYPERLINK("http://evil.example","x")');
      expect(newest[col('message')]).toBe('line one\nline "two", three');
      expect(newest[col('lead_kind')]).toBe('demo');
      expect(newest[col('consent_given')]).toBe('true');
      expect(rows.slice(1).every((r) => r[col('kind')] === 'lead')).toBe(true);

      const audit = (await operator.get(api('/audit?action=public_submission.export'))).json().items;
      expect(audit[0]).toMatchObject({ action: 'public_submission.export', outcome: 'success' });
      expect(JSON.stringify(audit[0])).not.toContain('evil.example');
    });

    it('answers 403 to a member of the operator organisation without tenant:manage', async () => {
      const viewer = await addMember(boot.app, (() => {
        const c = new Client(boot.app);
        for (const [k, v] of operator.cookies) c.cookies.set(k, v);
        return c;
      })(), ['security_admin']);
      const member = new Client(t.app);
      for (const [k, v] of viewer.client.cookies) member.cookies.set(k, v);
      expect((await staffList(member)).statusCode).toBe(403);
      expect((await member.get(api('/public-submissions/export'))).statusCode).toBe(403);
    });

    it("answers 404 to a customer organisation's administrator, and shows nothing of the submissions", async () => {
      const customer = await onboardAdmin(t.app, 'Customer Co');
      for (const path of ['/public-submissions', '/public-submissions?kind=lead', '/public-submissions/export']) {
        const res = await customer.client.get(api(path));
        expect(res.statusCode).toBe(404);
        expect(res.json().error.code).toBe('not_found');
        expect(res.body).not.toContain('Grace');
      }
    });

    it('answers 404 to everyone while no operator organisation is configured', async () => {
      const res = await staffList((() => {
        const c = new Client(boot.app);
        for (const [k, v] of operator.cookies) c.cookies.set(k, v);
        return c;
      })());
      expect(res.statusCode).toBe(404);
    });

    it('answers 401 without a session', async () => {
      expect((await t.app.inject({ method: 'GET', url: api('/public-submissions') })).statusCode).toBe(401);
    });
  });

  describe('a failing sales email', () => {
    it('loses no submission and logs the failure without the submitter\'s data', async () => {
      const closedPort = await freePort();
      const smtp = await startTestApp({
        clock,
        share: boot,
        env: { SALES_EMAIL: SALES, EMAIL_BACKEND: 'smtp', SMTP_HOST: '127.0.0.1', SMTP_PORT: String(closedPort), SMTP_STARTTLS: 'true' },
      });
      try {
        const count = await storedCount();
        const res = await smtp.app.inject({
          method: 'POST',
          url: api('/public/pricing-quote'),
          payload: quote({ full_name: 'Dorothy Vaughan', work_email: 'dorothy@fortran.example' }),
        });
        expect(res.statusCode).toBe(202);
        expect(await storedCount()).toBe(count + 1);
        const failure = smtp.logs.find((l) => l.includes('sales notification not sent'));
        expect(failure).toBeDefined();
        const all = smtp.logs.join('\n');
        expect(all).not.toContain('dorothy@fortran.example');
        expect(all).not.toContain('Dorothy');
      } finally {
        await smtp.close();
      }
    });
  });

  describe('settings', () => {
    it('refuses a sales address that is not an email and an operator organisation that is not a UUID', () => {
      expect(() => loadConfig({ SALES_EMAIL: 'sales-at-example' })).toThrow(ConfigError);
      expect(() => loadConfig({ SALES_ORG_ID: 'operator' })).toThrow(ConfigError);
      expect(() => loadConfig({ DOCS_URL: 'docs.example.com' })).toThrow(ConfigError);
      expect(loadConfig({ SALES_ORG_ID: operatorOrgId.toUpperCase() }).publicSite.salesOrgId).toBe(operatorOrgId);
    });

    it('refuses a plain-http documentation link in production, and accepts https', () => {
      const problems = (docs: string) => productionProblems(loadConfig({ ENVIRONMENT: 'production', DOCS_URL: docs }));
      expect(problems('http://docs.example.com')).toContain('DOCS_URL: must be an https URL in production');
      expect(problems('https://docs.example.com').some((p) => p.startsWith('DOCS_URL'))).toBe(false);
    });
  });

  describe('retention', () => {
    it(`hides submissions older than ${SUBMISSION_RETENTION_DAYS} days and deletes them when the next one arrives`, async () => {
      const before = await storedCount();
      expect(before).toBeGreaterThan(0);
      clock.advance((SUBMISSION_RETENTION_DAYS + 1) * 86_400);
      // A year on, the session has long expired: sign in again.
      operator = new Client(t.app);
      expect((await operator.post(api('/auth/dev-login'), { email: operatorEmail, tenant_id: operatorOrgId })).statusCode).toBe(200);
      expect((await staffList(operator)).json().items).toEqual([]);
      expect(await storedCount()).toBe(before);
      expect((await send('POST', '/public/leads', lead({ name: 'Next Year' }))).statusCode).toBe(202);
      expect(await storedCount()).toBe(1);
      expect((await staffList(operator)).json().items.map((i: { name: string }) => i.name)).toEqual(['Next Year']);
    });
  });
});
