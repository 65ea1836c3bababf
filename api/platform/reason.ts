import { z } from 'zod';
import { ApiError } from './errors.js';

/** The spec's ReasonBody: containment and other high-impact operations say why, and confirm. */
export const reasonBody = z.object({
  reason: z.string().trim().min(3).max(2000),
  confirm: z.boolean().default(false),
});

/** A high-impact operation runs only with confirm: true, else 422 confirmation_required. */
export function requireConfirmation(body: { confirm: boolean }): void {
  if (!body.confirm) {
    throw new ApiError('confirmation_required', 'Set confirm to true to carry out this operation.', {
      field: 'confirm',
    });
  }
}
