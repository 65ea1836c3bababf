import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';

/**
 * Where Tollgate may send a request of its own. Endpoints people register (an MCP server's, an API
 * resource's) are addresses that Tollgate's connectors will call, from inside the deployment's
 * network: a registered `http://169.254.169.254/` would have Tollgate read the cloud's instance
 * credentials for whoever registered it (server-side request forgery). So every host is classified
 * here, once, for both moments: when an endpoint is registered (its URL, `outboundUrlProblem`) and
 * when a connector connects (the addresses a name resolves to, `guardedLookup`; a public name can
 * resolve to a private address, and can change what it resolves to after registration).
 */
export type HostKind = 'public' | 'loopback' | 'private' | 'link_local' | 'metadata' | 'unspecified' | 'reserved';

/** Names of cloud instance-metadata services (their addresses are classified below). */
const METADATA_NAMES = new Set([
  'metadata',
  'metadata.google.internal',
  'metadata.goog',
  'instance-data',
  'instance-data.ec2.internal',
]);

/** Metadata addresses outside the ranges that already cover them (169.254.169.254 is link-local too). */
const METADATA_V4 = new Set(['169.254.169.254', '169.254.170.2', '169.254.169.253', '168.63.129.16', '100.100.100.200', '192.0.0.192']);

/** A dotted-quad IPv4 address as a 32-bit number. */
function v4Number(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function inV4(n: number, base: string, bits: number): boolean {
  const size = 2 ** (32 - bits);
  const start = v4Number(base);
  return n >= start && n < start + size;
}

function v4Kind(ip: string): HostKind {
  const n = v4Number(ip);
  if (METADATA_V4.has(ip)) return 'metadata';
  if (inV4(n, '0.0.0.0', 8)) return 'unspecified'; // "this network"; 0.0.0.0 reaches the host itself
  if (inV4(n, '127.0.0.0', 8)) return 'loopback';
  if (inV4(n, '10.0.0.0', 8) || inV4(n, '172.16.0.0', 12) || inV4(n, '192.168.0.0', 16)) return 'private';
  if (inV4(n, '100.64.0.0', 10)) return 'private'; // carrier-grade NAT, shared address space
  if (inV4(n, '169.254.0.0', 16)) return 'link_local';
  if (inV4(n, '192.0.0.0', 24) || inV4(n, '198.18.0.0', 15)) return 'reserved';
  if (inV4(n, '224.0.0.0', 4) || inV4(n, '240.0.0.0', 4)) return 'reserved'; // multicast, reserved, broadcast
  return 'public';
}

/** An IPv6 address (no brackets, no zone) as its eight 16-bit groups. */
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  // A trailing dotted quad (::ffff:1.2.3.4) is two groups.
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const n = v4Number(quad[1]!);
    text = `${text.slice(0, quad.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const embeddedV4 = (hi: number, lo: number) => `${hi >>> 8}.${hi & 0xff}.${lo >>> 8}.${lo & 0xff}`;

function v6Kind(ip: string): HostKind {
  const g = v6Groups(ip);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // Forms that carry an IPv4 address, which is what they reach: mapped (::ffff:a.b.c.d),
  // compatible (::a.b.c.d, deprecated), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
  if (zeros(0, 5) && g[5] === 0xffff) return v4Kind(embeddedV4(g[6]!, g[7]!));
  if (zeros(0, 6)) return v4Kind(embeddedV4(g[6]!, g[7]!));
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return v4Kind(embeddedV4(g[6]!, g[7]!));
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private'; // local-use NAT64
  if (g[0] === 0x2002) return v4Kind(embeddedV4(g[1]!, g[2]!));
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && zeros(2, 7) && g[7] === 0x254) return 'metadata'; // AWS, over IPv6
  if ((g[0]! & 0xfe00) === 0xfc00) return 'private'; // unique local, fc00::/7
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link_local'; // fe80::/10
  if ((g[0]! & 0xffc0) === 0xfec0) return 'private'; // site-local, deprecated
  if ((g[0]! & 0xff00) === 0xff00) return 'reserved'; // multicast
  if (g[0] === 0x100 && zeros(1, 4)) return 'reserved'; // discard-only, 100::/64
  return 'public';
}

/** The kind of an IP address (IPv4 dotted quad or IPv6, brackets allowed); undefined for a name. */
export function addressKind(address: string): HostKind | undefined {
  const bare = address.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(bare);
  if (family === 4) return v4Kind(bare);
  if (family === 6) return v6Kind(bare);
  return undefined;
}

/**
 * The kind of a URL's host as the WHATWG URL parser leaves it (`new URL(u).hostname`), which has
 * already turned the odd IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1, 127.1) into dotted quads.
 * A name is classified by what it says, not by what it resolves to (that is `guardedLookup`'s).
 */
export function hostKind(hostname: string): HostKind {
  const address = addressKind(hostname);
  if (address) return address;
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return 'loopback';
  if (METADATA_NAMES.has(name)) return 'metadata';
  if (name === '') return 'unspecified';
  return 'public';
}

const DESCRIBED: Record<Exclude<HostKind, 'public'>, string> = {
  loopback: 'a loopback host',
  private: 'a private-network host',
  link_local: 'a link-local host',
  metadata: 'a cloud metadata host',
  unspecified: 'an unspecified address',
  reserved: 'a reserved address',
};

/**
 * Why Tollgate must not call the URL `raw`, or undefined when it may: its host is loopback, private,
 * link-local, a metadata service, unspecified or reserved, unless `allowPrivate` (development, where
 * the servers run next to Tollgate). Only http(s) URLs name a host to call; anything else (an MCP
 * server on stdio, a URL that does not parse) is left to the caller's own validation.
 */
export function outboundUrlProblem(raw: string, allowPrivate: boolean): string | undefined {
  if (allowPrivate) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  const kind = hostKind(url.hostname);
  if (kind === 'public') return undefined;
  return `names ${DESCRIBED[kind]} (${url.hostname}); Tollgate calls only public hosts`;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for outbound connections (http.Agent, net.connect, undici's connect options) that
 * resolves as usual and refuses when any address the name resolves to is not public, so that a name
 * registered as public cannot lead a connector to a private address later (DNS rebinding).
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses as LookupAddress[];
      const refused = allowPrivate ? undefined : list.find((a) => addressKind(a.address) !== 'public');
      if (refused) {
        const e: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to ${DESCRIBED[addressKind(refused.address) as Exclude<HostKind, 'public'>]} (${refused.address}); Tollgate calls only public hosts`,
        );
        e.code = 'EPRIVATEADDRESS';
        return callback(e, []);
      }
      if (options.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} resolves to no address`), { code: 'ENOTFOUND' }), []);
      callback(null, first.address, first.family);
    });
  };
}
