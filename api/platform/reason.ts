import { z } from 'zod';
import { ApiError } from './errors.js';

/** The spec's ReasonBody: containment and other high-impact operations say why, and confirm. */
export const reasonBody = z.object({
  reason: z
    .string()
    .trim()
    .min(3)
    .max(2000)
    // The length counts after trimming: the pattern says so to generated clients (three characters
    // at least, the first and last not white space).
    .meta({
      description: 'Why, for the audit trail and the evidence: 3-2000 characters once leading and trailing white space is trimmed',
      pattern: '[^\\s\\ufeff][\\s\\S]+[^\\s\\ufeff]',
    }),
  confirm: z
    .boolean()
    .default(false)
    .describe('Must be true: without it (false is the default) the operation answers 422 confirmation_required and changes nothing'),
});

/** A high-impact operation runs only with confirm: true, else 422 confirmation_required. */
export function requireConfirmation(body: { confirm: boolean }): void {
  if (!body.confirm) {
    throw new ApiError('confirmation_required', 'Set confirm to true to carry out this operation.', {
      field: 'confirm',
    });
  }
}
