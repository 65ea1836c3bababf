import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundError, OutboundHttp, type OutboundErrorCode, type OutboundLookup } from '../../api/platform/outbound.js';
import { startStandin, type Standin } from '../support/standin.js';
import { testTls } from '../support/tls.js';

/**
 * The SSRF trick table (issue 15, "Outbound safety"): every spelling of a loopback, private, link-local,
 * CGNAT, multicast, unspecified or metadata address, names that resolve to one, and DNS rebinding. A real
 * server on 127.0.0.1 counts the connections it accepts; the fake resolver answers loopback for any name it
 * does not know (the worst case). Every row must be refused and, at the end, no connection reached it.
 */

/** The fake DNS: name -> addresses; any other name resolves to 127.0.0.1. */
const DNS: Record<string, string[]> = {
  'loopback.example.test': ['127.0.0.1'],
  'loopback.example.test.': ['127.0.0.1'],
  'v6-loopback.example.test': ['::1'],
  'mapped-loopback.example.test': ['::ffff:127.0.0.1'],
  'metadata.example.test': ['169.254.169.254'],
  'zero.example.test': ['0.0.0.0'],
  'public-then-private.example.test': ['93.184.216.34', '127.0.0.1'],
  'private-then-public.example.test': ['10.1.2.3', '93.184.216.34'],
  'public.example.test': ['93.184.216.34'],
};
const fakeLookup: OutboundLookup = async (name) => (DNS[name] ?? ['127.0.0.1']).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

let victim: Standin;
let P: number;

beforeAll(async () => {
  victim = await startStandin({ handler: (_req, res) => void res.end('you reached loopback') });
  P = victim.port;
});

afterAll(async () => {
  await victim.close();
});

async function failure(promise: Promise<unknown>): Promise<OutboundError> {
  const outcome = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(outcome).toBeInstanceOf(OutboundError);
  return outcome as OutboundError;
}

describe('the SSRF trick table: all refused, nothing reaches loopback', () => {
  const client = new OutboundHttp({ lookup: fakeLookup, connectTimeoutMs: 500, timeoutMs: 2000 });
  afterAll(() => client.close());

  const rows: [string, (port: number) => string, OutboundErrorCode?][] = [
    ['loopback literal', (p) => `http://127.0.0.1:${p}/`],
    ['loopback over https', (p) => `https://127.0.0.1:${p}/`],
    ['localhost', (p) => `http://localhost:${p}/`],
    ['LOCALHOST in capitals', (p) => `http://LOCALHOST:${p}/`],
    ['percent-encoded localhost', (p) => `http://%6c%6fcalhost:${p}/`],
    ['short IPv4 127.1', (p) => `http://127.1:${p}/`],
    ['decimal 2130706433', (p) => `http://2130706433:${p}/`],
    ['hex 0x7f000001', (p) => `http://0x7f000001:${p}/`],
    ['octal 0177.0.0.1', (p) => `http://0177.0.0.1:${p}/`],
    ['octal whole 017700000001', (p) => `http://017700000001:${p}/`],
    ['hex first octet 0x7f.0.0.1', (p) => `http://0x7f.0.0.1:${p}/`],
    ['hex short 0x7f.1', (p) => `http://0x7f.1:${p}/`],
    ['IPv6 loopback [::1]', (p) => `http://[::1]:${p}/`],
    ['IPv6 loopback in full', (p) => `http://[0:0:0:0:0:0:0:1]:${p}/`],
    ['IPv4-mapped [::ffff:127.0.0.1]', (p) => `http://[::ffff:127.0.0.1]:${p}/`],
    ['IPv4-mapped in hex [::ffff:7f00:1]', (p) => `http://[::ffff:7f00:1]:${p}/`],
    ['IPv4-mapped in full hex', (p) => `http://[0:0:0:0:0:ffff:7f00:1]:${p}/`],
    ['IPv4-mapped metadata in hex', () => 'http://[::ffff:a9fe:a9fe]/latest/meta-data/'],
    ['IPv4-compatible [::127.0.0.1]', (p) => `http://[::127.0.0.1]:${p}/`],
    ['NAT64 64:ff9b::7f00:1', (p) => `http://[64:ff9b::7f00:1]:${p}/`],
    ['6to4 2002:7f00:1::', (p) => `http://[2002:7f00:1::]:${p}/`],
    ['unspecified 0.0.0.0', (p) => `http://0.0.0.0:${p}/`],
    ['unspecified as 0', (p) => `http://0:${p}/`],
    ['unspecified IPv6 [::]', (p) => `http://[::]:${p}/`],
    ['private 10.0.0.1', (p) => `http://10.0.0.1:${p}/`],
    ['private 172.16.0.1', (p) => `http://172.16.0.1:${p}/`],
    ['private 192.168.1.1', (p) => `http://192.168.1.1:${p}/`],
    ['CGNAT 100.64.0.1', (p) => `http://100.64.0.1:${p}/`],
    ['CGNAT top 100.127.255.254', (p) => `http://100.127.255.254:${p}/`],
    ['metadata 169.254.169.254', () => 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'],
    ['metadata in decimal 2852039166', () => 'http://2852039166/latest/meta-data/'],
    ['link-local [fe80::1]', (p) => `http://[fe80::1]:${p}/`],
    ['unique local [fc00::1]', (p) => `http://[fc00::1]:${p}/`],
    ['AWS metadata over IPv6 [fd00:ec2::254]', () => 'http://[fd00:ec2::254]/latest/meta-data/'],
    ['multicast 224.0.0.1', (p) => `http://224.0.0.1:${p}/`],
    ['IPv6 multicast [ff02::1]', (p) => `http://[ff02::1]:${p}/`],
    ['broadcast 255.255.255.255', (p) => `http://255.255.255.255:${p}/`],
    ['metadata.google.internal', () => 'http://metadata.google.internal/computeMetadata/v1/'],
    ['metadata.google.internal. (trailing dot)', () => 'http://metadata.google.internal./computeMetadata/v1/'],
    ['foo.localhost', (p) => `http://foo.localhost:${p}/`],
    ['localhost. (trailing dot)', (p) => `http://localhost.:${p}/`],
    ['127.0.0.1. (trailing dot)', (p) => `http://127.0.0.1.:${p}/`],
    ['a name resolving to 127.0.0.1', (p) => `http://loopback.example.test:${p}/`],
    ['the same name with a trailing dot', (p) => `http://loopback.example.test.:${p}/`],
    ['a name resolving to ::1', (p) => `http://v6-loopback.example.test:${p}/`],
    ['a name resolving to ::ffff:127.0.0.1', (p) => `http://mapped-loopback.example.test:${p}/`],
    ['a name resolving to the metadata address', (p) => `http://metadata.example.test:${p}/`],
    ['a name resolving to 0.0.0.0', (p) => `http://zero.example.test:${p}/`],
    ['a name resolving to one public and one loopback address', (p) => `http://public-then-private.example.test:${p}/`],
    ['a name resolving to one private and one public address', (p) => `http://private-then-public.example.test:${p}/`],
    ['user info before a loopback host', (p) => `http://user@127.0.0.1:${p}/`],
    ['a public-looking user info before a loopback host', (p) => `http://public.example.test@127.0.0.1:${p}/`],
    ['a public host carrying credentials', () => 'http://user:pass@public.example.test/', 'bad_url'],
    ['a non-http scheme', () => 'file:///etc/passwd', 'bad_url'],
    ['gopher', (p) => `gopher://127.0.0.1:${p}/`, 'bad_url'],
  ];

  it.each(rows)('refuses %s', async (_name, url, code = 'refused_host') => {
    const e = await failure(client.request(url(P)));
    expect(e.code).toBe(code);
  });

  it(`has at least 30 rows (${rows.length})`, () => {
    expect(rows.length).toBeGreaterThanOrEqual(30);
  });

  it('a refusal names the host and never the path, query or headers', async () => {
    const e = await failure(
      client.request(`http://127.0.0.1:${P}/v1/keys?api_key=sk-query-secret`, { headers: { authorization: 'Bearer sk-header-secret' } }),
    );
    expect(e.message).toBe('127.0.0.1 is a loopback host; Tollgate calls only public hosts');
    expect(e.message).not.toMatch(/sk-|api_key|\/v1/);
  });

  it('DNS rebinding: the connection goes to the address checked, and a later answer of loopback is refused', async () => {
    // The "public" host is played by a stand-in on 127.0.0.2, allowed as if it were public; 127.0.0.1 is not.
    const publicHost = await startStandin({ host: '127.0.0.2', handler: (_req, res) => void res.end('public answer') });
    const answers = ['127.0.0.2', '127.0.0.1', '127.0.0.1'];
    const asked: string[] = [];
    const rebinding: OutboundLookup = async (name) => {
      asked.push(name);
      const address = answers.shift() ?? '127.0.0.1';
      return [{ address, family: 4 }];
    };
    const rebound = new OutboundHttp({ lookup: rebinding, allowedCidrs: ['127.0.0.2/32'] });
    try {
      const first = await rebound.request(`http://rebind.example.test:${publicHost.port}/`, { headers: { connection: 'close' } });
      expect(first.body).toBe('public answer');
      expect(asked).toEqual(['rebind.example.test']); // resolved once for the connection, and connected there
      // The next connection resolves again: now to loopback, which is refused before any connection.
      const e = await failure(rebound.request(`http://rebind.example.test:${P}/`));
      expect(e.code).toBe('refused_host');
      expect(e.message).toContain('resolves to a loopback host (127.0.0.1)');
      expect(publicHost.connections).toBe(1);
    } finally {
      await rebound.close();
      await publicHost.close();
    }
  });

  it('DNS rebinding against an unreachable public address never falls back to loopback', async () => {
    const answers = ['192.0.2.10', '127.0.0.1'];
    let asked = 0;
    const rebinding: OutboundLookup = async () => {
      asked++;
      return [{ address: answers.shift() ?? '127.0.0.1', family: 4 }];
    };
    const rebound = new OutboundHttp({ lookup: rebinding, connectTimeoutMs: 300, timeoutMs: 1000 });
    try {
      const e = await failure(rebound.request(`http://rebind.example.test:${P}/`));
      expect(['timeout', 'connect_failed']).toContain(e.code);
      expect(asked).toBe(1);
    } finally {
      await rebound.close();
    }
  });

  it('nothing reached the loopback server', () => {
    expect(victim.connections).toBe(0);
    expect(victim.requests).toEqual([]);
  });
});

describe('what the transport lets through, and its limits', () => {
  const local = { allowedCidrs: ['127.0.0.1/32'] };

  it('an allowed CIDR lets the loopback stand-in through, with lower-case headers', async () => {
    const standin = await startStandin({
      handler: (req, res, body) => void res.writeHead(201, { 'X-Echo': req.method ?? '' }).end(`got ${body}`),
    });
    const client = new OutboundHttp(local);
    try {
      const answer = await client.request(`${standin.url}/things?page=2`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' });
      expect(answer).toMatchObject({ status: 201, body: 'got hello' });
      expect(answer.headers['x-echo']).toBe('POST');
      expect(standin.requests).toMatchObject([{ method: 'POST', path: '/things?page=2', body: 'hello' }]);
      // The CIDR opens 127.0.0.1 only: other loopback addresses stay refused.
      expect((await failure(client.request(`http://127.0.0.2:${standin.port}/`))).code).toBe('refused_host');
      expect((await failure(client.request(`http://localhost:${standin.port}/`))).code).toBe('refused_host');
    } finally {
      await client.close();
      await standin.close();
    }
  });

  it('allowPrivate lets every address through (development)', async () => {
    const standin = await startStandin({ handler: (_req, res) => void res.end('ok') });
    const client = new OutboundHttp({ allowPrivate: true });
    try {
      expect((await client.request(`http://localhost:${standin.port}/`)).body).toBe('ok');
    } finally {
      await client.close();
      await standin.close();
    }
  });

  it('answers a redirect as it is, without following it', async () => {
    const standin = await startStandin({
      handler: (_req, res) => void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end(),
    });
    const client = new OutboundHttp(local);
    try {
      const answer = await client.request(`${standin.url}/start`);
      expect(answer.status).toBe(302);
      expect(answer.headers.location).toBe('http://169.254.169.254/latest/meta-data/');
      expect(standin.requests).toHaveLength(1);
    } finally {
      await client.close();
      await standin.close();
    }
  });

  it('stops reading past the size limit (default 2 MB), with or without a content length', async () => {
    const big = 'x'.repeat(2 * 1024 * 1024 + 1);
    const standin = await startStandin({
      handler: (req, res) => {
        if (req.url === '/chunked') {
          res.write('y'.repeat(600));
          res.write('y'.repeat(600));
          res.end();
        } else res.end(big);
      },
    });
    const client = new OutboundHttp(local);
    try {
      const e = await failure(client.request(`${standin.url}/big`));
      expect(e.code).toBe('too_large');
      expect(e.message).toBe('the answer of 127.0.0.1 is larger than 2097152 bytes');
      expect((await failure(client.request(`${standin.url}/chunked`, { maxBytes: 1000 }))).code).toBe('too_large');
      expect((await client.request(`${standin.url}/chunked`, { maxBytes: 1200 })).body).toHaveLength(1200);
    } finally {
      await client.close();
      await standin.close();
    }
  });

  it('times out on a server that never answers and on an SSE stream that never ends', async () => {
    const standin = await startStandin({
      handler: (req, res) => {
        if (req.url === '/silent') return; // never answers
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const tick = setInterval(() => res.write('event: message\ndata: {"jsonrpc":"2.0"}\n\n'), 20);
        res.on('close', () => clearInterval(tick));
      },
    });
    const client = new OutboundHttp({ ...local, timeoutMs: 300 });
    try {
      const silent = await failure(client.request(`${standin.url}/silent`));
      expect(silent.code).toBe('timeout');
      expect(silent.message).toBe('127.0.0.1 did not answer completely within 0.3 s');
      const stream = await failure(client.request(`${standin.url}/sse`));
      expect(stream.code).toBe('timeout');
      // The same endless stream, read until the caller has what it needs.
      const seen = await client.request(`${standin.url}/sse`, { onChunk: (text) => text.includes('\n\n') });
      expect(seen.body).toMatch(/^event: message\ndata: \{"jsonrpc":"2.0"\}\n\n/);
    } finally {
      await client.close();
      await standin.close();
    }
  });

  it('speaks HTTPS to a stand-in whose CA it is given, and refuses it without', async () => {
    const standin = await startStandin({ tls: true, handler: (_req, res) => void res.end('secure') });
    const trusting = new OutboundHttp({ ...local, ca: testTls().ca, requireHttps: true });
    const plain = new OutboundHttp(local);
    try {
      expect((await trusting.request(`${standin.url}/`)).body).toBe('secure');
      const e = await failure(plain.request(`${standin.url}/`));
      expect(e.code).toBe('tls_failed');
      expect(e.message).toMatch(/^TLS with 127\.0\.0\.1 failed \(/);
      // https required: plain http is refused before any connection.
      expect((await failure(trusting.request(`http://127.0.0.1:${standin.port}/`))).code).toBe('bad_url');
      expect((await failure(plain.request(`http://127.0.0.1:${standin.port}/`, { requireHttps: true }))).code).toBe('bad_url');
    } finally {
      await trusting.close();
      await plain.close();
      await standin.close();
    }
  });

  it('reports a refused connection as connect_failed', async () => {
    const standin = await startStandin({ handler: (_req, res) => void res.end() });
    const port = standin.port;
    await standin.close();
    const client = new OutboundHttp(local);
    try {
      const e = await failure(client.request(`http://127.0.0.1:${port}/`));
      expect(e.code).toBe('connect_failed');
      expect(e.message).toBe('could not connect to 127.0.0.1 (ECONNREFUSED)');
    } finally {
      await client.close();
    }
  });
});
