import { createContext, useContext } from 'react';
import type { ApiClient } from './api/client';
import type { Me, TenantMembership } from './api/types';

/** Who is logged in, which tenant the pages act for, and a client bound to it. */
export interface Session {
  me: Me;
  tenant: TenantMembership;
  api: ApiClient;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession() used outside <SessionContext>');
  return session;
}

/** Viewers may look but not submit or cancel; the API enforces this too. */
export function canWrite(tenant: TenantMembership): boolean {
  return tenant.role === 'owner' || tenant.role === 'member';
}
