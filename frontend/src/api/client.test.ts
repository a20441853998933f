import { describe, expect, it } from 'vitest';
import { loginUrl, pathOf } from './client';

describe('URLs', () => {
  it('keeps only the path and query of a pagination link', () => {
    expect(pathOf('http://internal:8000/api/v1/jobs?cursor=abc')).toBe('/api/v1/jobs?cursor=abc');
    expect(pathOf('/api/v1/jobs?page=2')).toBe('/api/v1/jobs?page=2');
  });

  it('sends the user back to where they were after logging in', () => {
    expect(loginUrl('/jobs/1?x=y')).toBe('/accounts/login/?next=%2Fjobs%2F1%3Fx%3Dy');
  });
});
