import { useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { createContext, useContext, useMemo, type ReactNode } from 'react';
import { api, ApiFailure, must, type Paths } from './api/client';

export type Me = Paths['/auth/me']['get']['responses'][200]['content']['application/json'];
export type Onboarding = Paths['/auth/onboarding']['get']['responses'][200]['content']['application/json'];

export type SessionState =
  | { kind: 'signed_in'; me: Me }
  | { kind: 'onboarding'; onboarding: Onboarding }
  | { kind: 'signed_out' };

/** Who is at the console: signed in (with an organisation), onboarding, or signed out. */
async function loadSession(): Promise<SessionState> {
  try {
    return { kind: 'signed_in', me: await must(api.GET('/auth/me')) };
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.status !== 401) throw err;
  }
  try {
    return { kind: 'onboarding', onboarding: await must(api.GET('/auth/onboarding')) };
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return { kind: 'signed_out' };
    throw err;
  }
}

export const SESSION_KEY = ['session'] as const;

export function useSessionState() {
  return useQuery({ queryKey: SESSION_KEY, queryFn: loadSession, staleTime: 60_000, retry: false });
}

/** Drops every cached answer but the session's own: none of it may show in another session or organisation. */
function forget(queryClient: QueryClient): void {
  queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
}

interface Session {
  me: Me;
  /** Whether the person's roles grant the permission here (the API decides; this only shapes the page). */
  can(permission: string): boolean;
  signOut(): Promise<void>;
  switchTenant(tenantId: string): Promise<void>;
}

const SessionContext = createContext<Session | null>(null);

export function SessionProvider({ me, children }: { me: Me; children: ReactNode }) {
  const queryClient = useQueryClient();
  const value = useMemo<Session>(() => {
    const granted = new Set(me.permissions);
    return {
      me,
      can: (p) => granted.has(p),
      async signOut() {
        await must(api.POST('/auth/logout'));
        forget(queryClient);
        queryClient.setQueryData<SessionState>(SESSION_KEY, { kind: 'signed_out' });
      },
      async switchTenant(tenantId) {
        await must(api.POST('/auth/switch-tenant', { body: { tenant_id: tenantId } }));
        // Everything cached belongs to the organisation left behind.
        forget(queryClient);
        await queryClient.refetchQueries({ queryKey: SESSION_KEY });
      },
    };
  }, [me, queryClient]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside a signed-in page');
  return s;
}
