import { describe, expect, it } from 'vitest';
import { newIdempotencyKey, readCookie } from './csrf';

describe('readCookie', () => {
  it('finds one cookie among several', () => {
    expect(readCookie('sessionid=abc; csrftoken=T0k3n; theme=dark', 'csrftoken')).toBe('T0k3n');
    expect(readCookie('csrftoken=first', 'csrftoken')).toBe('first');
  });

  it('does not match a cookie whose name merely ends the same', () => {
    expect(readCookie('xcsrftoken=nope', 'csrftoken')).toBe('');
  });

  it('is empty when absent', () => {
    expect(readCookie('', 'csrftoken')).toBe('');
  });
});

describe('newIdempotencyKey', () => {
  const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  it('is a fresh UUID each time', () => {
    const a = newIdempotencyKey();
    expect(a).toMatch(UUID_V4);
    expect(newIdempotencyKey()).not.toBe(a);
  });

  it('builds a v4 UUID without crypto.randomUUID (plain-http pages)', () => {
    const insecure = { getRandomValues: (a: Uint8Array) => a.fill(0xff) } as unknown as Crypto;
    expect(newIdempotencyKey(insecure)).toBe('ffffffff-ffff-4fff-bfff-ffffffffffff');
  });
});
