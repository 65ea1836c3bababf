import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { testTls } from './tls.js';

/** A message as the test SMTP server received it, decoded enough to read. */
export interface ReceivedMail {
  /** The envelope's recipients (RCPT TO). */
  to: string[];
  from: string;
  /** Whether the connection had been upgraded with STARTTLS (or was TLS) when the message came. */
  secure: boolean;
  /** Who authenticated. */
  user: string | undefined;
  subject: string;
  /** The text/plain part, decoded. */
  text: string;
  /** The text/html part, decoded. */
  html: string;
  raw: string;
}

export interface TestSmtp {
  host: string;
  port: number;
  username: string;
  password: string;
  messages: ReceivedMail[];
  /** Waits for the n-th message (1-based) to arrive, or throws after timeoutMs. */
  waitFor(n: number, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

/**
 * A real SMTP server (the `smtp-server` package) on 127.0.0.1: STARTTLS with the test CA's certificate
 * (testTls()), authentication required, and only after STARTTLS (unless `withoutStartTls`). Collects what arrives.
 */
export async function startTestSmtp(
  opts: {
    username?: string;
    password?: string;
    /** A server that does not offer STARTTLS (and so takes credentials in the clear): what the mailer must refuse. */
    withoutStartTls?: boolean;
  } = {},
): Promise<TestSmtp> {
  const username = opts.username ?? 'tollgate-mailer';
  const password = opts.password ?? 'smtp-test-password-4d1c';
  const messages: ReceivedMail[] = [];
  const tls = testTls();
  const server = new SMTPServer({
    secure: false,
    key: tls.key,
    cert: tls.cert,
    authMethods: ['PLAIN', 'LOGIN'],
    authOptional: false,
    allowInsecureAuth: opts.withoutStartTls ?? false,
    disabledCommands: opts.withoutStartTls ? ['STARTTLS'] : [],
    disableReverseLookup: true,
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === username && auth.password === password) return cb(null, { user: username });
      return cb(new Error('Invalid username or password'));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        messages.push({
          ...parseMail(raw),
          to: session.envelope.rcptTo.map((r) => r.address),
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          secure: session.secure,
          user: session.user as string | undefined,
          raw,
        });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    host: '127.0.0.1',
    port,
    username,
    password,
    messages,
    async waitFor(n, timeoutMs = 10_000) {
      const started = Date.now();
      while (messages.length < n) {
        if (Date.now() - started > timeoutMs) throw new Error(`only ${messages.length} of ${n} messages arrived in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return messages[n - 1]!;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Splits a MIME entity into its headers (lower-case names, unfolded) and its body. */
function splitEntity(raw: string): { headers: Map<string, string>; body: string } {
  const at = raw.search(/\r?\n\r?\n/);
  const head = at < 0 ? raw : raw.slice(0, at);
  const body = at < 0 ? '' : raw.slice(at).replace(/^\r?\n\r?\n/, '');
  const headers = new Map<string, string>();
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return { headers, body };
}

function decodeBody(body: string, encoding: string | undefined): string {
  switch ((encoding ?? '7bit').toLowerCase()) {
    case 'base64':
      return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
    case 'quoted-printable':
      return Buffer.from(
        body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
        'latin1',
      ).toString('utf8');
    default:
      return body;
  }
}

/** An RFC 2047 encoded word (=?utf-8?Q?...?= or =?utf-8?B?...?=), as nodemailer writes non-ASCII subjects. */
function decodeWords(s: string): string {
  return s.replace(/=\?([^?]+)\?([QB])\?([^?]*)\?=\s*/gi, (_m, _cs: string, enc: string, text: string) =>
    enc.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64').toString('utf8')
      : decodeBody(text.replace(/_/g, ' '), 'quoted-printable'),
  );
}

/** Just enough MIME for the tests: the subject and the text and HTML parts of a (multipart/alternative) message. */
export function parseMail(raw: string): { subject: string; text: string; html: string } {
  const top = splitEntity(raw);
  const subject = decodeWords(top.headers.get('subject') ?? '');
  const parts: Array<{ type: string; content: string }> = [];
  const walk = (entity: { headers: Map<string, string>; body: string }) => {
    const type = entity.headers.get('content-type') ?? 'text/plain';
    const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1];
    if (/^multipart\//i.test(type) && boundary) {
      const pieces = entity.body.split(`--${boundary}`).slice(1);
      for (const piece of pieces) {
        if (piece.startsWith('--')) break;
        walk(splitEntity(piece.replace(/^\r?\n/, '')));
      }
      return;
    }
    parts.push({ type: type.split(';')[0]!.trim().toLowerCase(), content: decodeBody(entity.body, entity.headers.get('content-transfer-encoding')) });
  };
  walk(top);
  return {
    subject,
    text: parts.find((p) => p.type === 'text/plain')?.content ?? '',
    html: parts.find((p) => p.type === 'text/html')?.content ?? '',
  };
}
