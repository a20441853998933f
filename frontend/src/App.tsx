import { useCallback, useEffect, useLayoutEffect, useMemo, useState } from 'react';
import { Link, useLocation, useNavigate, useNavigationType } from 'react-router';
import { AdminApi } from './api/admin';
import { ApiClient, isAbort, loginUrl } from './api/client';
import { csrfToken } from './api/csrf';
import { ApiError } from './api/errors';
import type { Me } from './api/types';
import { ComparePage } from './pages/ComparePage';
import { ClusterPage } from './pages/cluster/ClusterPage';
import { JobPage } from './pages/JobPage';
import { JobsPage } from './pages/JobsPage';
import { AdminPage, StaffOnlyNotice } from './pages/admin/AdminPage';
import { SubmitPage } from './pages/SubmitPage';
import { CLUSTER_PATH, MANAGE_PATH, matchRoute } from './routing/routes';
import { SessionContext, type Session } from './session';
import { loadRememberedTenant, pickTenant, rememberTenant } from './tenant';

function goToLogin(): void {
  window.location.assign(loginUrl(window.location.pathname + window.location.search));
}

/**
 * A page opened by a link starts at its top; a new query on the same page (filters) keeps
 * the scroll, and so do back and forward (the browser restores theirs).
 */
function useScrollToTopOnNewPage(pathname: string): void {
  const navigationType = useNavigationType();
  useLayoutEffect(() => {
    if (navigationType !== 'POP') window.scrollTo(0, 0);
  }, [pathname]);
}

export function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [loadError, setLoadError] = useState<ApiError | null>(null);
  const [tenantSlug, setTenantSlug] = useState<string | null>(null);
  const { pathname } = useLocation();
  const navigate = useNavigate();
  useScrollToTopOnNewPage(pathname);
  const route = matchRoute(pathname);

  useEffect(() => {
    const controller = new AbortController();
    new ApiClient({ tenant: null, onUnauthenticated: goToLogin })
      .me(controller.signal)
      .then((result) => {
        setMe(result);
        setTenantSlug(pickTenant(result.tenants, loadRememberedTenant()));
      })
      .catch((error: unknown) => {
        if (isAbort(error)) return;
        setLoadError(error instanceof ApiError ? error : new ApiError(0, 'error', String(error)));
      });
    return () => controller.abort();
  }, []);

  // Cluster administration needs no tenant; the server checks is_staff on every call.
  const adminApi = useMemo(() => (me?.is_staff ? new AdminApi(goToLogin) : null), [me?.is_staff]);

  const session = useMemo<Session | null>(() => {
    const tenant = me?.tenants.find((t) => t.slug === tenantSlug);
    if (!me || !tenant) return null;
    return { me, tenant, api: new ApiClient({ tenant: tenant.slug, onUnauthenticated: goToLogin }) };
  }, [me, tenantSlug]);

  const switchTenant = useCallback(
    (slug: string) => {
      rememberTenant(slug);
      setTenantSlug(slug);
      // A job belongs to one tenant; its page would be a 404 under another.
      if (route.page === 'job') navigate('/');
    },
    [route.page, navigate],
  );

  let body;
  if (loadError) {
    body = (
      <div className="notice notice-error" role="alert">
        Could not load your account: {loadError.message}
      </div>
    );
  } else if (!me) {
    body = <p className="muted">Loading…</p>;
  } else if (route.page === 'manage') {
    body = adminApi ? <AdminPage api={adminApi} /> : <StaffOnlyNotice username={me.username} />;
  } else if (!session) {
    body = (
      <div className="notice" role="status">
        Your account ({me.username}) is not a member of any tenant yet. Ask a tenant owner to add
        you.
      </div>
    );
  } else if (route.page === 'jobs') {
    body = <JobsPage key={session.tenant.slug} />;
  } else if (route.page === 'new') {
    body = <SubmitPage key={session.tenant.slug} />;
  } else if (route.page === 'compare') {
    body = <ComparePage key={session.tenant.slug} />;
  } else if (route.page === 'cluster') {
    body = <ClusterPage key={session.tenant.slug} />;
  } else if (route.page === 'job') {
    body = <JobPage key={`${session.tenant.slug}/${route.jobId}`} jobId={route.jobId} />;
  } else {
    body = (
      <div className="notice" role="status">
        No page here. <Link to="/">Back to jobs</Link>
      </div>
    );
  }

  return (
    <SessionContext.Provider value={session}>
      <header className="topbar">
        <Link to="/" className="brand">
          JigsawRL
        </Link>
        <nav aria-label="Main" className="topnav">
          <Link to="/" aria-current={route.page === 'jobs' ? 'page' : undefined}>
            Jobs
          </Link>
          <Link to={CLUSTER_PATH} data-testid="nav-cluster" aria-current={route.page === 'cluster' ? 'page' : undefined}>
            Cluster
          </Link>
          {me?.is_staff && (
            <Link
              to={MANAGE_PATH}
              data-testid="nav-admin"
              aria-current={route.page === 'manage' ? 'page' : undefined}
            >
              Admin
            </Link>
          )}
        </nav>
        <div className="topbar-right">
          {me && me.tenants.length > 1 && (
            <label className="tenant-picker">
              <span>Tenant</span>
              <select
                data-testid="tenant-select"
                value={tenantSlug ?? ''}
                onChange={(e) => switchTenant(e.target.value)}
              >
                {me.tenants.map((t) => (
                  <option key={t.slug} value={t.slug}>
                    {t.name} ({t.role})
                  </option>
                ))}
              </select>
            </label>
          )}
          {me && me.tenants.length === 1 && session && (
            <span className="tenant-name" title={`Role: ${session.tenant.role}`}>
              {session.tenant.name}
            </span>
          )}
          {me && <span className="username">{me.username}</span>}
          {me && (
            <form
              method="post"
              action="/accounts/logout/"
              className="logout"
              // Read the token when submitting: Django rotates it, e.g. at login.
              onSubmit={(e) => {
                e.currentTarget.csrfmiddlewaretoken.value = csrfToken();
              }}
            >
              <input type="hidden" name="csrfmiddlewaretoken" defaultValue={csrfToken()} />
              <button type="submit" className="btn btn-quiet">
                Log out
              </button>
            </form>
          )}
        </div>
      </header>
      <main className={route.page === 'manage' && adminApi ? 'content content-wide' : 'content'}>{body}</main>
    </SessionContext.Provider>
  );
}
