import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../../lib/clock.js';
import type { Db } from '../../../db/database.js';
import type { EvidenceSigner } from '../../evidence/index.js';
import type { ReportFormat } from '../reports.schemas.js';

/** What a kind's generator is given: the app's services, the organisation, and the moment the report speaks for. */
export interface GenerateContext {
  db: Db;
  clock: Clock;
  evidence: EvidenceSigner;
  log: FastifyBaseLogger;
  orgId: string;
  organisation: { name: string; slug: string };
  /** The report's "as of": every window ends here, and it is printed on every page. */
  generatedAt: Date;
}

/** A generated file, before it is stored. */
export interface ReportFile {
  bytes: Buffer;
  format: ReportFormat;
}

/** The media type each format is downloaded with. */
export const CONTENT_TYPE: Record<ReportFormat, string> = {
  pdf: 'application/pdf',
  csv: 'text/csv; charset=utf-8',
  'tar.gz': 'application/gzip',
};

/**
 * An expected failure of a report, with a message for the person who asked for it (a file over the size limit,
 * a framework that does not exist): the report is marked failed with it, and the job does not retry.
 */
export class ReportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReportError';
  }
}

const DAY_MS = 86_400_000;

/** The first UTC day of a window of `days` days ending today (today included), as the dashboard counts it. */
export function windowStart(now: Date, days: number): Date {
  return new Date((Math.floor(now.getTime() / DAY_MS) - days + 1) * DAY_MS);
}

/** "30 days, 2026-10-25 to 2026-11-23 (UTC)". */
export function windowText(now: Date, days: number): string {
  const since = windowStart(now, days).toISOString().slice(0, 10);
  return `${days} day${days === 1 ? '' : 's'}, ${since} to ${now.toISOString().slice(0, 10)} (UTC)`;
}

/** "2026-11-23 09:00 UTC": how reports show a time. */
export const utcMinute = (d: Date) => `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;

export const day = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString().slice(0, 10) : '');

export const percent = (part: number, whole: number) => (whole > 0 ? `${Math.round((part / whole) * 1000) / 10}%` : '0%');

export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** "+3", "0", "-4", or "" when there is nothing to compare with. */
export const change = (now: number, then: number | null) => (then === null ? '' : now - then > 0 ? `+${now - then}` : String(now - then));

/** A risk factor as a register shows it: its key and the points it adds. */
export interface FactorLike {
  key: string;
  contribution: number;
  why: string;
}

/** The factors that add most to a score, largest first (those adding nothing are left out). */
export function topFactors<F extends FactorLike>(factors: readonly F[] | null | undefined, n = 3): F[] {
  return [...(factors ?? [])].filter((f) => f.contribution > 0).sort((a, b) => b.contribution - a.contribution || a.key.localeCompare(b.key)).slice(0, n);
}

export const humanise = (key: string) => key.replace(/_/g, ' ');
