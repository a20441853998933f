import { useQuery } from '@tanstack/react-query';
import type { AdminApi, QueueEntry } from '../../api/admin';
import { formatAge, formatClock, formatDateTime } from '../../format';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { reasonCounts, splitReason } from './display';

export const QUEUE_REFRESH_MS = 2_000;

function Reason({ entry }: { entry: QueueEntry }) {
  if (entry.admitted) {
    return <span className="muted">admitted, starting</span>;
  }
  const { code, detail } = splitReason(entry.reason);
  if (!entry.reason) return <span className="muted">waiting for the next admission pass</span>;
  if (!code) return <>{detail}</>;
  return (
    <>
      <span className={`reason-code reason-${code}`}>{code}</span>: {detail}
    </>
  );
}

/** Every queued job on the cluster and why it waits, refreshed every 2 s. */
export function QueueSection({ api }: { api: AdminApi }) {
  const queueQuery = useQuery({
    queryKey: queryKeys.adminQueue(),
    queryFn: ({ signal }) => api.getQueue(signal),
    refetchInterval: QUEUE_REFRESH_MS,
  });
  const entries = queueQuery.data ?? null;
  const error = queueQuery.error ? asApiError(queueQuery.error) : null;
  // Waiting times are as of the answer shown.
  const now = queueQuery.dataUpdatedAt || Date.now();

  const counts = entries ? reasonCounts(entries) : [];

  return (
    <section className="admin-section" aria-labelledby="admin-queue-title" data-testid="admin-queue">
      <div className="section-head">
        <h2 id="admin-queue-title">Global queue</h2>
        {entries && (
          <span className="muted" data-testid="queue-updated">
            {entries.length === 1 ? '1 job' : `${entries.length} jobs`} · updated{' '}
            <time dateTime={new Date(now).toISOString()}>{formatClock(new Date(now).toISOString())}</time>
          </span>
        )}
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not refresh the queue: {error.message}
        </div>
      )}
      {counts.length > 0 && (
        <ul className="reason-summary" aria-label="Queued jobs by reason">
          {counts.map(([code, n]) => (
            <li key={code} className={`chip reason-chip reason-${code}`}>
              {code} {n}
            </li>
          ))}
        </ul>
      )}
      {entries === null ? (
        !error && <p className="muted">Loading the queue…</p>
      ) : entries.length === 0 ? (
        <p className="muted empty" data-testid="queue-empty">
          No job is queued.
        </p>
      ) : (
        <div className="table-scroll">
          <table className="jobs-table admin-table queue-table">
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Tenant</th>
                <th scope="col" className="num">
                  GPUs
                </th>
                <th scope="col" className="num">
                  Priority
                </th>
                <th scope="col">Reason</th>
                <th scope="col">Queued</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr
                  key={e.id}
                  data-testid="queue-row"
                  data-job-id={e.id}
                  data-tenant={e.tenant}
                  data-admitted={e.admitted ? 'true' : 'false'}
                >
                  <td className="col-name">
                    {e.name || <span className="muted">(no name)</span>}
                    <div className="job-id muted" title={e.id}>
                      {e.id.slice(0, 8)}
                    </div>
                  </td>
                  <td>
                    <code>{e.tenant}</code>
                  </td>
                  <td className="num">{e.num_gpus}</td>
                  <td className="num">{e.priority}</td>
                  <td className="col-reason" data-testid="queue-reason">
                    <Reason entry={e} />
                  </td>
                  <td className="col-created">
                    <time dateTime={e.created_at} title={formatDateTime(e.created_at)}>
                      {formatAge(e.created_at, now)}
                    </time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
