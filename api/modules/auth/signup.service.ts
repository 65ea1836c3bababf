import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, validationFailed } from '../../platform/errors.js';
import type { HitCounter } from '../../platform/rate-limit.js';
import { accountExistsEmail, signupCodeEmail, type Mailer, type MailMessage } from '../mail/index.js';
import { findOrCreatePerson } from '../users/index.js';
import type { ChallengeVerifier } from './challenge.js';
import { hashPassword, passwordProblem } from './password.js';
import {
  addAttempt,
  clearLastSent,
  deleteSignup,
  deleteStaleSignups,
  findSignup,
  insertCredential,
  personExists,
  setCode,
  upsertSignup,
} from './signup.repository.js';

/** The sign-up's rules (docs/authentication.md, Self-service sign-up). */
export const CODE_DIGITS = 8;
export const CODE_TTL_SECONDS = 15 * 60;
export const CODE_MAX_ATTEMPTS = 5;
/** The spec's resend cooldown. */
export const RESEND_COOLDOWN_SECONDS = 60;
/** At most one "you already have an account" email an address an hour, however often it is signed up with. */
const ACCOUNT_EXISTS_WINDOW_MS = 3_600_000;
/** Sign-ups nobody verified are removed a day after their code expired. */
const STALE_AFTER_MS = 86_400_000;

/** What the sign-up operations need from the app. */
export interface SignupDeps {
  db: Db;
  clock: Clock;
  mailer: Mailer;
  challenge: ChallengeVerifier;
  hits: HitCounter;
  /** SECRET_PEPPER: the key codes are hashed with. */
  pepper: string;
  log: FastifyBaseLogger;
}

export interface SignupInput {
  email: string;
  name: string;
  password: string;
  consent: boolean;
  challengeToken: string | null | undefined;
  website: string;
}

const newCode = () => String(randomInt(0, 10 ** CODE_DIGITS)).padStart(CODE_DIGITS, '0');

/** Codes are kept as an HMAC under the pepper, bound to their sign-up: the table never holds a usable code. */
const codeHash = (pepper: string, signupId: string, code: string) =>
  createHmac('sha256', pepper).update(`signup-code:${signupId}:${code}`).digest('hex');

/** What the person typed, as a code: spaces and dashes someone copied along do not count. */
const normaliseCode = (code: string) => code.replace(/[\s-]/g, '');

/**
 * Starts a sign-up. The answer (202) is the same whether the address is new, waiting or already has an account,
 * so it cannot be used to learn who has one: a new or waiting address gets a code (not again within the
 * cooldown), an existing account gets an email saying so. The password is hashed in every case, so the time
 * taken does not tell them apart either.
 */
export async function signUp(d: SignupDeps, input: SignupInput, remoteIp: string, correlationId: string): Promise<void> {
  // The honeypot: a field people do not see, which bots fill in. Answered like any other sign-up.
  if (input.website.trim() !== '') {
    d.log.info({ correlation_id: correlationId }, 'sign-up ignored: the honeypot field was filled');
    return;
  }
  if (!(await d.challenge.verify(input.challengeToken, remoteIp))) {
    throw validationFailed([{ field: 'challenge_token', message: 'the challenge was not passed; try it again' }], 'The challenge was not passed.');
  }
  if (!input.consent) {
    throw validationFailed([{ field: 'consent', message: 'must be true: we need your consent to create an account' }]);
  }
  const email = input.email.trim();
  const name = input.name.trim();
  const problem = passwordProblem(input.password, { email, name });
  if (problem) throw validationFailed([{ field: 'password', message: problem }], `The password ${problem}.`);
  const passwordHash = await hashPassword(input.password);

  const now = d.clock.now();
  const outcome = await inScope(d.db, {}, async (tx) => {
    await deleteStaleSignups(tx, new Date(now.getTime() - STALE_AFTER_MS));
    if (await personExists(tx, email)) return { kind: 'exists' as const };
    const waiting = await findSignup(tx, email);
    if (waiting?.last_sent_at && now.getTime() - waiting.last_sent_at.getTime() < RESEND_COOLDOWN_SECONDS * 1000) {
      return { kind: 'cooling' as const };
    }
    const code = newCode();
    const { id } = await upsertSignup(tx, {
      email,
      name,
      password_hash: passwordHash,
      consent_at: now,
      // Replaced below once the row's id is known (a replaced sign-up keeps its id).
      code_hash: null,
      code_expires_at: new Date(now.getTime() + CODE_TTL_SECONDS * 1000),
      last_sent_at: now,
      created_at: now,
      updated_at: now,
    });
    await setCode(tx, id, codeHash(d.pepper, id, code), new Date(now.getTime() + CODE_TTL_SECONDS * 1000), now);
    return { kind: 'code' as const, id, code };
  });

  if (outcome.kind === 'exists') {
    const key = `signup-exists:${createHmac('sha256', d.pepper).update(email.toLowerCase()).digest('hex')}`;
    const { current } = await d.hits.hit(key, ACCOUNT_EXISTS_WINDOW_MS);
    if (current === 1) await sendOrFail(d, accountExistsEmail(email), correlationId);
    d.log.info({ correlation_id: correlationId }, 'sign-up for an address that has an account');
    return;
  }
  if (outcome.kind === 'cooling') {
    d.log.info({ correlation_id: correlationId }, 'sign-up repeated within the resend cooldown: no new code');
    return;
  }
  await sendCode(d, outcome.id, email, name, outcome.code, correlationId);
  d.log.info({ correlation_id: correlationId, signup_id: outcome.id }, 'sign-up started: verification code sent');
}

/**
 * Sends a new code to a waiting sign-up, unless one was sent less than the cooldown ago. Answered alike for
 * an address that has no waiting sign-up: nothing is sent.
 */
export async function resendCode(d: SignupDeps, rawEmail: string, correlationId: string): Promise<void> {
  const email = rawEmail.trim();
  const now = d.clock.now();
  const outcome = await inScope(d.db, {}, async (tx) => {
    const waiting = await findSignup(tx, email);
    if (!waiting) return null;
    if (waiting.last_sent_at && now.getTime() - waiting.last_sent_at.getTime() < RESEND_COOLDOWN_SECONDS * 1000) return null;
    const code = newCode();
    await setCode(tx, waiting.id, codeHash(d.pepper, waiting.id, code), new Date(now.getTime() + CODE_TTL_SECONDS * 1000), now);
    return { id: waiting.id, name: waiting.name, email: waiting.email, code };
  });
  if (!outcome) {
    d.log.info({ correlation_id: correlationId }, 'sign-up resend: nothing sent (no waiting sign-up, or within the cooldown)');
    return;
  }
  await sendCode(d, outcome.id, outcome.email, outcome.name, outcome.code, correlationId);
  d.log.info({ correlation_id: correlationId, signup_id: outcome.id }, 'sign-up resend: a new verification code sent');
}

const wrongCode = () =>
  validationFailed(
    [{ field: 'code', message: 'wrong or expired; after five wrong tries or 15 minutes, request a new code' }],
    'The code is wrong or has expired.',
  );

/**
 * Checks the emailed code and, when it is right, creates the person and keeps their password hash; the
 * sign-up is then gone (the code works once). A wrong, expired or exhausted code, and an address with no
 * waiting sign-up, all answer the same 422.
 */
export async function verifySignup(
  d: SignupDeps,
  rawEmail: string,
  rawCode: string,
  correlationId: string,
): Promise<{ id: string; email: string; display_name: string }> {
  const email = rawEmail.trim();
  const code = normaliseCode(rawCode);
  const now = d.clock.now();
  const outcome = await inScope(d.db, {}, async (tx) => {
    const waiting = await findSignup(tx, email);
    if (!waiting || !waiting.code_hash || !waiting.code_expires_at) return { ok: false as const };
    if (waiting.code_expires_at.getTime() <= now.getTime() || waiting.attempts >= CODE_MAX_ATTEMPTS) return { ok: false as const };
    const given = Buffer.from(codeHash(d.pepper, waiting.id, code));
    if (!timingSafeEqual(given, Buffer.from(waiting.code_hash))) {
      // Counted in this transaction, which commits: the 422 is thrown after it.
      await addAttempt(tx, waiting.id, now);
      return { ok: false as const, signupId: waiting.id };
    }
    const person = await findOrCreatePerson(tx, waiting.email, waiting.name);
    await insertCredential(tx, person.id, waiting.password_hash, waiting.consent_at, now);
    await deleteSignup(tx, waiting.id);
    return { ok: true as const, signupId: waiting.id, person };
  });
  if (!outcome.ok) {
    d.log.info({ correlation_id: correlationId, signup_id: outcome.signupId }, 'sign-up verification refused');
    throw wrongCode();
  }
  d.log.info({ correlation_id: correlationId, signup_id: outcome.signupId, user_id: outcome.person.id }, 'sign-up verified: person created');
  const p = outcome.person;
  return { id: p.id, email: p.email, display_name: p.display_name };
}

/** Emails the code; on failure forgets the send (so the cooldown does not hold) and answers 503. */
async function sendCode(d: SignupDeps, signupId: string, email: string, name: string, code: string, correlationId: string) {
  try {
    await sendOrFail(d, signupCodeEmail(email, name, code, CODE_TTL_SECONDS / 60), correlationId);
  } catch (err) {
    await inScope(d.db, {}, (tx) => clearLastSent(tx, signupId));
    throw err;
  }
  if (d.mailer.backend === 'memory') {
    // The development convenience (EMAIL_BACKEND=memory, refused in production): the code in the log, so a
    // newcomer running `make run` can sign up without a mail server.
    d.log.info({ correlation_id: correlationId, signup_id: signupId, signup_code: code }, 'sign-up code (EMAIL_BACKEND=memory, development only)');
  }
}

async function sendOrFail(d: SignupDeps, message: MailMessage, correlationId: string): Promise<void> {
  try {
    await d.mailer.send(message);
  } catch (err) {
    // Neither the address nor the content: the error's type and code say what went wrong.
    const e = err as { name?: string; code?: string; responseCode?: number };
    d.log.error({ correlation_id: correlationId, failure: { type: e.name, code: e.code, response_code: e.responseCode } }, 'sign-up email could not be sent');
    throw new ApiError('service_unavailable', 'The email could not be sent right now; retry in a moment.', null, { 'retry-after': '5' });
  }
}
