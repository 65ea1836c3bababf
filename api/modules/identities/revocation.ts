import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError } from '../../platform/errors.js';
import { tokenStateOf } from './identities.repository.js';
import type { VerifiedToken } from './tokens.js';

interface TokenState {
  agentStatus: string | null;
  epoch: number;
  identityStatus: string | null;
  at: number;
}

/**
 * What revocation needs to know of a token's agent and identity, cached for a short time so that
 * verifying a token costs no database round trip on most requests. This process drops an agent's
 * entries the moment it contains the agent; other replicas see the change within the TTL
 * (TOKEN_REVOCATION_CACHE_SECONDS, default 1 s; docs/registry.md).
 */
export class RevocationCache {
  private readonly entries = new Map<string, TokenState>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  private async load(orgId: string, agentId: string, identityId: string): Promise<TokenState> {
    const row = await inScope(this.db, { orgId }, (tx) => tokenStateOf(tx, orgId, agentId, identityId));
    return {
      agentStatus: row?.agent_status ?? null,
      epoch: row?.session_epoch ?? -1,
      identityStatus: row?.identity_status ?? null,
      at: this.clock.now().getTime(),
    };
  }

  /** Throws the spec's code when the token's identity or session no longer stands. */
  async check(token: VerifiedToken): Promise<void> {
    const key = `${token.agt}:${token.idn}`;
    let state = this.entries.get(key);
    if (!state || this.clock.now().getTime() - state.at >= this.ttlMs) {
      state = await this.load(token.org, token.agt, token.idn);
      if (this.ttlMs > 0) this.entries.set(key, state);
      if (this.entries.size > 100_000) this.entries.clear();
    }
    if (state.identityStatus !== 'active' || state.agentStatus === null || state.agentStatus === 'revoked') {
      throw new ApiError('identity_revoked');
    }
    if (state.agentStatus !== 'active' || state.epoch !== token.epc) throw new ApiError('session_revoked');
  }

  invalidate(agentId: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(`${agentId}:`)) this.entries.delete(key);
  }
}
