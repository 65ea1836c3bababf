import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { serviceAccountState } from './service-accounts.repository.js';

export interface ServiceAccountState {
  name: string;
  status: string;
  roles: string[];
}

interface Entry {
  state: ServiceAccountState | null;
  at: number;
}

/**
 * What authentication needs of a service account (status, roles, name), read per request or from a
 * cache as short as the agents' revocation cache (TOKEN_REVOCATION_CACHE_SECONDS). The process that
 * revokes an account drops its entry at once, so revocation is immediate there; other replicas see it
 * within that TTL.
 */
export class ServiceAccountStates {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  /** The account's current state; null when the organisation has no such account. */
  async current(orgId: string, id: string): Promise<ServiceAccountState | null> {
    const key = `${orgId}:${id}`;
    const now = this.clock.now().getTime();
    const cached = this.entries.get(key);
    if (cached && now - cached.at < this.ttlMs) return cached.state;
    const row = await inScope(this.db, { orgId }, (tx) => serviceAccountState(tx, orgId, id));
    const state = row ? { name: row.name, status: row.status, roles: row.roles } : null;
    if (this.ttlMs > 0) {
      if (this.entries.size > 10_000) this.entries.clear();
      this.entries.set(key, { state, at: now });
    }
    return state;
  }

  invalidate(orgId: string, id: string): void {
    this.entries.delete(`${orgId}:${id}`);
  }
}
