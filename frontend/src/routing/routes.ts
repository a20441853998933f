/** The pages of the dashboard, as matched from a URL path. */
export type Route =
  | { page: 'jobs' }
  | { page: 'new' }
  | { page: 'job'; jobId: string }
  | { page: 'manage' }
  | { page: 'compare' }
  | { page: 'cluster' }
  | { page: 'not_found' };

/**
 * Match a pathname. Trailing slashes are ignored. `/jobs/new` is an alias of `/new`
 * because the server hands every `/jobs/...` path to the app, so it survives a reload
 * even where `/new` is not routed to index.html.
 */
export function matchRoute(pathname: string): Route {
  const path = pathname.replace(/\/+$/, '') || '/';
  if (path === '/' || path === '/jobs') return { page: 'jobs' };
  if (path === '/new' || path === '/jobs/new') return { page: 'new' };
  // Cluster administration (staff). Not /admin/: that is Django's admin site.
  if (path === '/manage') return { page: 'manage' };
  // Overlaid metric curves of the jobs named in ?jobs=<id>,<id>.
  if (path === '/compare') return { page: 'compare' };
  // The shared cluster's sub-stage timeline and utilisation.
  if (path === '/cluster') return { page: 'cluster' };
  const job = /^\/jobs\/([^/]+)$/.exec(path);
  if (job) {
    try {
      return { page: 'job', jobId: decodeURIComponent(job[1]!) };
    } catch {
      return { page: 'not_found' };
    }
  }
  return { page: 'not_found' };
}

export const MANAGE_PATH = '/manage';

export function jobPath(jobId: string): string {
  return `/jobs/${encodeURIComponent(jobId)}`;
}

export const CLUSTER_PATH = '/cluster';
