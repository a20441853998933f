import { useEffect, useRef, useState } from 'react';
import type { AdminApi, AdminTenant, AuditEntry } from '../../api/admin';
import { isAbort } from '../../api/client';
import { ApiError } from '../../api/errors';
import { formatDateTime } from '../../format';
import { describeAuditData } from './display';

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
}

/**
 * The audit log, newest first, optionally one tenant's; older entries page in with
 * "Load more". It reloads when `epoch` changes (after a quota edit here).
 */
export function AuditSection({
  api,
  epoch,
  tenants,
}: {
  api: AdminApi;
  epoch: number;
  tenants: readonly AdminTenant[] | null;
}) {
  const [tenant, setTenant] = useState('');
  const [entries, setEntries] = useState<AuditEntry[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [reload, setReload] = useState(0);
  const more = useRef<AbortController | null>(null);

  useEffect(() => {
    more.current?.abort();
    const controller = new AbortController();
    api
      .listAudit({ tenant }, controller.signal)
      .then((page) => {
        setEntries(page.results);
        setNext(page.next);
        setError(null);
      })
      .catch((e: unknown) => {
        if (!isAbort(e) && !controller.signal.aborted) setError(asApiError(e));
      });
    return () => controller.abort();
  }, [api, tenant, epoch, reload]);

  useEffect(() => () => more.current?.abort(), []);

  const loadMore = async () => {
    if (!next || loadingMore) return;
    const controller = new AbortController();
    more.current = controller;
    setLoadingMore(true);
    try {
      const page = await api.listAudit({ pageUrl: next }, controller.signal);
      if (controller.signal.aborted) return;
      setEntries((prev) => {
        const seen = new Set((prev ?? []).map((e) => e.id));
        return [...(prev ?? []), ...page.results.filter((e) => !seen.has(e.id))];
      });
      setNext(page.next);
      setError(null);
    } catch (e) {
      if (!isAbort(e) && !controller.signal.aborted) setError(asApiError(e));
    } finally {
      if (more.current === controller) {
        more.current = null;
        setLoadingMore(false);
      }
    }
  };

  return (
    <section className="admin-section" aria-labelledby="admin-audit-title" data-testid="admin-audit">
      <div className="section-head">
        <h2 id="admin-audit-title">Audit log</h2>
        <div className="page-actions">
          <label className="inline-field">
            <span>Tenant</span>
            <select
              data-testid="audit-tenant-filter"
              value={tenant}
              onChange={(e) => {
                setTenant(e.target.value);
                setEntries(null);
              }}
            >
              <option value="">all</option>
              {tenants?.map((t) => (
                <option key={t.tenant} value={t.tenant}>
                  {t.name} ({t.tenant})
                </option>
              ))}
            </select>
          </label>
          <button type="button" className="btn btn-small" onClick={() => setReload((n) => n + 1)}>
            Refresh
          </button>
        </div>
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not load the audit log: {error.message}
        </div>
      )}
      {entries === null ? (
        !error && <p className="muted">Loading the audit log…</p>
      ) : entries.length === 0 ? (
        <p className="muted empty">{tenant ? `Nothing recorded for ${tenant}.` : 'Nothing recorded yet.'}</p>
      ) : (
        <div className="table-scroll">
          <table className="jobs-table admin-table audit-table">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Tenant</th>
                <th scope="col">Actor</th>
                <th scope="col">Action</th>
                <th scope="col">Target</th>
                <th scope="col">Details</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.id} data-testid="audit-row" data-action={e.action} data-tenant={e.tenant ?? ''}>
                  <td className="col-created">
                    <time dateTime={e.created_at}>{formatDateTime(e.created_at)}</time>
                  </td>
                  <td>{e.tenant ? <code>{e.tenant}</code> : <span className="muted">—</span>}</td>
                  <td className="col-actor">{e.actor ?? <span className="muted">system</span>}</td>
                  <td>
                    <code className="audit-action">{e.action}</code>
                  </td>
                  <td className="col-target">{e.target}</td>
                  <td className="col-details">
                    <ul className="audit-data">
                      {describeAuditData(e.data).map((line, i) => (
                        <li key={i}>{line}</li>
                      ))}
                    </ul>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {entries && entries.length > 0 && (
        <div className="pager">
          {next ? (
            <button
              type="button"
              className="btn"
              data-testid="audit-load-more"
              disabled={loadingMore}
              onClick={() => void loadMore()}
            >
              {loadingMore ? 'Loading…' : 'Load more'}
            </button>
          ) : (
            <span className="muted small">End of the log.</span>
          )}
        </div>
      )}
    </section>
  );
}
