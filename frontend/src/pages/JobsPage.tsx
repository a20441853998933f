import { useState } from 'react';
import { ApiError } from '../api/errors';
import { JOB_STATUSES, type Job, type Page } from '../api/types';
import { ProgressBar } from '../components/ProgressBar';
import { StatusChip } from '../components/StatusChip';
import { formatAge, formatDateTime } from '../format';
import { usePolling } from '../hooks/usePolling';
import { Link } from '../routing/navigation';
import { jobPath } from '../routing/routes';
import { canWrite, useSession } from '../session';

const REFRESH_MS = 3_000;

function JobRow({ job, now }: { job: Job; now: number }) {
  return (
    <tr data-testid="job-row" data-job-id={job.id} data-status={job.status}>
      <td className="col-name">
        <Link to={jobPath(job.id)}>{job.name || job.id}</Link>
      </td>
      <td className="col-status">
        <StatusChip job={job} />
      </td>
      <td className="col-progress">
        <ProgressBar progress={job.progress} />
      </td>
      <td className="col-created">
        <time dateTime={job.created_at} title={formatDateTime(job.created_at)}>
          {formatAge(job.created_at, now)}
        </time>
      </td>
    </tr>
  );
}

/** `/`: the tenant's jobs, refreshed every 3 s. */
export function JobsPage() {
  const { api, tenant } = useSession();
  const [status, setStatus] = useState('');
  const [pageUrl, setPageUrl] = useState<string | null>(null);
  const [page, setPage] = useState<Page<Job> | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [now, setNow] = useState(() => Date.now());

  usePolling(
    async (signal) => {
      const result = await api.listJobs({ status, pageUrl }, signal);
      setPage(result);
      setError(null);
      setNow(Date.now());
    },
    REFRESH_MS,
    [api, status, pageUrl],
    { onError: (e) => setError(e instanceof ApiError ? e : new ApiError(0, 'error', String(e))) },
  );

  return (
    <>
      <div className="page-head">
        <h1>Jobs</h1>
        <div className="page-actions">
          <label className="inline-field">
            <span>Status</span>
            <select
              value={status}
              onChange={(e) => {
                setStatus(e.target.value);
                setPageUrl(null);
              }}
            >
              <option value="">all</option>
              {JOB_STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          {canWrite(tenant) && (
            <Link to="/new" className="btn btn-primary" data-testid="new-job-button">
              New job
            </Link>
          )}
        </div>
      </div>

      {error && (
        <div className="notice notice-error" role="alert">
          Could not refresh the job list: {error.message}
        </div>
      )}

      {page === null ? (
        !error && <p className="muted">Loading jobs…</p>
      ) : page.results.length === 0 ? (
        <p className="muted empty">
          {status ? `No ${status} jobs.` : 'No jobs yet.'}
          {canWrite(tenant) && !status && ' Submit one with “New job”.'}
        </p>
      ) : (
        <table className="jobs-table">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Progress</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {page.results.map((job) => (
              <JobRow key={job.id} job={job} now={now} />
            ))}
          </tbody>
        </table>
      )}

      {page && (page.previous || page.next) && (
        <nav className="pager" aria-label="Job list pages">
          <button type="button" className="btn" disabled={!page.previous} onClick={() => setPageUrl(page.previous)}>
            ← Previous
          </button>
          <button type="button" className="btn" disabled={!page.next} onClick={() => setPageUrl(page.next)}>
            Next →
          </button>
        </nav>
      )}
    </>
  );
}
