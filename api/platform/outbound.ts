import { lookup as dnsLookup, promises as dnsPromises, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector, request as undiciRequest } from 'undici';

/**
 * Where Tollgate may send a request of its own. Endpoints people register (an MCP server's, an API
 * resource's) are addresses that Tollgate's connectors will call, from inside the deployment's
 * network: a registered `http://169.254.169.254/` would have Tollgate read the cloud's instance
 * credentials for whoever registered it (server-side request forgery). So every host is classified
 * here, once, for both moments: when an endpoint is registered (its URL, `outboundUrlProblem`) and
 * when a connector connects (the addresses a name resolves to, `OutboundHttp` and `guardedLookup`; a
 * public name can resolve to a private address, and can change what it resolves to after registration).
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
 * link-local, a metadata service, unspecified or reserved, unless the policy allows it: `true` (or
 * `allowPrivate`) allows every host (development, where the servers run next to Tollgate), `allowedCidrs`
 * allows IP literals inside them (a name is still judged by what it says; `OutboundHttp` judges what it
 * resolves to). Only http(s) URLs name a host to call; anything else (an MCP server on stdio, a URL that
 * does not parse) is left to the caller's own validation.
 */
export function outboundUrlProblem(raw: string, policy: boolean | OutboundPolicy): string | undefined {
  const { allowPrivate = false, allowedCidrs = [] } = typeof policy === 'boolean' ? { allowPrivate: policy } : policy;
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
  if (addressKind(url.hostname) !== undefined && allowedCidrs.length > 0 && addressPolicy({ allowedCidrs })(url.hostname)) return undefined;
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

// ---------------------------------------------------------------------------------------------------------------
// The outbound transport: every request a live connector makes goes through `OutboundHttp`.

/**
 * Why an outbound request failed, as a code the caller can act on: `bad_url` (not http(s), https required,
 * credentials in the URL, does not parse), `refused_host` (the host or an address it resolves to is not public),
 * `connect_failed` (no answer to the connection, the name does not resolve), `tls_failed` (the certificate does
 * not verify), `timeout` (connection or whole exchange), `too_large` (the answer passed its size limit),
 * `exchange_failed` (the connection broke during the exchange).
 */
export type OutboundErrorCode = 'bad_url' | 'refused_host' | 'connect_failed' | 'tls_failed' | 'timeout' | 'too_large' | 'exchange_failed';

/**
 * A failed outbound request. The message is safe to show people: it names the host, never the URL's path
 * or query (which may carry a token), a header, the request's body or the answer's. The platform does not
 * know the modules' error classes: the discovery job treats this as it treats a ConnectorError (the run
 * fails with this message), and an adapter that wants its own words can catch it by `code`.
 */
export class OutboundError extends Error {
  constructor(
    readonly code: OutboundErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'OutboundError';
  }
}

/** One request's options (the connector contract's `Http` is this shape). */
export interface OutboundRequest {
  method?: 'GET' | 'POST' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
  /** The answer's size limit in bytes (default: the client's, 2 MB); beyond it the request fails `too_large`. */
  maxBytes?: number;
  /** The whole exchange's time limit, connection included (default: the client's, 15 s). */
  timeoutMs?: number;
  /** Called with the text read so far after each chunk of the answer (SSE); true stops reading: the answer is complete. */
  onChunk?: (textSoFar: string) => boolean;
  /** Refuse `http:` for this request (a provider the spec says is reached over HTTPS only). */
  requireHttps?: boolean;
}

/** An answer: status, headers with lower-case names (repeated ones joined with ", "), body text. A 3xx is an answer. */
export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** How connectors reach the network (the connector contract's `Http`). Rejects only with OutboundError. */
export interface OutboundHttpClient {
  request(url: string, init?: OutboundRequest): Promise<OutboundResponse>;
}

/** A resolver: every address a name resolves to. Injectable so tests can play DNS, rebinding included. */
export type OutboundLookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** Which non-public addresses may be reached after all. */
export interface OutboundPolicy {
  /** Every address (development, `ALLOW_PRIVATE_ENDPOINTS`). */
  allowPrivate?: boolean;
  /** These CIDRs (`OUTBOUND_ALLOWED_CIDRS`: tests and development reach stand-ins on loopback through it). */
  allowedCidrs?: readonly string[];
}

export interface OutboundOptions extends OutboundPolicy {
  /** Extra trusted CA certificates (PEM), besides the system's: `OUTBOUND_CA_FILE`, tests' stand-ins. */
  ca?: string;
  /** Defaults to the system resolver (`dns.lookup`, every address). */
  lookup?: OutboundLookup;
  /** Refuse `http:` on every request. */
  requireHttps?: boolean;
  /** Default 15 s: the whole exchange. */
  timeoutMs?: number;
  /** Default 5 s: establishing the connection (TLS included). */
  connectTimeoutMs?: number;
  /** Default 2 MB. */
  maxBytes?: number;
  /** Aborts every request of this client (a job whose time is up): the request in flight stops at once. */
  signal?: AbortSignal;
}

/** The settings `OutboundHttp.fromConfig` reads (a part of api/config.ts's Config, which imports this file). */
export interface OutboundConfig {
  allowPrivateEndpoints: boolean;
  outbound: { allowedCidrs: readonly string[]; ca?: string };
}

/**
 * The system's trusted CAs plus `pem`'s: what a TLS client trusts when a setting names a private CA (a bare `ca`
 * option would replace the system's instead of adding to them).
 */
export function withSystemCas(pem: string): string[] {
  return [...rootCertificates, pem];
}

export const OUTBOUND_DEFAULTS = { timeoutMs: 15_000, connectTimeoutMs: 5_000, maxBytes: 2 * 1024 * 1024 } as const;

/** Why `cidr` is not a CIDR (`10.0.0.0/8`, `fd00::/8`, or a bare address), or undefined when it is. */
export function cidrProblem(cidr: string): string | undefined {
  const [address = '', prefix, extra] = cidr.trim().split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return `${cidr} is not a CIDR (an IPv4 or IPv6 address, optionally /prefix)`;
  if (prefix === undefined) return undefined;
  const bits = Number(prefix);
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || bits > max) return `${cidr} has a prefix outside 0-${max}`;
  return undefined;
}

/** The allowed CIDRs as a BlockList (which also matches IPv4-mapped IPv6 against IPv4 ranges). */
function cidrList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const problem = cidrProblem(cidr);
    if (problem) throw new Error(problem);
    const [address = '', prefix] = cidr.trim().split('/');
    const type = isIP(address) === 4 ? 'ipv4' : 'ipv6';
    list.addSubnet(address, prefix === undefined ? (type === 'ipv4' ? 32 : 128) : Number(prefix), type);
  }
  return list;
}

/** The policy as one test of an address: may Tollgate connect to it? */
function addressPolicy(policy: OutboundPolicy): (address: string) => boolean {
  if (policy.allowPrivate) return () => true;
  const allowed = cidrList(policy.allowedCidrs ?? []);
  return (raw) => {
    const address = raw.replace(/^\[(.*)\]$/, '$1');
    const family = isIP(address);
    if (family === 0) return false;
    return addressKind(address) === 'public' || allowed.check(address, family === 4 ? 'ipv4' : 'ipv6');
  };
}

const describeAddress = (address: string) => DESCRIBED[(addressKind(address) ?? 'reserved') as Exclude<HostKind, 'public'>] ?? 'a refused address';

const refused = (host: string, why: string) => new OutboundError('refused_host', `${host} ${why}; Tollgate calls only public hosts`);

type Connector = ReturnType<typeof buildConnector>;
type ConnectorOptions = Parameters<Connector>[0];
type ConnectorCallback = Parameters<Connector>[1];

/**
 * The transport every live connector uses (behaviour.md, "Outbound safety"). It refuses loopback, private,
 * link-local, CGNAT, multicast, unspecified and metadata addresses in every spelling: IP literals are checked
 * as written (the URL parser has normalised the odd IPv4 forms), names by what they say (`localhost`,
 * metadata names) and then by every address they resolve to. The connection is pinned to the address that
 * was checked (the resolver is asked once per connection, and the socket connects to that address, not to
 * the name), and the connected socket's remote address is checked again. It follows no redirect, bounds the
 * whole exchange's time and the answer's size, and speaks http(s) only.
 *
 * `allowedCidrs` and `allowPrivate` open the private ranges for tests and development; the production guard
 * refuses both settings. One instance keeps connections alive between requests: `close()` it when done.
 */
export class OutboundHttp implements OutboundHttpClient {
  private readonly allowed: (address: string) => boolean;
  private readonly allowPrivate: boolean;
  private readonly lookup: OutboundLookup;
  private readonly connectTimeoutMs: number;
  private readonly agent: Agent;

  constructor(private readonly options: OutboundOptions = {}) {
    this.allowed = addressPolicy(options);
    this.allowPrivate = options.allowPrivate ?? false;
    this.lookup = options.lookup ?? systemLookup;
    this.connectTimeoutMs = options.connectTimeoutMs ?? OUTBOUND_DEFAULTS.connectTimeoutMs;
    const connector = buildConnector({
      timeout: this.connectTimeoutMs,
      ...(options.ca ? { ca: withSystemCas(options.ca) } : {}),
    });
    this.agent = new Agent({
      connect: (opts, callback) => this.connectPinned(connector, opts, callback),
    });
  }

  /**
   * The transport as the deployment configures it: `ALLOW_PRIVATE_ENDPOINTS`, `OUTBOUND_ALLOWED_CIDRS`,
   * `OUTBOUND_CA_FILE` (all refused or harmless in production; docs/operations.md).
   */
  static fromConfig(config: OutboundConfig, options: Omit<OutboundOptions, 'allowPrivate' | 'allowedCidrs' | 'ca'> = {}): OutboundHttp {
    return new OutboundHttp({
      ...options,
      allowPrivate: config.allowPrivateEndpoints,
      allowedCidrs: config.outbound.allowedCidrs,
      ca: config.outbound.ca,
    });
  }

  /**
   * One request: resolves with the answer (any status, 3xx included, never followed); rejects with an
   * OutboundError when the URL or host is refused, the connection fails, the time runs out or the answer
   * passes `maxBytes`. With `onChunk`, reading stops as soon as it returns true.
   */
  async request(rawUrl: string, init: OutboundRequest = {}): Promise<OutboundResponse> {
    const url = this.checkUrl(rawUrl, init.requireHttps ?? this.options.requireHttps ?? false);
    const host = url.hostname;
    const timeoutMs = init.timeoutMs ?? this.options.timeoutMs ?? OUTBOUND_DEFAULTS.timeoutMs;
    const maxBytes = init.maxBytes ?? this.options.maxBytes ?? OUTBOUND_DEFAULTS.maxBytes;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    const stop = () => abort.abort();
    const outer = this.options.signal;
    if (outer?.aborted) stop();
    outer?.addEventListener('abort', stop, { once: true });
    try {
      const answer = await undiciRequest(url, {
        dispatcher: this.agent,
        method: init.method ?? 'GET',
        headers: init.headers,
        body: init.body,
        signal: abort.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const body = await readBody(answer.body, host, maxBytes, init.onChunk);
      return { status: answer.statusCode, headers: flatHeaders(answer.headers), body };
    } catch (err) {
      throw outboundFailure(err, host, abort.signal.aborted ? timeoutMs : undefined);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', stop);
    }
  }

  /** Closes the kept-alive connections (waits for requests in flight). */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** The URL, when Tollgate may call it: http(s), no credentials in it, and a host that is not refused by what it says. */
  private checkUrl(raw: string, requireHttps: boolean): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new OutboundError('bad_url', 'the URL does not parse');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError('bad_url', `the URL's scheme ${url.protocol} is not http or https`);
    if (requireHttps && url.protocol !== 'https:') throw new OutboundError('bad_url', `${url.hostname} must be reached over https`);
    const address = addressKind(url.hostname);
    if (address !== undefined) {
      if (!this.allowed(url.hostname)) throw refused(url.hostname, `is ${describeAddress(url.hostname)}`);
    } else if (!this.allowPrivate && hostKind(url.hostname) !== 'public') {
      throw refused(url.hostname, `names ${DESCRIBED[hostKind(url.hostname) as Exclude<HostKind, 'public'>]}`);
    }
    if (url.username || url.password) throw new OutboundError('bad_url', `the URL of ${url.hostname} carries credentials; send them in a header`);
    return url;
  }

  /**
   * undici's connect step: resolve the name once, refuse when any address is not allowed, connect to the
   * checked address itself (TLS still verifies the name), then check where the socket actually landed.
   */
  private connectPinned(connector: Connector, opts: ConnectorOptions, callback: ConnectorCallback): void {
    const name = opts.hostname;
    this.resolveChecked(name).then(
      (address) => {
        connector({ ...opts, hostname: address }, (err, socket) => {
          if (err || !socket) return callback(err ?? new OutboundError('connect_failed', `could not connect to ${name}`), null);
          const landed = socket.remoteAddress ?? '';
          if (!this.allowPrivate && (!this.allowed(landed) || normalAddress(landed) !== normalAddress(address))) {
            socket.destroy();
            return callback(refused(name, `connected to ${landed || 'an unknown address'}, not the checked ${address}`), null);
          }
          callback(null, socket);
        });
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null),
    );
  }

  /** The one address a connection to `name` goes to: an IP literal as is, a name's first address when all are allowed. */
  private async resolveChecked(name: string): Promise<string> {
    if (isIP(name)) {
      if (!this.allowed(name)) throw refused(name, `is ${describeAddress(name)}`);
      return name;
    }
    let addresses: { address: string }[];
    try {
      addresses = await this.lookup(name);
    } catch (err) {
      throw new OutboundError('connect_failed', `${name} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})`, { cause: err });
    }
    const bad = addresses.find((a) => !this.allowed(a.address));
    if (bad) throw refused(name, `resolves to ${describeAddress(bad.address)} (${bad.address})`);
    const first = addresses[0];
    if (!first) throw new OutboundError('connect_failed', `${name} resolves to no address`);
    return first.address;
  }
}

/** The system resolver, every address, in the order it answers. */
const systemLookup: OutboundLookup = (hostname) => dnsPromises.lookup(hostname, { all: true, verbatim: true });

/** An address in one spelling, so that `::ffff:127.0.0.1`, `::ffff:7f00:1` and `127.0.0.1` compare equal. */
function normalAddress(address: string): string {
  const bare = address.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (isIP(bare) !== 6) return bare;
  const g = v6Groups(bare);
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return embeddedV4(g[6]!, g[7]!);
  return g.map((x) => x.toString(16)).join(':');
}

/** Reads the answer up to `maxBytes`, stopping early when `onChunk` says it is complete. */
async function readBody(
  body: AsyncIterable<Buffer> & { destroy(): unknown },
  host: string,
  maxBytes: number,
  onChunk: ((textSoFar: string) => boolean) | undefined,
): Promise<string> {
  const decoder = new TextDecoder();
  let bytes = 0;
  let text = '';
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      body.destroy();
      throw new OutboundError('too_large', `the answer of ${host} is larger than ${maxBytes} bytes`);
    }
    text += decoder.decode(chunk, { stream: true });
    if (onChunk?.(text)) {
      body.destroy();
      return text;
    }
  }
  return text + decoder.decode();
}

function flatHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|CERT_|ERR_OSSL_|HOSTNAME_MISMATCH)/;
const CONNECT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN']);

/** Any failure of a request as an OutboundError whose message names the host and a code, nothing else. */
function outboundFailure(err: unknown, host: string, timedOutAfterMs: number | undefined): OutboundError {
  if (err instanceof OutboundError) return err;
  if (timedOutAfterMs !== undefined)
    return new OutboundError('timeout', `${host} did not answer completely within ${timedOutAfterMs / 1000} s`, { cause: err });
  const code = String((err as { code?: unknown })?.code ?? (err as Error)?.name ?? 'unknown');
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new OutboundError('timeout', `could not connect to ${host} in time`, { cause: err });
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
    return new OutboundError('timeout', `${host} did not answer in time`, { cause: err });
  if (TLS_CODES.test(code)) return new OutboundError('tls_failed', `TLS with ${host} failed (${code})`, { cause: err });
  if (CONNECT_CODES.has(code)) return new OutboundError('connect_failed', `could not connect to ${host} (${code})`, { cause: err });
  return new OutboundError('exchange_failed', `the exchange with ${host} failed (${code})`, { cause: err });
}
