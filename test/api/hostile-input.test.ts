import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Hostile input, as a client that wants a 500 would send it: NUL characters and lone UTF-16 surrogates in
 * strings and keys, JSON nested thousands deep, numbers beyond every range, wrong types, prototype keys,
 * very long and odd Unicode strings, in the body, the query string and the path of every operation the OpenAPI
 * document lists. Whatever is sent, the answer is never a 5xx, every refusal is the spec's envelope, and a NUL or
 * lone surrogate is never accepted (docs/decisions.md, "One input boundary").
 */

/** Runs per write operation and per read operation; HOSTILE_RUNS raises them for a longer hunt. */
const WRITE_RUNS = Number(process.env.HOSTILE_RUNS ?? 50);
const READ_RUNS = Math.max(4, Math.round(WRITE_RUNS / 3));
/**
 * A request that takes longer than this is a failure too: input that costs the server seconds of CPU
 * (a regular expression that backtracks on a long string) lets one client stall every other.
 */
const SLOW_MS = 5000;

type Json = any;
interface Operation {
  method: string;
  path: string;
  caller: string;
  op: Json;
}

const WRITE_METHODS = new Set(['post', 'patch', 'put', 'delete']);
const RAW = '__hostile_raw_text__';
const CORRELATION_CHARS = /^[A-Za-z0-9._-]{8,100}$/;

// ---------------------------------------------------------------------------------------------------------------
// Hostile values

const POISON_CHARS = ['\u0000', '\ud800', '\udbff', '\udc00', '\udfff'];
/** Strings PostgreSQL refuses to store: a NUL, or half of a surrogate pair. */
const poisonString = fc.oneof(
  fc.constantFrom('\u0000', 'a\u0000b', 'x\ud800', '\udfff', 'a\ud83d', '\ud800\u0000', 'note\u0000'),
  fc
    .tuple(fc.string({ maxLength: 8 }), fc.constantFrom(...POISON_CHARS), fc.string({ maxLength: 8 }))
    .map(([a, b, c]) => a + b + c),
);
/** Strings that are legal but odd: long, invisible, combining, astral, injection-shaped. */
const oddString = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u202e\u200b\ufeff',
    'e\u0301\u0301\u0301',
    '\uffff\ufffe',
    '\u{1F3F3}\uFE0F\u200D\u{1F308}',
    '\u{1D54F}'.repeat(300),
    "'; drop table agents; --",
    '%00',
    '\\u0000',
    '../../etc/passwd',
    '0000-01-01T00:00:00Z',
    '9999-12-31T23:59:59Z',
    '1e309',
    'null',
  ),
  fc.integer({ min: 101, max: 5000 }).map((n) => 'a'.repeat(n)),
  fc.constant('x'.repeat(300_000)),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
);

const nestArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
const nestObjects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

type Hostile =
  | { kind: 'value'; value: unknown }
  | { kind: 'raw'; text: string }
  | { kind: 'key'; key: string; value: unknown };

const hostileValue: fc.Arbitrary<Hostile> = fc.oneof(
  { weight: 5, arbitrary: poisonString.map((value): Hostile => ({ kind: 'value', value })) },
  {
    weight: 2,
    arbitrary: fc.tuple(poisonString, fc.jsonValue({ maxDepth: 1 })).map(([key, value]): Hostile => ({ kind: 'key', key, value })),
  },
  { weight: 2, arbitrary: oddString.map((value): Hostile => ({ kind: 'value', value })) },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom<unknown>(null, true, false, 0, -1, 1.5, -0, 1e308, -1e308, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 2 ** 63, [], {}, [null], { '': '' }, ['x'], { a: { b: { c: 'd' } } })
      .map((value): Hostile => ({ kind: 'value', value })),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('1e999', '-1e999', '123456789012345678901234567890123', '1E400', '0.00000000000000000000000000000000001', '-0.0', `[${'1,'.repeat(50_000)}1]`)
      .map((text): Hostile => ({ kind: 'raw', text })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom(10, 62, 66, 200, 5000, 50_000), fc.boolean())
      .map(([n, arrays]): Hostile => ({ kind: 'raw', text: arrays ? nestArrays(n) : nestObjects(n) })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__'),
        fc.constantFrom<unknown>({ polluted: true }, { prototype: { polluted: true } }, 'x', 1, null),
      )
      .map(([key, value]): Hostile => ({ kind: 'key', key, value })),
  },
);

/** Percent-encodes a string as its bytes would travel, lone surrogates as their three (WTF-8) bytes. */
function encodeComponent(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const next = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const hex = (b: number) => `%${b.toString(16).toUpperCase()}`;
      out += hex(0xe0 | (c >> 12)) + hex(0x80 | ((c >> 6) & 0x3f)) + hex(0x80 | (c & 0x3f));
    } else {
      out += encodeURIComponent(s[i]!);
    }
  }
  return out;
}

/** An encoded path or query value: hostile, with whether it carries a NUL once decoded. */
interface Encoded {
  text: string;
  poison: boolean;
}
/** Whether a percent-encoded value decodes to a NUL; one that is not valid UTF-8 is kept as it was sent, or refused. */
function decodesToNul(text: string): boolean {
  try {
    return decodeURIComponent(text).includes('\u0000');
  } catch {
    return false;
  }
}
const hostileComponent: fc.Arbitrary<Encoded> = fc
  .oneof(
    fc.constantFrom('%00', 'a%00b', '%ED%A0%80', '..', '%2e%2e', 'x%2Fy', '%F0%9D%95%8F', '-1', '0', '1e309', '99999999999999999999999', '%20', '%C0%80', '%', '%zz', '', 'null'),
    fc.integer({ min: 90, max: 400 }).map((n) => 'a'.repeat(n)),
    poisonString.map(encodeComponent),
    oddString.filter((s) => s.length < 2000).map(encodeComponent),
  )
  .map((text) => ({ text, poison: decodesToNul(text) }));

// ---------------------------------------------------------------------------------------------------------------
// Plausible values from the document's JSON Schemas, so that a request gets past validation to the database
// with one hostile part in it

function generators(doc: Json, idPool: string[]) {
  const deref = (s: Json): Json => {
    let out = s;
    while (out && typeof out === 'object' && typeof out.$ref === 'string') {
      out = out.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce((node: Json, key: string) => node?.[key], doc);
    }
    return out;
  };
  const INT32 = 2 ** 31 - 1;
  const clampInt = (n: number) => Math.max(-INT32, Math.min(INT32, n));

  const stringArb = (s: Json): fc.Arbitrary<string> => {
    const min = s.minLength ?? 0;
    const max = Math.min(s.maxLength ?? 40, min + 40);
    if (s.format === 'uuid') return fc.oneof(fc.constantFrom(...idPool), fc.uuid());
    if (s.format === 'email') return fc.stringMatching(/^[a-z]{1,10}$/).map((x) => `${x}@example.com`);
    if (s.format === 'date-time') {
      return fc.date({ min: new Date('2020-01-01'), max: new Date('2040-01-01'), noInvalidDate: true }).map((d) => d.toISOString());
    }
    if (s.format === 'uri' || s.format === 'url') return fc.constantFrom('https://example.com/a', 'https://api.example.org/v1');
    if (typeof s.pattern === 'string') {
      try {
        return fc.stringMatching(new RegExp(s.pattern), { size: 'small' });
      } catch {
        // a pattern fast-check cannot generate from: plain strings, refused or not
      }
    }
    return fc.string({ minLength: min, maxLength: Math.max(min, max) });
  };

  const arb = (schema: Json, depth = 0): fc.Arbitrary<unknown> => {
    const s = deref(schema);
    if (!s || typeof s !== 'object' || depth > 6) return fc.jsonValue({ maxDepth: 1 });
    if (s.const !== undefined) return fc.constant(s.const);
    if (Array.isArray(s.enum) && s.enum.length > 0) return fc.constantFrom(...s.enum);
    const alternatives = s.anyOf ?? s.oneOf;
    if (Array.isArray(alternatives)) return fc.oneof(...alternatives.map((a: Json) => arb(a, depth + 1)));
    if (Array.isArray(s.allOf)) return arb(Object.assign({}, ...s.allOf.map(deref)), depth + 1);
    const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.length > 1) return fc.oneof(...types.map((type) => arb({ ...s, type }, depth + 1)));
    switch (types[0] ?? (s.properties ? 'object' : undefined)) {
      case 'null':
        return fc.constant(null);
      case 'boolean':
        return fc.boolean();
      case 'integer': {
        const min = clampInt(s.minimum ?? (typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : 0));
        const max = clampInt(s.maximum ?? (typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum - 1 : min + 1000));
        return fc.integer({ min, max: Math.max(min, max) });
      }
      case 'number': {
        const min = s.minimum ?? s.exclusiveMinimum ?? 0;
        const max = s.maximum ?? s.exclusiveMaximum ?? min + 1000;
        return fc.double({ min, max: Math.max(min, max), noNaN: true, noDefaultInfinity: true });
      }
      case 'string':
        return stringArb(s);
      case 'array': {
        const min = s.minItems ?? 0;
        return fc.array(arb(s.items ?? {}, depth + 1), { minLength: min, maxLength: Math.min(s.maxItems ?? 3, min + 3) });
      }
      case 'object': {
        const props: Record<string, Json> = s.properties ?? {};
        const keys = Object.keys(props);
        if (keys.length === 0) {
          return fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.boolean()), {
            maxKeys: 3,
          });
        }
        const required = ((s.required ?? []) as string[]).filter((k) => keys.includes(k));
        return fc.record(Object.fromEntries(keys.map((k) => [k, arb(props[k], depth + 1)])), { requiredKeys: required });
      }
    }
    return fc.jsonValue({ maxDepth: 2 });
  };
  return { arb, deref };
}

/** Every place in a value where a hostile part can go: the root, each member and each element. */
function places(v: unknown, at: Array<string | number> = [], out: Array<Array<string | number>> = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => places(x, [...at, i], out));
  else if (v && typeof v === 'object') for (const k of Object.keys(v)) places((v as Record<string, unknown>)[k], [...at, k], out);
  return out;
}

/** The body text: the plausible value with one hostile part at one place. */
function hostileBody(base: unknown, index: number, hostile: Hostile): string {
  const spots = places(base);
  const at = spots[index % spots.length]!;
  const replacement = (old: unknown): unknown => {
    if (hostile.kind === 'value') return hostile.value;
    if (hostile.kind === 'raw') return RAW;
    const obj: Record<string, unknown> = old && typeof old === 'object' && !Array.isArray(old) ? { ...(old as object) } : {};
    // defineProperty, so that "__proto__" becomes a key of the JSON text rather than the object's prototype.
    Object.defineProperty(obj, hostile.key, { value: hostile.value, enumerable: true, writable: true, configurable: true });
    return obj;
  };
  let value: unknown;
  if (at.length === 0) value = replacement(base);
  else {
    value = structuredClone(base);
    let node = value as Record<string | number, unknown>;
    for (const k of at.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
    const last = at[at.length - 1]!;
    node[last] = replacement(node[last]);
  }
  const text = JSON.stringify(value) ?? 'null';
  return hostile.kind === 'raw' ? text.replace(`"${RAW}"`, () => hostile.text) : text;
}

/** Whether a parsed JSON value holds a NUL or a lone surrogate, in a string or a key. */
function poisoned(text: string): boolean {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return false;
  }
  const bad = (s: string) => /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string' && bad(v)) return true;
    if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (bad(k)) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

/** The spec's envelope on every refusal, naming the correlation ID of the response header; never a 5xx. */
function problemWith(res: LightMyRequestResponse, mustRefuse: boolean): string | undefined {
  if (res.statusCode >= 500) return `answered ${res.statusCode}: ${res.body.slice(0, 300)}`;
  if (mustRefuse && res.statusCode < 400) return `accepted a NUL or a lone surrogate with ${res.statusCode}`;
  if (res.statusCode < 300) return undefined;
  let body: Json;
  try {
    body = JSON.parse(res.body);
  } catch {
    return `answered ${res.statusCode} with a body that is not JSON: ${res.body.slice(0, 200)}`;
  }
  const e = body?.error;
  const keys = e && typeof e === 'object' ? Object.keys(e).sort().join(',') : '';
  if (Object.keys(body ?? {}).join(',') !== 'error' || keys !== 'code,correlation_id,details,message') {
    return `answered ${res.statusCode} outside the envelope: ${res.body.slice(0, 200)}`;
  }
  if (typeof e.code !== 'string' || typeof e.message !== 'string' || e.message.length === 0) return `bad envelope: ${res.body.slice(0, 200)}`;
  if (!CORRELATION_CHARS.test(e.correlation_id) || e.correlation_id !== res.headers['x-correlation-id']) {
    return `correlation ID ${e.correlation_id} does not match the header ${String(res.headers['x-correlation-id'])}`;
  }
  return undefined;
}

describe('hostile input', () => {
  let t: TestApp;
  let doc: Json;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let member: Awaited<ReturnType<typeof addMember>>;
  let agentToken: string;
  const fixtures: Record<string, string> = {};

  const cookieHeaders = (c: Client): Record<string, string> => ({
    cookie: [...c.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
    ...(c.csrf ? { 'x-csrf-token': c.csrf } : {}),
  });

  /** Who calls: the organisation's administrator, the agent, nobody; a throwaway session where the call ends it. */
  async function authFor(op: Operation): Promise<Record<string, string>> {
    switch (op.caller) {
      case 'public':
      case 'client':
        return {};
      case 'agent':
        return { authorization: `Bearer ${agentToken}` };
      case 'onboarding': {
        const c = new Client(t.app);
        await c.post(api('/auth/dev-login'), { email: `onboard-${randomUUID().slice(0, 8)}@example.com` });
        return cookieHeaders(c);
      }
      case 'signed in':
        if (op.path.startsWith('/auth/')) {
          const c = new Client(t.app);
          await c.post(api('/auth/dev-login'), { email: member.email });
          return cookieHeaders(c);
        }
        return cookieHeaders(admin.client);
      default:
        return cookieHeaders(admin.client);
    }
  }

  async function exchange(clientId: string, clientSecret: string): Promise<string> {
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token;
  }

  beforeAll(async () => {
    const many = '1000000';
    t = await startTestApp({
      env: {
        RATE_LIMIT_PERSON_PER_MINUTE: many,
        RATE_LIMIT_SIGNIN_PER_MINUTE: many,
        RATE_LIMIT_PUBLIC_PER_MINUTE: many,
        RATE_LIMIT_GATEWAY_PER_MINUTE: many,
        RATE_LIMIT_TOKEN_PER_MINUTE: many,
        RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: many,
        LOG_LEVEL: 'warn',
      },
    });
    doc = t.app.swagger();
    admin = await onboardAdmin(t.app, 'Hostile Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    member = await addMember(t.app, admin.client, ['viewer']);
    const ok = async (res: Promise<LightMyRequestResponse>) => {
      const r = await res;
      expect(r.statusCode, r.body).toBeLessThan(300);
      return r.json();
    };
    const a = admin.client;

    // The caller of POST /actions, kept apart from the agent the other operations suspend and revoke.
    const caller = await ok(a.post(api('/agents'), { name: 'Hostile caller' }));
    const callerIdentity = await ok(a.post(api(`/agents/${caller.id}/identities`)));
    agentToken = await exchange(callerIdentity.client_id, callerIdentity.client_secret);

    const tools = (await ok(a.get(api('/tools')))).items as Array<{ id: string; tool_key: string }>;
    const lookup = tools.find((x) => x.tool_key === 'crm.lookup_customer') ?? tools[0]!;
    await ok(a.post(api(`/agents/${caller.id}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'], constraints: {} }));

    const victim = await ok(a.post(api('/agents'), { name: 'Hostile target' }));
    const identity = await ok(a.post(api(`/agents/${victim.id}/identities`)));
    const binding = await ok(a.post(api(`/agents/${victim.id}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'], constraints: {} }));
    const delegation = await ok(a.post(api(`/agents/${victim.id}/delegations`), { principal_ref: 'user:ada@example.com', display_name: 'Ada', scopes: ['x'] }));
    const sa = await ok(a.post(api('/service-accounts'), { name: 'hostile-sa' }));
    const server = await ok(a.post(api('/mcp-servers'), { name: 'Files', endpoint: 'https://mcp.example.com/files' }));
    const model = await ok(a.post(api('/models'), { provider: 'vendor-a', model_name: 'large-1' }));
    const credential = await ok(a.post(api('/resources/credentials'), { name: 'Files key', provider: 'vault', secret_path: 'kv/files' }));
    const policy = await ok(
      a.post(api('/policies'), {
        key: 'hostile-policy',
        name: 'Hostile policy',
        rules: [{ id: 'r1', effect: 'deny', reason_code: 'HOSTILE_RULE', conditions: [{ field: 'tool.key', op: 'eq', value: 'nothing.here' }] }],
      }),
    );
    const submitted = await t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': `fixture-${randomUUID()}` },
      payload: { tool: lookup.tool_key, target: 'crm://customers/42', parameters: { customer_id: '42' } },
    });
    expect(submitted.statusCode, submitted.body).toBe(200);
    const notifications = (await ok(a.get(api('/notifications')))).items as Array<{ id: string }>;
    const approvals = (await ok(a.get(api('/approvals')))).items as Array<{ id: string }>;

    Object.assign(fixtures, {
      user_id: member.userId,
      notification_id: notifications[0]?.id ?? randomUUID(),
      agent_id: victim.id,
      identity_id: identity.id,
      binding_id: binding.id,
      delegation_id: delegation.id,
      service_account_id: sa.id,
      server_id: server.id,
      model_id: model.id,
      credential_id: credential.id,
      tool_id: lookup.id,
      action_id: submitted.json().action.id,
      approval_id: approvals[0]?.id ?? randomUUID(),
      policy_id: policy.id,
      evidence_id: randomUUID(),
      number: '1',
    });
  }, 120_000);
  afterAll(async () => t?.close());

  function operations(filter: (method: string) => boolean): Operation[] {
    const ops: Operation[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const [method, op] of Object.entries(item as Record<string, Json>)) {
        if (filter(method)) ops.push({ method: method.toUpperCase(), path, caller: op['x-tollgate-caller'], op });
      }
    }
    return ops;
  }

  /** One hostile request for an operation: a plausible body, path and query with one or more hostile parts. */
  function requestArb(o: Operation, withBody: boolean) {
    const { arb, deref } = generators(doc, Object.values(fixtures));
    const params = ((o.op.parameters ?? []) as Json[]).map(deref);
    const pathParams = params.filter((p) => p.in === 'path');
    const queryParams = params.filter((p) => p.in === 'query');
    const bodySchema = o.op.requestBody?.content?.['application/json']?.schema;

    const component = (name: string, fallback: fc.Arbitrary<string>) =>
      fc.oneof(
        { weight: 3, arbitrary: fallback.map((text): Encoded => ({ text, poison: false })) },
        { weight: 1, arbitrary: hostileComponent },
      ).map((e) => ({ name, ...e }));
    const pathArb = fc.tuple(...pathParams.map((p) => component(p.name, fc.constant(encodeURIComponent(fixtures[p.name] ?? randomUUID())))));
    const queryArb = fc.tuple(
      ...queryParams.map((p) =>
        fc.option(component(p.name, arb(p.schema ?? {}).map((v) => encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v) ?? ''))), {
          nil: undefined,
        }),
      ),
      fc.option(component('unexpected', fc.constant('x')), { nil: undefined }),
    );
    const bodyArb = withBody
      ? fc.option(fc.tuple(bodySchema ? arb(bodySchema) : fc.jsonValue({ maxDepth: 2 }), fc.nat(), hostileValue), {
          nil: undefined,
          freq: bodySchema ? 8 : 2,
        })
      : fc.constant(undefined);
    const ifMatch = fc.constantFrom(undefined, '1', '"1"', 'W/"1"', '*', 'garbage', '99999999999999999999');
    return fc.record({ path: pathArb, query: queryArb, body: bodyArb, ifMatch });
  }

  async function runProperty(o: Operation, numRuns: number, withBody: boolean): Promise<string | undefined> {
    const property = fc.asyncProperty(requestArb(o, withBody), async (r) => {
      let url = o.path;
      for (const p of r.path) url = url.replace(`{${p.name}}`, p.text);
      const query = r.query.filter((q) => q !== undefined).map((q) => `${q.name}=${q.text}`);
      if (query.length > 0) url += `?${query.join('&')}`;
      const body = r.body ? hostileBody(r.body[0], r.body[1], r.body[2]) : undefined;
      const headers: Record<string, string> = { ...(await authFor(o)) };
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (r.ifMatch) headers['if-match'] = r.ifMatch;
      for (const p of (o.op.parameters ?? []) as Json[]) {
        if (p.in === 'header' && p.name === 'idempotency-key') headers['idempotency-key'] = `hostile-${randomUUID()}`;
      }
      const mustRefuse = r.path.some((p) => p.poison) || r.query.some((q) => q?.poison) || (body !== undefined && poisoned(body));
      const started = performance.now();
      const res = await t.app.inject({ method: o.method as never, url: api(url), headers, ...(body !== undefined ? { payload: body } : {}) });
      const ms = performance.now() - started;
      const problem = problemWith(res, mustRefuse) ?? (ms > SLOW_MS ? `took ${Math.round(ms)} ms` : undefined);
      if (problem) throw new Error(`${o.method} ${url.slice(0, 200)} body ${body?.slice(0, 200)}: ${problem}`);
    });
    const details = await fc.check(property, { numRuns, interruptAfterTimeLimit: 60_000 });
    if (!details.failed) return undefined;
    return `${o.method} ${o.path} (after ${details.numRuns} runs, seed ${details.seed}): ${(details.errorInstance as Error | undefined)?.message ?? 'failed'}`;
  }

  describe('the input boundary', () => {
    const submit = (payload: string | object) =>
      t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': `boundary-${randomUUID()}`, 'content-type': 'application/json' },
        payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
      });
    const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42' };
    const nested = (levels: number): unknown => (levels === 0 ? 'leaf' : { a: nested(levels - 1) });
    const detailOf = (res: LightMyRequestResponse, field: string) =>
      (res.json().error.details as Array<{ field: string; message: string; code?: string }>).find((d) => d.field === field);

    it('refuses a NUL in a JSON value with 422 naming the field, before anything is recorded', async () => {
      const before = (await admin.client.get(api('/actions?limit=200'))).json().items.length;
      const res = await submit({ ...lookup, parameters: { customer_id: '42', note: 'a\u0000b' } });
      expectValidation(res, 'parameters.note');
      expect(detailOf(res, 'parameters.note')).toMatchObject({ code: 'invalid_characters', message: expect.stringMatching(/NUL/) });
      expect((await admin.client.get(api('/actions?limit=200'))).json().items.length).toBe(before);
    });

    it('refuses a lone surrogate in a text field, and in an array element', async () => {
      const res = await admin.client.post(api('/agents'), { name: 'Bad \ud800 name', tags: ['ok', 'x\udc00'] });
      expectValidation(res, 'name');
      expectValidation(res, 'tags.1');
      expect(detailOf(res, 'name')!.message).toMatch(/surrogate/);
      // A pair is a character like any other.
      expect((await admin.client.post(api('/agents'), { name: 'Astral \ud835\udd4f agent' })).statusCode).toBe(201);
    });

    it('refuses a key with a NUL, naming it with the NUL written out', async () => {
      const res = await submit({ ...lookup, parameters: { 'a\u0000b': 1 } });
      expectValidation(res, 'parameters.a\\u0000b');
      expect(detailOf(res, 'parameters.a\\u0000b')!.field).not.toContain('\u0000');
    });

    it('refuses a NUL in the query string and in a path parameter', async () => {
      expectValidation(await admin.client.get(api('/agents?q=a%00b')), 'query.q');
      const path = await admin.client.patch(api('/agents/a%00b'), { name: 'Renamed' });
      expectValidation(path, 'path.agent_id');
      expect(detailOf(path, 'path.agent_id')!.code).toBe('invalid_characters');
    });

    it('refuses a NUL in token exchange, without signing in, rather than looking it up', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: 'tg_\u0000', client_secret: 'x' },
      });
      expectValidation(res, 'client_id');
    });

    it('refuses a number too large for a double (JSON.parse makes it Infinity) with 422 naming it', async () => {
      const res = await submit('{"tool":"crm.lookup_customer","target":"crm://x","parameters":{"amount":1e999}}');
      expectValidation(res, 'parameters.amount');
      expect(detailOf(res, 'parameters.amount')!.code).toBe('out_of_range');
    });

    it('takes a body 64 levels deep and refuses 65 with 422 naming the body', async () => {
      // The body is the first level, parameters the second.
      expect((await submit({ ...lookup, parameters: nested(63) })).statusCode).toBe(200);
      expectValidation(await submit({ ...lookup, parameters: nested(64) }), 'body');
    });

    it('refuses JSON nested 300,000 deep while parsing, fast', async () => {
      const text = `{"tool":"crm.lookup_customer","target":"crm://x","parameters":${nestArrays(300_000)}}`;
      const started = performance.now();
      const res = await submit(text);
      const ms = performance.now() - started;
      expectValidation(res, 'body');
      expect(ms).toBeLessThan(500);
    });

    it('answers a long string in parameters within two seconds (nothing backtracks on it)', async () => {
      // 200,000 characters that look like the start of an e-mail address: what redaction scans.
      const started = performance.now();
      const res = await submit({ ...lookup, parameters: { customer_id: '42', note: 'x'.repeat(200_000) } });
      expect(res.statusCode).toBe(200);
      expect(performance.now() - started).toBeLessThan(2000);
    });

    it('counts brackets inside strings as text, not nesting', async () => {
      const res = await submit({ ...lookup, parameters: { note: '['.repeat(500) + '{'.repeat(500) + '\\"[[[' } });
      expect(res.statusCode).toBe(200);
    });

    it("keeps fastify's prototype-poisoning protection: __proto__ and constructor.prototype answer 400", async () => {
      for (const text of [
        '{"tool":"crm.lookup_customer","target":"crm://x","parameters":{"__proto__":{"admin":true}}}',
        '{"tool":"crm.lookup_customer","target":"crm://x","parameters":{"constructor":{"prototype":{"admin":true}}}}',
      ]) {
        const res = await submit(text);
        expect(res.statusCode).toBe(400);
        expect(res.json().error.code).toBe('bad_request');
      }
    });
  });

  it('the document lists the write operations this test throws at', () => {
    expect(operations((m) => WRITE_METHODS.has(m)).length).toBeGreaterThan(40);
  });

  it(
    'no write operation answers 5xx, and every refusal is the envelope, whatever the body, query and path hold',
    async () => {
      const failures: string[] = [];
      for (const o of operations((m) => WRITE_METHODS.has(m))) {
        const failure = await runProperty(o, WRITE_RUNS, true);
        if (failure) failures.push(failure);
      }
      expect(failures).toEqual([]);
    },
    300_000,
  );

  it(
    'no read operation answers 5xx for a hostile query or path',
    async () => {
      const failures: string[] = [];
      for (const o of operations((m) => m === 'get')) {
        if (!(o.op.parameters ?? []).some((p: Json) => p.in === 'path' || p.in === 'query')) continue;
        const failure = await runProperty(o, READ_RUNS, false);
        if (failure) failures.push(failure);
      }
      expect(failures).toEqual([]);
    },
    300_000,
  );
});
