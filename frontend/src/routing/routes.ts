import { matchRoutes } from 'react-router';

/** The pages of the dashboard, as matched from a URL path. */
export type Route =
  | { page: 'jobs' }
  | { page: 'new' }
  | { page: 'job'; jobId: string }
  | { page: 'manage' }
  | { page: 'compare' }
  | { page: 'cluster' }
  | { page: 'not_found' };

type Page = Route['page'];

/**
 * The URL of each page, matched by React Router (trailing slashes ignored, a static
 * segment ranked above `:jobId`). `/jobs/new` is an alias of `/new` because the server
 * hands every `/jobs/...` path to the app, so it survives a reload even where `/new` is
 * not routed to index.html. The server's list of SPA paths (webapp/urls.py) must cover
 * every one of them.
 */
export const PAGE_ROUTES: readonly { path: string; page: Page }[] = [
  { path: '/', page: 'jobs' },
  { path: '/jobs', page: 'jobs' },
  { path: '/new', page: 'new' },
  { path: '/jobs/new', page: 'new' },
  // Cluster administration (staff). Not /admin/: that is Django's admin site.
  { path: '/manage', page: 'manage' },
  // Overlaid metric curves of the jobs named in ?jobs=<id>,<id>.
  { path: '/compare', page: 'compare' },
  // The shared cluster's sub-stage timeline and utilisation.
  { path: '/cluster', page: 'cluster' },
  { path: '/jobs/:jobId', page: 'job' },
];

/** The page a pathname shows. */
export function matchRoute(pathname: string): Route {
  const match = matchRoutes(PAGE_ROUTES as { path: string; page: Page }[], pathname || '/')?.[0];
  if (!match) return { page: 'not_found' };
  const { page } = match.route;
  if (page !== 'job') return { page };
  const jobId = match.params.jobId ?? '';
  // React Router leaves a malformed escape as it is; no job id holds a bare '%'.
  return jobId && !jobId.includes('%') ? { page, jobId } : { page: 'not_found' };
}

export const MANAGE_PATH = '/manage';

export function jobPath(jobId: string): string {
  return `/jobs/${encodeURIComponent(jobId)}`;
}

export const CLUSTER_PATH = '/cluster';
