import { lookup } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { addressKind, cidrProblem, guardedLookup, hostKind, outboundUrlProblem, type HostKind } from '../../api/platform/outbound.js';

/**
 * The one classification of outbound hosts: what registering an endpoint refuses, and what a
 * connector's lookup refuses after resolving a name.
 */
describe('outbound hosts', () => {
  it.each<[string, HostKind]>([
    // IPv4
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.10', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.0.1', 'link_local'],
    ['169.254.169.254', 'metadata'],
    ['168.63.129.16', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['224.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    // IPv6
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::', 'unspecified'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fe80::1', 'link_local'],
    ['febf::1', 'link_local'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'reserved'],
    // IPv6 carrying IPv4: what they reach is the IPv4 address.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['[::ffff:a9fe:a9fe]', 'metadata'],
    ['::ffff:10.1.2.3', 'private'],
    ['::7f00:1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b::808:808', 'public'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2001:db8::1', 'public'],
  ])('%s is %s', (address, kind) => {
    expect(addressKind(address)).toBe(kind);
    expect(hostKind(address)).toBe(kind);
  });

  it.each<[string, HostKind]>([
    ['localhost', 'loopback'],
    ['LOCALHOST', 'loopback'],
    ['localhost.', 'loopback'],
    ['api.localhost', 'loopback'],
    ['metadata.google.internal', 'metadata'],
    ['metadata.google.internal.', 'metadata'],
    ['metadata', 'metadata'],
    ['mcp.example.com', 'public'],
    ['localhost.example.com', 'public'],
    ['notlocalhost', 'public'],
  ])('the name %s is %s', (name, kind) => {
    expect(addressKind(name)).toBeUndefined();
    expect(hostKind(name)).toBe(kind);
  });

  // As typed by a client: the WHATWG URL parser turns the odd spellings into the address they mean.
  it.each<[string, string]>([
    ['http://127.0.0.1/mcp', 'loopback'],
    ['http://127.0.0.1:8080/mcp', 'loopback'],
    ['https://localhost/mcp', 'loopback'],
    ['https://LocalHost./mcp', 'loopback'],
    ['https://tools.localhost/mcp', 'loopback'],
    ['http://%6c%6fcalhost/mcp', 'loopback'],
    ['http://2130706433/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://017700000001/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://[::1]:3000/mcp', 'loopback'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[0:0:0:0:0:ffff:7f00:1]/', 'loopback'],
    ['http://example.com@127.0.0.1/', 'loopback'],
    ['http://10.0.0.5/api', 'private-network'],
    ['https://192.168.0.1/', 'private-network'],
    ['https://[fd12::1]/', 'private-network'],
    ['http://169.254.169.254/latest/meta-data/', 'metadata'],
    ['http://[::ffff:169.254.169.254]/', 'metadata'],
    ['http://2852039166/', 'metadata'],
    ['http://metadata.google.internal/computeMetadata/v1/', 'metadata'],
    ['http://[fd00:ec2::254]/', 'metadata'],
    ['http://169.254.10.10/', 'link-local'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://0.0.0.0:8080/', 'unspecified'],
    ['http://0/', 'unspecified'],
    ['http://[::]/', 'unspecified'],
  ])('refuses %s (%s)', (url, kind) => {
    expect(outboundUrlProblem(url, false)).toContain(kind);
    // The development setting lets it through.
    expect(outboundUrlProblem(url, true)).toBeUndefined();
  });

  it.each([
    'https://mcp.example.com/mcp',
    'http://mcp.payments.example.com:8080/mcp',
    'https://8.8.8.8/',
    'https://[2606:4700:4700::1111]/',
    'https://127.0.0.1.example.com/',
    'https://example.com/?next=http://127.0.0.1/',
    // Not a network address: an MCP server run as a local process.
    'stdio://npx/@modelcontextprotocol/server-everything',
    // Not a URL at all: the schema's own validation answers for that.
    'not a url',
  ])('accepts %s', (url) => {
    expect(outboundUrlProblem(url, false)).toBeUndefined();
  });

  it('names the host it refuses, as the URL parser read it', () => {
    expect(outboundUrlProblem('http://2130706433/', false)).toBe('names a loopback host (127.0.0.1); Tollgate calls only public hosts');
  });

  describe('OUTBOUND_ALLOWED_CIDRS: IP addresses inside them may be named', () => {
    const policy = { allowedCidrs: ['127.0.0.1/32', '10.20.0.0/16', 'fd00::/8'] };

    it.each(['http://127.0.0.1:8080/mcp', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'https://10.20.3.4/', 'https://[fd12::1]/'])('accepts %s', (url) => {
      expect(outboundUrlProblem(url, policy)).toBeUndefined();
    });

    it.each([
      // Outside the CIDRs, or a name (judged by what it says; the transport judges what it resolves to).
      ['http://127.0.0.2/', 'loopback'],
      ['http://10.21.0.1/', 'private-network'],
      ['http://169.254.169.254/', 'metadata'],
      ['http://localhost:8080/', 'loopback'],
      ['https://[fc00::1]/', 'private-network'],
    ])('still refuses %s (%s)', (url, kind) => {
      expect(outboundUrlProblem(url, policy)).toContain(kind);
    });

    it('takes the development setting as a policy too', () => {
      expect(outboundUrlProblem('http://10.0.0.1/', { allowPrivate: true })).toBeUndefined();
      expect(outboundUrlProblem('http://10.0.0.1/', {})).toContain('private-network');
    });

    it.each([
      ['127.0.0.1/32', undefined],
      ['10.0.0.0/8', undefined],
      ['::1', undefined],
      ['fd00::/8', undefined],
      ['0.0.0.0/0', undefined],
      ['10.0.0.0/33', 'prefix outside 0-32'],
      ['fd00::/129', 'prefix outside 0-128'],
      ['10.0.0.0/x', 'prefix outside'],
      ['10.0.0.0/8/8', 'is not a CIDR'],
      ['localhost', 'is not a CIDR'],
    ])('cidrProblem(%s)', (cidr, problem) => {
      if (problem === undefined) expect(cidrProblem(cidr)).toBeUndefined();
      else expect(cidrProblem(cidr)).toContain(problem);
    });
  });

  describe('guardedLookup: what a name resolves to, at connection time', () => {
    const resolve = (host: string, allowPrivate: boolean, all = false) =>
      new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((done) =>
        guardedLookup(allowPrivate)(host, { all }, (err, address) => done({ err, address })),
      );

    it('refuses a name that resolves to a loopback address', async () => {
      const { err } = await resolve('localhost', false);
      expect(err?.code).toBe('EPRIVATEADDRESS');
      expect(err?.message).toMatch(/^localhost resolves to a loopback host/);
    });

    it('resolves as dns.lookup does when private addresses are allowed', async () => {
      const expected = await new Promise<string>((done, fail) => lookup('localhost', (e, a) => (e ? fail(e) : done(a))));
      expect((await resolve('localhost', true)).address).toBe(expected);
      const all = (await resolve('localhost', true, true)).address as { address: string }[];
      expect(all.map((a) => a.address)).toContain(expected);
    });

    it('passes resolution errors through', async () => {
      const { err } = await resolve('no-such-host.invalid', false);
      expect(err?.code).toMatch(/ENOTFOUND|EAI_AGAIN/);
    });
  });
});
