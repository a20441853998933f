import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useEffect, useMemo, useState } from 'react';
import { Link, useLocation, useNavigate } from 'react-router';
import { JOB_STATUSES, type Job } from '../api/types';
import { EngineModeBadge, SimulatedNote } from '../components/EngineMode';
import { ProgressBar } from '../components/ProgressBar';
import { StatusChip } from '../components/StatusChip';
import { formatAge, formatDateTime } from '../format';
import { asApiError } from '../query/client';
import { queryKeys } from '../query/keys';
import { jobPath } from '../routing/routes';
import { canWrite, useSession } from '../session';
import { formatDevices, formatGpuHours } from './job/usage';
import {
  buildJobsQuery,
  comparePath,
  estimateEtaSeconds,
  formatEta,
  isFiltered,
  MAX_COMPARE,
  parseJobFilters,
  type JobFilters,
} from './jobs/listing';
import './jobs/jobs.css';

const REFRESH_MS = 3_000;
const TYPING_DELAY_MS = 300;

/** `value`, once it has stopped changing for `delayMs`. */
function useDebounced<T>(value: T, delayMs: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), delayMs);
    return () => clearTimeout(timer);
  }, [value, delayMs]);
  return settled;
}

interface JobRowProps {
  job: Job;
  now: number;
  selected: boolean;
  selectDisabled: boolean;
  onToggle: (job: Job) => void;
}

function JobRow({ job, now, selected, selectDisabled, onToggle }: JobRowProps) {
  const label = job.name || job.id;
  const eta = formatEta(estimateEtaSeconds(job, now));
  return (
    <tr
      data-testid="job-row"
      data-job-id={job.id}
      data-status={job.status}
      className={selected ? 'row-selected' : undefined}
    >
      <td className="col-select">
        <input
          type="checkbox"
          data-testid="job-select"
          aria-label={`Select ${label} to compare`}
          checked={selected}
          disabled={selectDisabled && !selected}
          onChange={() => onToggle(job)}
        />
      </td>
      <td className="col-name">
        <Link to={jobPath(job.id)}>{label}</Link>
        {job.tags.length > 0 && (
          <span className="job-tags">
            {job.tags.map((t) => (
              <span key={t} className="job-tag">
                {t}
              </span>
            ))}
          </span>
        )}
      </td>
      <td className="col-status">
        <StatusChip job={job} />
      </td>
      <td className="col-mode">
        <EngineModeBadge mode={job.engine_mode} />
      </td>
      <td className="col-progress">
        <ProgressBar progress={job.progress} />
        <span className="job-eta" data-testid="job-eta" title="Estimated time left at the pace so far">
          ETA {eta}
        </span>
      </td>
      <td className="col-gpus" data-testid="job-gpus">
        {formatDevices(job.num_gpus, job.device_type)}
      </td>
      <td className="col-created">
        <time dateTime={job.created_at} title={formatDateTime(job.created_at)}>
          {formatAge(job.created_at, now)}
        </time>
      </td>
      <td className="col-gpu-hours" data-testid="job-gpu-hours">
        {formatGpuHours(job.gpu_seconds)}
      </td>
    </tr>
  );
}

function StatusFilter({ value, onChange }: { value: readonly string[]; onChange: (next: string[]) => void }) {
  const summary = value.length === 0 ? 'any' : value.length <= 2 ? value.join(', ') : `${value.length} selected`;
  const toggle = (status: string) =>
    onChange(value.includes(status) ? value.filter((s) => s !== status) : [...value, status]);
  return (
    <details className="status-filter" data-testid="status-filter">
      <summary data-testid="status-filter-toggle">
        Status: <strong>{summary}</strong>
      </summary>
      <fieldset className="status-filter-menu">
        <legend className="visually-hidden">Show jobs with status</legend>
        {JOB_STATUSES.map((s) => (
          <label key={s} className="status-option">
            <input
              type="checkbox"
              data-testid={`status-option-${s}`}
              checked={value.includes(s)}
              onChange={() => toggle(s)}
            />
            <span className={`chip chip-${s}`}>{s}</span>
          </label>
        ))}
        {value.length > 0 && (
          <button type="button" className="btn btn-quiet" onClick={() => onChange([])}>
            Any status
          </button>
        )}
      </fieldset>
    </details>
  );
}

/**
 * A text filter's input: what is typed, written to the URL once typing pauses; and when the
 * URL changes from outside (back, forward, a link), the input follows it.
 */
function useTextFilter(fromUrl: string, write: (value: string) => void): [string, (value: string) => void] {
  const [input, setInput] = useState(fromUrl);
  const settled = useDebounced(input, TYPING_DELAY_MS);
  useEffect(() => {
    if (settled.trim() !== fromUrl) write(settled);
    // Only a settled edit writes (hence `settled` alone): a URL changed from outside must not be
    // overwritten by a stale value.
  }, [settled]);
  const [seen, setSeen] = useState(fromUrl);
  if (seen !== fromUrl) {
    setSeen(fromUrl);
    if (input.trim() !== fromUrl) setInput(fromUrl);
  }
  return [input, setInput];
}

/** `/`: the tenant's jobs, filtered (the filters live in the URL), refreshed every 3 s; pick some to compare. */
export function JobsPage() {
  const { api, tenant } = useSession();
  const { pathname, search } = useLocation();
  const navigate = useNavigate();
  /** Show `filters` in this page's URL (replacing the entry: editing a filter is not a page to go back to). */
  const showFilters = (next: JobFilters) => navigate(pathname + buildJobsQuery(next), { replace: true });
  const filters = useMemo(() => parseJobFilters(search, JOB_STATUSES), [search]);
  const { statuses } = filters;
  const current = () => parseJobFilters(window.location.search, JOB_STATUSES);
  const setStatuses = (next: string[]) => showFilters({ ...current(), statuses: next });
  const [nameInput, setNameInput] = useTextFilter(filters.name, (name) => showFilters({ ...current(), name }));
  const [tagInput, setTagInput] = useTextFilter(filters.tag, (tag) => showFilters({ ...current(), tag }));
  const query = buildJobsQuery(filters);

  // A cursor link belongs to the query it came from; a new filter starts at the first page.
  const [cursor, setCursor] = useState<{ query: string; url: string | null }>({ query: '', url: null });
  const pageUrl = cursor.query === query ? cursor.url : null;
  const setPageUrl = (url: string | null) => setCursor({ query, url });
  // Selected job ids, in the order picked; kept across filters and pages.
  const [selected, setSelected] = useState<string[]>([]);

  const jobsQuery = useQuery({
    queryKey: queryKeys.jobsList(tenant.slug, query, pageUrl),
    queryFn: ({ signal }) => api.listJobsQuery(query, pageUrl, signal),
    refetchInterval: REFRESH_MS,
    // A new filter or page keeps the rows shown until its own answer is in.
    placeholderData: keepPreviousData,
  });
  const page = jobsQuery.data ?? null;
  const error = jobsQuery.error ? asApiError(jobsQuery.error) : null;
  // Ages and ETAs are as of the answer shown.
  const now = jobsQuery.dataUpdatedAt || Date.now();

  const full = selected.length >= MAX_COMPARE;
  const toggle = (job: Job) =>
    setSelected((ids) =>
      ids.includes(job.id) ? ids.filter((id) => id !== job.id) : ids.length < MAX_COMPARE ? [...ids, job.id] : ids,
    );
  const rows = page?.results ?? [];
  const allOnPageSelected = rows.length > 0 && rows.every((j) => selected.includes(j.id));
  const toggleAllOnPage = () =>
    setSelected((ids) => {
      if (allOnPageSelected) return ids.filter((id) => !rows.some((j) => j.id === id));
      const next = [...ids];
      for (const j of rows) if (!next.includes(j.id) && next.length < MAX_COMPARE) next.push(j.id);
      return next;
    });
  const filtered = isFiltered(filters);

  return (
    <>
      <div className="page-head">
        <h1>Jobs</h1>
        <div className="page-actions">
          <button
            type="button"
            className="btn"
            data-testid="compare-button"
            disabled={selected.length < 2}
            title={selected.length < 2 ? 'Select two or more jobs to compare their curves' : undefined}
            onClick={() => navigate(comparePath(selected))}
          >
            Compare ({selected.length})
          </button>
          {selected.length > 0 && (
            <button type="button" className="btn btn-quiet" data-testid="clear-selection" onClick={() => setSelected([])}>
              Clear selection
            </button>
          )}
          {canWrite(tenant) && (
            <Link to="/new" className="btn btn-primary" data-testid="new-job-button">
              New job
            </Link>
          )}
        </div>
      </div>

      <div className="jobs-filters" role="search" aria-label="Filter jobs">
        <StatusFilter value={statuses} onChange={setStatuses} />
        <label className="inline-field">
          <span>Name</span>
          <input
            type="search"
            data-testid="name-filter"
            placeholder="contains…"
            value={nameInput}
            onChange={(e) => setNameInput(e.target.value)}
          />
        </label>
        <label className="inline-field">
          <span>Tag</span>
          <input
            type="search"
            data-testid="tag-filter"
            placeholder="exact tag"
            value={tagInput}
            onChange={(e) => setTagInput(e.target.value)}
          />
        </label>
        {full && (
          <span className="muted" role="status">
            At most {MAX_COMPARE} jobs can be compared.
          </span>
        )}
      </div>

      {error && (
        <div className="notice notice-error" role="alert">
          Could not refresh the job list: {error.message}
        </div>
      )}

      {page?.results.some((j) => j.engine_mode === 'simulated') && <SimulatedNote subject="Simulated runs" />}

      {page === null ? (
        !error && <p className="muted">Loading jobs…</p>
      ) : page.results.length === 0 ? (
        <p className="muted empty" data-testid="jobs-empty">
          {filtered ? 'No jobs match these filters.' : 'No jobs yet.'}
          {canWrite(tenant) && !filtered && ' Submit one with “New job”.'}
        </p>
      ) : (
        <table className="jobs-table" data-testid="jobs-table">
          <thead>
            <tr>
              <th scope="col" className="col-select">
                <input
                  type="checkbox"
                  data-testid="select-all"
                  aria-label="Select every job on this page"
                  checked={allOnPageSelected}
                  onChange={toggleAllOnPage}
                />
              </th>
              <th scope="col">Name</th>
              <th scope="col">Status</th>
              <th scope="col">Mode</th>
              <th scope="col">Progress</th>
              <th scope="col">GPUs</th>
              <th scope="col">Created</th>
              <th scope="col">GPU-hours</th>
            </tr>
          </thead>
          <tbody>
            {page.results.map((job) => (
              <JobRow
                key={job.id}
                job={job}
                now={now}
                selected={selected.includes(job.id)}
                selectDisabled={full}
                onToggle={toggle}
              />
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
