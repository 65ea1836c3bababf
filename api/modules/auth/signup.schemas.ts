import { z } from 'zod';
import { email, timestamp } from '../../platform/schemas.js';

export const signupIn = z.object({
  email,
  name: z.string().trim().min(2).max(120),
  // The spec's bounds; how strong it must be is password.ts's, answered as 422 naming `password`.
  password: z.string().max(256),
  consent: z.boolean().default(false),
  challenge_token: z.string().max(2048).nullable().optional(),
  // The honeypot: hidden from people, filled by bots.
  website: z.string().max(200).default(''),
});

export const resendIn = z.object({ email });

export const verifyIn = z.object({
  email,
  code: z.string().min(6).max(12),
});

/** The answer to a sign-up and a resend: the same whatever the address, so it tells nobody who has an account. */
export const signupAccepted = z.object({
  status: z.literal('accepted'),
  message: z.string(),
  resend_after_seconds: z.number().int(),
});

/** The person the verified sign-up created, waiting to create an organisation (the onboarding cookie is set). */
export const verifyOut = z.object({
  status: z.literal('onboarding'),
  user: z.object({ id: z.uuid(), email: z.string(), display_name: z.string() }),
  expires_at: timestamp,
  csrf_token: z.string(),
});
