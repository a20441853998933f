import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useMemo, useState } from 'react';
import type { AdminApi, AdminTenant, QuotaReport } from '../../api/admin';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { Link } from 'react-router';
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
 * queue with reasons, the cluster, the audit log. A saved quota refetches the tenants,
 * queue and cluster, and bumps `epoch`, which reloads the audit log, at once (admission runs right
 * after an edit, and the queue keeps polling to show its effect).
 */
export function AdminPage({ api }: { api: AdminApi }) {
  const client = useQueryClient();
  const [epoch, setEpoch] = useState(0);
  const tenantsQuery = useQuery({
    queryKey: queryKeys.adminTenants(),
    queryFn: ({ signal }) => api.listTenants(signal),
    refetchInterval: TENANTS_REFRESH_MS,
  });
  const tenants = tenantsQuery.data ?? null;
  const error = tenantsQuery.error ? asApiError(tenantsQuery.error) : null;

  const onSaved = useCallback(
    (report: QuotaReport) => {
      client.setQueryData<AdminTenant[]>(queryKeys.adminTenants(), (rows) =>
        rows?.map((row) => (row.tenant === report.tenant ? { ...row, ...report } : row)),
      );
      void client.invalidateQueries({ queryKey: queryKeys.admin() });
      setEpoch((n) => n + 1);
    },
    [client],
  );

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
      <ClusterSection api={api} tenantNames={names} />
      <TenantsSection api={api} tenants={tenants} error={error} onSaved={onSaved} />
      <div className="admin-columns">
        <QueueSection api={api} />
        <AuditSection api={api} epoch={epoch} tenants={tenants} />
      </div>
    </div>
  );
}
