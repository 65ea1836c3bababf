import { inScope, type Db } from './db/database.js';
import { createOrganisation, memberOrganisationWithSlug } from './modules/tenants/index.js';
import { findOrCreatePerson } from './modules/users/index.js';

export const DEMO_ADMIN_EMAIL = 'admin@demo.example';
export const DEMO_SLUG = 'demo';

/**
 * The demo organisation of `make run`: "Demo Organisation" (slug demo, on the team plan) with its
 * administrator admin@demo.example, who signs in with development sign-in. Idempotent.
 */
export async function seedDemo(db: Db, now: Date): Promise<void> {
  const admin = await findOrCreatePerson(db, DEMO_ADMIN_EMAIL, 'Demo Administrator');
  const existing = await inScope(db, { userId: admin.id }, (tx) => memberOrganisationWithSlug(tx, DEMO_SLUG));
  if (existing) return;
  await createOrganisation(db, {
    name: 'Demo Organisation',
    slug: DEMO_SLUG,
    primaryRegion: 'eu-west',
    // A plan with production agents, so that every example of examples/ becomes Ready (docs/kubernetes.md).
    plan: 'team',
    creator: { userId: admin.id, displayName: 'Demo Administrator' },
    correlationId: 'seed-demo-organisation',
    now,
  });
}
