import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { EXCEPTION_EXPIRY_QUEUE } from '../../db/migrations/0014_governance.js';
import type { JobHandler } from '../../platform/jobs.js';
import { iso } from '../../platform/schemas.js';
import { notify } from '../notifications/index.js';
import { CATALOGUE } from './catalogue.js';
import { claimExpiring, memberByEmail } from './exceptions.repository.js';
import { orgsWithExpiringExceptions } from './governance.repository.js';

export { EXCEPTION_EXPIRY_QUEUE };

/** An approved exception is announced to its owner this many days before it lapses. */
export const EXPIRY_NOTICE_DAYS = 7;

/** When the expiry job runs (pg-boss schedule, UTC): at the top of every hour. */
export const EXPIRY_SCHEDULE = '0 * * * *';

const DAY_MS = 86_400_000;

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/**
 * Tells the owner of every approved exception that lapses within EXPIRY_NOTICE_DAYS (by the app's clock), once:
 * each such exception is marked notified in the transaction that writes its notification, so the job may run
 * again (at-least-once delivery, or two processes at once) without telling anyone twice. The owner is the active
 * member whose email is the exception's owner_email; an owner who is not a member is told nothing (the exception
 * is marked all the same). Answers how many exceptions were due and how many notifications went out.
 */
export async function notifyExpiringExceptions(
  deps: { db: Db; clock: Clock; log?: FastifyBaseLogger; signal?: AbortSignal },
): Promise<{ exceptions: number; notified: number }> {
  const now = deps.clock.now();
  const until = new Date(now.getTime() + EXPIRY_NOTICE_DAYS * DAY_MS);
  let exceptions = 0;
  let notified = 0;
  for (const orgId of await orgsWithExpiringExceptions(deps.db, now, until)) {
    deps.signal?.throwIfAborted();
    await inScope(deps.db, { orgId }, async (tx) => {
      for (const e of await claimExpiring(tx, orgId, now, until)) {
        exceptions++;
        const owner = await memberByEmail(tx, orgId, e.owner_email);
        if (!owner) continue;
        const control = CATALOGUE.byId.get(e.control_id);
        const days = Math.max(1, Math.ceil((new Date(e.expires_at).getTime() - now.getTime()) / DAY_MS));
        await notify(
          tx,
          orgId,
          owner,
          'exception.expiring',
          clip(`Exception expiring: ${e.title}`, 200),
          `The exception "${e.title}" on ${control?.key ?? e.control_id}${control ? ` (${control.title})` : ''} lapses on ` +
            `${iso(e.expires_at)}, in ${days} day${days === 1 ? '' : 's'}. Once it lapses the control counts as not met ` +
            'unless its evidence is there; ask for a new exception (POST /exceptions) if it is still needed.',
          now,
        );
        notified++;
      }
    });
  }
  deps.log?.info({ exceptions, notified }, 'exception expiry notices sent');
  return { exceptions, notified };
}

/** The expiry queue's handler, as api/jobs.ts lists it: run every hour by the queue's schedule. */
export const exceptionExpiryJob: JobHandler = {
  queue: EXCEPTION_EXPIRY_QUEUE,
  schedule: EXPIRY_SCHEDULE,
  handler: async (_data, ctx) => {
    const { db, clock } = ctx.deps;
    await notifyExpiringExceptions({ db, clock, log: ctx.log, signal: ctx.signal });
  },
};
