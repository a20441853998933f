import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useMemo, useState } from 'react';
import { Link } from 'react-router';
import { isTerminal, type Job, type JobEvent } from '../api/types';
import type { SeriesMap } from '../charts/series';
import { EngineModeBadge, SimulatedNote } from '../components/EngineMode';
import { EventList } from '../components/EventList';
import { LiveIndicator } from '../components/LiveIndicator';
import { ProgressBar } from '../components/ProgressBar';
import { asApiError } from '../query/client';
import { queryKeys } from '../query/keys';
import { canWrite, useSession } from '../session';
import { LATEST } from './job/actions';
import { CheckpointsPanel } from './job/CheckpointsPanel';
import { CloneDialog } from './job/CloneDialog';
import { DeleteDialog } from './job/DeleteDialog';
import { DownloadCsvLink } from './job/DownloadCsvLink';
import { EstimateAccuracy } from './job/EstimateAccuracy';
import { JobActions } from './job/JobActions';
import { JobFacts } from './job/JobFacts';
import { JobMetricCharts } from './job/JobMetricCharts';
import { mergeJobResponse } from './job/jobCache';
import { jobQuery, metricsQuery } from './job/jobQueries';
import { JobStatusLine } from './job/JobStatusLine';
import { LogsPanel } from './job/LogsPanel';
import { SamplesPanel } from './job/SamplesPanel';
import { useJobStream } from './job/useJobStream';
import './job/job.css';

const REFRESH_MS = 3_000;
const CHECKPOINTS_MS = 5_000;
/** Points per metric in the initial history (downsampled on the server); live points add to it. */
const HISTORY_POINTS = 500;
const NO_EVENTS: JobEvent[] = [];
const NO_SERIES: SeriesMap = {};

/**
 * `/jobs/<id>`: one job: its status and why, actions (pause, resume, cancel, clone), usage,
 * live charts, checkpoints, logs, sampled completions and events.
 */
export function JobPage({ jobId }: { jobId: string }) {
  const { api, tenant } = useSession();
  const client = useQueryClient();
  /** The clone form's starting checkpoint while it is open; null when closed. */
  const [cloneFrom, setCloneFrom] = useState<string | null>(null);
  const [deleting, setDeleting] = useState(false);

  const stream = useJobStream(jobId, HISTORY_POINTS);
  const jobKey = useMemo(() => queryKeys.job(tenant.slug, jobId), [tenant.slug, jobId]);
  // Polled only while the stream is not live: a live stream brings status and step, and
  // each new status event refetches the rest (see useJobStream).
  const read = { api, client, tenant: tenant.slug, jobId };
  const jobResult = useQuery({
    ...jobQuery(read),
    refetchInterval: (query) => {
      const cached = query.state.data;
      if (stream === 'live' || (cached && isTerminal(cached.status))) return false;
      return query.state.error && asApiError(query.state.error).status === 404 ? false : REFRESH_MS;
    },
  });
  const job = jobResult.data ?? null;
  const loadError = jobResult.error ? asApiError(jobResult.error) : null;
  const terminal = job !== null && isTerminal(job.status);

  // Checkpoints: polled while the job runs, refetched at each status event (a pause
  // records one); a finished job's are loaded once.
  const checkpointsQuery = useQuery({
    queryKey: queryKeys.checkpoints(tenant.slug, jobId),
    queryFn: ({ signal }) => api.listCheckpoints(jobId, signal),
    enabled: job !== null,
    refetchInterval: terminal ? false : CHECKPOINTS_MS,
  });
  const checkpoints = checkpointsQuery.data ?? null;
  const checkpointsError = checkpointsQuery.error ? asApiError(checkpointsQuery.error).message : '';

  // Metric history, downsampled on the server; the stream adds live points to the same entry.
  const metricsResult = useQuery(metricsQuery(read, HISTORY_POINTS));
  const series = metricsResult.data ?? NO_SERIES;
  const metricsError = metricsResult.error ? asApiError(metricsResult.error).message : '';

  // Written by the stream only; there is nothing to fetch.
  const eventsKey = queryKeys.events(tenant.slug, jobId);
  const { data: events } = useQuery({
    queryKey: eventsKey,
    queryFn: () => client.getQueryData<JobEvent[]>(eventsKey) ?? NO_EVENTS,
    initialData: NO_EVENTS,
    staleTime: Infinity,
  });

  /** The job as an action's response left it (unless the stream has already shown a later status). */
  const applyAction = useCallback(
    (updated: Job) => client.setQueryData<Job>(jobKey, (cached) => mergeJobResponse(cached, updated)),
    [client, jobKey],
  );
  const reload = useCallback(() => {
    void client.invalidateQueries({ queryKey: jobKey, exact: true });
  }, [client, jobKey]);

  if (!job) {
    if (loadError?.status === 404) {
      return (
        <div className="notice" role="status">
          No job <code>{jobId}</code> in tenant <strong>{tenant.name}</strong>. It may belong to another
          tenant. <Link to="/">Back to jobs</Link>
        </div>
      );
    }
    if (loadError) {
      return (
        <div className="notice notice-error" role="alert">
          Could not load the job: {loadError.message}
        </div>
      );
    }
    return <p className="muted">Loading job…</p>;
  }

  const writable = canWrite(tenant);

  return (
    <>
      <p className="breadcrumb">
        <Link to="/">Jobs</Link> / <span>{job.name}</span>
      </p>
      <div className="job-head job-head-actions">
        <div className="job-title">
          <h1>{job.name}</h1>
          <JobStatusLine job={job} />
          <EngineModeBadge mode={job.engine_mode} />
          <LiveIndicator state={stream} />
        </div>
        {writable && (
          <JobActions
            job={job}
            onJob={applyAction}
            onStale={reload}
            onClone={() => setCloneFrom(LATEST)}
            onDelete={() => setDeleting(true)}
          />
        )}
      </div>

      {loadError && (
        <div className="notice notice-error" role="alert">
          Could not refresh the job: {loadError.message}
        </div>
      )}

      {job.engine_mode === 'simulated' && <SimulatedNote />}

      <div className="job-meta">
        <ProgressBar progress={job.progress} />
        <JobFacts job={job} />
      </div>

      <section aria-labelledby="metrics-title">
        <div className="section-head">
          <h2 id="metrics-title">Metrics</h2>
          <DownloadCsvLink jobId={job.id} />
        </div>
        {metricsError && (
          <div className="notice notice-error" role="alert">
            Could not load the metric history ({metricsError}); showing live points only.
          </div>
        )}
        {Object.keys(series).length === 0 ? (
          <p className="muted">No metrics yet.</p>
        ) : (
          <JobMetricCharts jobId={job.id} series={series} />
        )}
      </section>

      <div className="job-panels">
        <CheckpointsPanel
          checkpoints={checkpoints}
          error={checkpointsError}
          totalSteps={job.progress.total_steps}
          onCloneFrom={writable ? (step) => setCloneFrom(String(step)) : undefined}
        />
        <LogsPanel jobId={job.id} terminal={terminal} />
      </div>

      <EstimateAccuracy api={api} jobId={job.id} terminal={terminal} />

      <SamplesPanel jobId={job.id} terminal={terminal} />

      <EventList events={events} />

      <details className="spec-view">
        <summary>Spec</summary>
        <pre>{JSON.stringify(job.spec, null, 2)}</pre>
      </details>

      {cloneFrom !== null && (
        <CloneDialog
          job={job}
          checkpoints={checkpoints ?? []}
          initialCheckpoint={cloneFrom}
          onClose={() => setCloneFrom(null)}
        />
      )}
      {deleting && <DeleteDialog job={job} onClose={() => setDeleting(false)} />}
    </>
  );
}
