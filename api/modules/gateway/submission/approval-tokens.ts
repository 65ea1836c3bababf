import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ActionIn } from '../actions.schemas.js';
import { canonicalize } from '../../../../lib/canonical-json.js';

/** The hash an idempotency key and an approval token are bound to: the request without its token. */
export function requestHash(body: ActionIn): string {
  const { approval_token: _token, ...request } = body;
  const canonical = canonicalize({
    ...request,
    environment: request.environment ?? null,
    on_behalf_of: request.on_behalf_of ?? null,
    justification: request.justification ?? null,
  });
  return createHash('sha256').update(canonical ?? '').digest('hex');
}

/**
 * Approval tokens are not stored: a token is an HMAC over the approval and the exact request, so the
 * agent's status lookup can show it and a resubmission can check it, and a copy of the database alone
 * forges none. Single use is recorded on the approval.
 */
export class ApprovalTokens {
  private readonly key: Buffer;
  constructor(seed: string) {
    this.key = createHash('sha256').update(`tollgate:approval-token:v1:${seed}`).digest();
  }
  token(approvalId: string, hash: string): string {
    return `tga_${createHmac('sha256', this.key).update(`${approvalId}:${hash}`).digest('base64url')}`;
  }
  matches(token: string, approvalId: string, hash: string): boolean {
    const expected = Buffer.from(this.token(approvalId, hash));
    const given = Buffer.from(token);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }
}
