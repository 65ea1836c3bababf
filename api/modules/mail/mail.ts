import type { FastifyBaseLogger } from 'fastify';
import type { Transporter } from 'nodemailer';
import type { Config } from '../../config.js';
import { withSystemCas } from '../../platform/outbound.js';

/** One email: plain text and HTML of the same content (templates.ts writes both). */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
}

/** Sends email. `send` resolves once the backend accepted the message and rejects when it did not. */
export interface Mailer {
  readonly backend: 'smtp' | 'memory' | 'none';
  send(message: MailMessage): Promise<void>;
  close(): void;
}

// Long enough for a relay that greets slowly, short enough that a request does not hang on a dead one.
const SMTP_TIMEOUT_MS = 10_000;

/**
 * The SMTP backend on nodemailer. With SMTP_STARTTLS on (the default, and required in production) the
 * connection must be upgraded with STARTTLS before credentials or mail are sent, and the server's
 * certificate must verify (against the system's CAs and SMTP_CA_FILE's); port 465 speaks TLS from the start.
 * With it off (development only) the mailer still upgrades when the server offers STARTTLS, but does not insist.
 * nodemailer is loaded only here, so that a process on the memory or none backend never holds its code.
 */
export class SmtpMailer implements Mailer {
  readonly backend = 'smtp' as const;
  private readonly transport: Promise<Transporter>;
  private readonly host: string | undefined;

  constructor(
    smtp: Config['email']['smtp'],
    private readonly from: string,
    smtpCa: string | undefined,
  ) {
    this.host = smtp.host;
    const ca = smtpCa ? withSystemCas(smtpCa) : undefined;
    this.transport = import('nodemailer').then(({ default: nodemailer }) =>
      nodemailer.createTransport({
        host: smtp.host,
        port: smtp.port,
        secure: smtp.port === 465,
        requireTLS: smtp.starttls,
        auth: smtp.username ? { user: smtp.username, pass: smtp.password ?? '' } : undefined,
        tls: { ...(ca ? { ca } : {}), rejectUnauthorized: true, minVersion: 'TLSv1.2' },
        connectionTimeout: SMTP_TIMEOUT_MS,
        greetingTimeout: SMTP_TIMEOUT_MS,
        socketTimeout: SMTP_TIMEOUT_MS,
        // nodemailer's own logger would write addresses and the conversation: keep it off.
        logger: false,
        debug: false,
      }),
    );
  }

  async send(m: MailMessage): Promise<void> {
    // Outside production the guard lets a missing host through; say so when it matters rather than at start.
    if (!this.host) throw new Error('SMTP_HOST is not set: nowhere to send email to');
    await (await this.transport).sendMail({ from: this.from, to: m.to, subject: m.subject, text: m.text, html: m.html });
  }

  close(): void {
    void this.transport.then((t) => t.close());
  }
}

/**
 * The development backend (`make run`) and the tests': keeps every message in memory, newest last, and logs a
 * one-line notice without the address or content. Refused in production by the guard.
 */
export class MemoryMailer implements Mailer {
  readonly backend = 'memory' as const;
  /** What was sent, oldest first; the last 100 are kept. */
  readonly messages: MailMessage[] = [];

  constructor(private readonly log: FastifyBaseLogger) {}

  async send(m: MailMessage): Promise<void> {
    this.messages.push({ ...m });
    if (this.messages.length > 100) this.messages.shift();
    this.log.info({ subject: m.subject }, 'email kept in memory (EMAIL_BACKEND=memory; nothing was sent)');
  }

  close(): void {}
}

/** EMAIL_BACKEND=none: sends nothing, says so once a message. */
export class NoMailer implements Mailer {
  readonly backend = 'none' as const;
  constructor(private readonly log: FastifyBaseLogger) {}

  async send(m: MailMessage): Promise<void> {
    this.log.warn({ subject: m.subject }, 'email not sent: EMAIL_BACKEND=none');
  }

  close(): void {}
}

/** The mailer of EMAIL_BACKEND. */
export function createMailer(config: Config, log: FastifyBaseLogger): Mailer {
  switch (config.email.backend) {
    case 'smtp':
      return new SmtpMailer(config.email.smtp, config.mail.from, config.mail.smtpCa);
    case 'memory':
      return new MemoryMailer(log);
    case 'none':
      return new NoMailer(log);
  }
}
