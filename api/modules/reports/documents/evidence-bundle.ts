import { validationFailed, type ValidationDetail } from '../../../platform/errors.js';
import { buildEvidenceBundle, EvidenceBundleTooLarge } from '../../evidence/index.js';
import { DEFAULT_BUNDLE_DAYS, MAX_BUNDLE_DAYS, type EvidenceBundleParameters } from '../reports.schemas.js';
import { ReportError, type GenerateContext, type ReportFile } from './common.js';

const DAY_MS = 86_400_000;
/** How far in the future `until` may lie: a caller's clock a little ahead of ours is not a mistake. */
const CLOCK_SLACK_MS = 5 * 60_000;

/**
 * The window of a bundle as it is stored with the report: `until` defaults to the moment of asking, `since` to 30
 * days before `until`. Checked here as well as in the schema, since defaults can make a window the schema never
 * saw (only `since` given, a year back): at most 366 days, `since` before `until`, `until` not in the future.
 */
export function resolveBundleWindow(p: EvidenceBundleParameters, now: Date): EvidenceBundleParameters {
  const until = p.until ? new Date(p.until) : now;
  const since = p.since ? new Date(p.since) : new Date(until.getTime() - DEFAULT_BUNDLE_DAYS * DAY_MS);
  const problems: ValidationDetail[] = [];
  if (until.getTime() > now.getTime() + CLOCK_SLACK_MS) problems.push({ field: 'parameters.until', message: 'until may not be in the future' });
  if (since.getTime() >= until.getTime()) problems.push({ field: 'parameters.since', message: 'since must be earlier than until' });
  else if (until.getTime() - since.getTime() > MAX_BUNDLE_DAYS * DAY_MS) {
    problems.push({ field: 'parameters.since', message: `the window may span at most ${MAX_BUNDLE_DAYS} days` });
  }
  if (problems.length > 0) throw validationFailed(problems);
  return { format: p.format, since: since.toISOString(), until: until.toISOString() };
}

/**
 * The evidence module builds the archive (records, signatures, what verifies them, docs/evidence.md); the report
 * stores it. A window too large for the archive's limit fails the report with the module's message.
 */
export async function evidenceBundle(ctx: GenerateContext, p: EvidenceBundleParameters): Promise<ReportFile> {
  const window = { since: new Date(p.since ?? 0), until: new Date(p.until ?? ctx.generatedAt) };
  try {
    const bundle = await buildEvidenceBundle(ctx.db, ctx.evidence, ctx.orgId, window);
    return { bytes: bundle.bytes, format: 'tar.gz' };
  } catch (err) {
    if (err instanceof EvidenceBundleTooLarge) throw new ReportError(err.message, { cause: err });
    throw err;
  }
}
