import { useCallback, useMemo, useState } from 'react';
import type { AdminApi, AdminTenant, QuotaReport } from '../../api/admin';
import { ApiError } from '../../api/errors';
import { usePolling } from '../../hooks/usePolling';
import { Link } from '../../routing/navigation';
import { AuditSection } from './AuditSection';
import { ClusterSection } from './ClusterSection';
import { QueueSection } from './QueueSection';
import { TenantsSection } from './TenantsSection';
import './admin.css';

export const TENANTS_REFRESH_MS = 5_000;

/** `/manage` for a user who is not staff: say why there is nothing here. */
export function StaffOnlyNotice({ username }: { username: string }) {
  return (
    <div className="notice" role="status" data-testid="admin-staff-only">
      <p className="staff-only-title">Cluster administration needs a staff account.</p>
      <p className="muted">
        You are signed in as {username}, who is not staff. Ask a cluster administrator if you need access.{' '}
        <Link to="/">Back to jobs</Link>
      </p>
    </div>
  );
}

/**
 * `/manage` (staff): every tenant's quota against its usage, quota edits, the global
 * queue with reasons, the cluster, the audit log. A saved quota bumps `epoch`, which
 * refreshes the tenants, queue, cluster and audit log at once (admission runs right
 * after an edit, and the queue keeps polling to show its effect).
 */
export function AdminPage({ api }: { api: AdminApi }) {
  const [tenants, setTenants] = useState<AdminTenant[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [epoch, setEpoch] = useState(0);

  usePolling(
    async (signal) => {
      setTenants(await api.listTenants(signal));
      setError(null);
    },
    TENANTS_REFRESH_MS,
    [api, epoch],
    { onError: (e) => setError(e instanceof ApiError ? e : new ApiError(0, 'error', String(e))) },
  );

  const onSaved = useCallback((report: QuotaReport) => {
    setTenants((rows) => rows?.map((row) => (row.tenant === report.tenant ? { ...row, ...report } : row)) ?? rows);
    setEpoch((n) => n + 1);
  }, []);

  const names = useMemo(() => new Map((tenants ?? []).map((t) => [t.tenant, t.name])), [tenants]);

  return (
    <div className="admin-page" data-testid="admin-page">
      <div className="page-head">
        <h1>Cluster admin</h1>
        <nav aria-label="Admin sections" className="admin-jump">
          <a href="#admin-cluster-title">Cluster</a>
          <a href="#admin-tenants-title">Tenants</a>
          <a href="#admin-queue-title">Queue</a>
          <a href="#admin-audit-title">Audit log</a>
        </nav>
      </div>
      <ClusterSection api={api} epoch={epoch} tenantNames={names} />
      <TenantsSection api={api} tenants={tenants} error={error} onSaved={onSaved} />
      <div className="admin-columns">
        <QueueSection api={api} epoch={epoch} />
        <AuditSection api={api} epoch={epoch} tenants={tenants} />
      </div>
    </div>
  );
}
