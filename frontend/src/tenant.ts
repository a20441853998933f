import type { TenantMembership } from './api/types';

const STORAGE_KEY = 'jigsawrl.tenant';

/** The remembered tenant if the user still belongs to it, else the first one. */
export function pickTenant(tenants: readonly TenantMembership[], remembered: string | null): string | null {
  if (remembered && tenants.some((t) => t.slug === remembered)) return remembered;
  return tenants[0]?.slug ?? null;
}

// localStorage throws in some privacy modes and sandboxed frames; the choice is then
// simply not remembered.

export function loadRememberedTenant(): string | null {
  try {
    return window.localStorage.getItem(STORAGE_KEY);
  } catch {
    return null;
  }
}

export function rememberTenant(slug: string): void {
  try {
    window.localStorage.setItem(STORAGE_KEY, slug);
  } catch {
    /* not remembered; harmless */
  }
}
