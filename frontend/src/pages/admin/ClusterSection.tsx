import { useQuery } from '@tanstack/react-query';
import type { AdminApi } from '../../api/admin';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { flattenFacts } from './display';
import { UsageBar } from './UsageBar';

export const CLUSTER_REFRESH_MS = 5_000;

/** The cluster's GPUs, who holds them, and what the engine says about itself. */
export function ClusterSection({
  api,
  tenantNames,
}: {
  api: AdminApi;
  tenantNames: ReadonlyMap<string, string>;
}) {
  const clusterQuery = useQuery({
    queryKey: queryKeys.adminCluster(),
    queryFn: ({ signal }) => api.getCluster(signal),
    refetchInterval: CLUSTER_REFRESH_MS,
  });
  const cluster = clusterQuery.data ?? null;
  const error = clusterQuery.error ? asApiError(clusterQuery.error) : null;

  const holders = cluster
    ? Object.entries(cluster.by_tenant).sort((a, b) => b[1].gpus - a[1].gpus || a[0].localeCompare(b[0]))
    : [];
  const engineError = cluster && typeof cluster.engine?.error === 'string' ? cluster.engine.error : null;
  const facts = cluster && !engineError ? flattenFacts(cluster.engine ?? {}) : [];

  return (
    <section className="admin-section" aria-labelledby="admin-cluster-title" data-testid="admin-cluster">
      <h2 id="admin-cluster-title">Cluster</h2>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not refresh the cluster summary: {error.message}
        </div>
      )}
      {cluster === null ? (
        !error && <p className="muted">Loading the cluster…</p>
      ) : (
        <div className="cluster-grid">
          <div className="admin-card">
            <h3>GPUs in use</h3>
            <UsageBar
              testId="cluster-gpus"
              label={`${cluster.device_type} GPUs held`}
              value={cluster.gpus_held}
              max={cluster.num_gpus}
              text={`${cluster.gpus_held} / ${cluster.num_gpus} ${cluster.device_type}`}
              detail={`${Math.max(cluster.num_gpus - cluster.gpus_held, 0)} free`}
            />
          </div>
          <div className="admin-card">
            <h3>By tenant</h3>
            {holders.length === 0 ? (
              <p className="muted small">No tenant holds a GPU.</p>
            ) : (
              <table className="mini-table" data-testid="cluster-by-tenant">
                <thead>
                  <tr>
                    <th scope="col">Tenant</th>
                    <th scope="col" className="num">
                      GPUs
                    </th>
                    <th scope="col" className="num">
                      Borrowed
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {holders.map(([slug, held]) => (
                    <tr key={slug} data-tenant={slug}>
                      <th scope="row" title={slug}>
                        {tenantNames.get(slug) ?? slug}
                      </th>
                      <td className="num">{held.gpus}</td>
                      <td className="num">{held.borrowed_gpus}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </div>
          <div className="admin-card">
            <h3>Engine</h3>
            {engineError ? (
              <p className="notice notice-error small" role="status">
                {engineError}
              </p>
            ) : facts.length === 0 ? (
              <p className="muted small">No engine facts.</p>
            ) : (
              <dl className="facts" data-testid="cluster-engine">
                {facts.map(([key, value]) => (
                  <div key={key} className="fact">
                    <dt>{key}</dt>
                    <dd>{value}</dd>
                  </div>
                ))}
              </dl>
            )}
          </div>
        </div>
      )}
    </section>
  );
}
