import { describe, expect, it } from 'vitest';
import { jobPath, MANAGE_PATH, matchRoute } from './routes';

describe('matchRoute', () => {
  it.each([
    ['/', { page: 'jobs' }],
    ['', { page: 'jobs' }],
    ['/jobs', { page: 'jobs' }],
    ['/jobs/', { page: 'jobs' }],
    ['/new', { page: 'new' }],
    ['/new/', { page: 'new' }],
    ['/jobs/new', { page: 'new' }],
    ['/jobs/3f1c2d9e-0000-4000-8000-000000000001', { page: 'job', jobId: '3f1c2d9e-0000-4000-8000-000000000001' }],
    ['/jobs/abc/', { page: 'job', jobId: 'abc' }],
    ['/jobs/abc/metrics', { page: 'not_found' }],
    ['/manage', { page: 'manage' }],
    ['/manage/', { page: 'manage' }],
    ['/manage/tenants', { page: 'not_found' }],
    ['/compare', { page: 'compare' }],
    ['/compare/', { page: 'compare' }],
    ['/compare/x', { page: 'not_found' }],
    ['/cluster', { page: 'cluster' }],
    ['/cluster/', { page: 'cluster' }],
    ['/cluster/x', { page: 'not_found' }],
    ['/admin', { page: 'not_found' }],
    ['/admin/', { page: 'not_found' }],
    ['/managers', { page: 'not_found' }],
    ['/static/assets/x.js', { page: 'not_found' }],
    ['/jobs/%E0%A4%A', { page: 'not_found' }],
  ])('%s', (path, route) => {
    expect(matchRoute(path)).toEqual(route);
  });

  it('matches the admin path', () => {
    expect(matchRoute(MANAGE_PATH)).toEqual({ page: 'manage' });
  });

  it('round-trips a job path', () => {
    expect(matchRoute(jobPath('a b'))).toEqual({ page: 'job', jobId: 'a b' });
  });
});
