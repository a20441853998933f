import { describe, expect, it } from 'vitest';
import type { TenantMembership } from './api/types';
import { pickTenant } from './tenant';

const tenants: TenantMembership[] = [
  { slug: 'acme', name: 'Acme', role: 'owner' },
  { slug: 'beta', name: 'Beta', role: 'viewer' },
];

describe('pickTenant', () => {
  it('defaults to the first tenant', () => {
    expect(pickTenant(tenants, null)).toBe('acme');
  });

  it('restores the remembered tenant', () => {
    expect(pickTenant(tenants, 'beta')).toBe('beta');
  });

  it('ignores a remembered tenant the user no longer belongs to', () => {
    expect(pickTenant(tenants, 'gone')).toBe('acme');
  });

  it('is null without tenants', () => {
    expect(pickTenant([], 'acme')).toBeNull();
  });
});
