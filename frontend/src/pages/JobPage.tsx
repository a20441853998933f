import { useCallback, useEffect, useRef, useState } from 'react';
import { isAbort } from '../api/client';
import { ApiError } from '../api/errors';
import { isTerminal, type Checkpoint, type Job, type JobEvent, type JobStatus } from '../api/types';
import { applyMetricEvents, mergeSeriesMaps, normalizeSeries, type SeriesMap } from '../charts/series';
import { EngineModeBadge, SimulatedNote } from '../components/EngineMode';
import { EventList } from '../components/EventList';
import { LiveIndicator } from '../components/LiveIndicator';
import { ProgressBar } from '../components/ProgressBar';
import { usePolling } from '../hooks/usePolling';
import { mergeEvents } from '../live/eventLog';
import { JobStream, type StreamState } from '../live/jobStream';
import { Link } from '../routing/navigation';
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
import { JobStatusLine } from './job/JobStatusLine';
import { LogsPanel } from './job/LogsPanel';
import { keepLatestProgress, progressFromEvents } from './job/progress';
import { SamplesPanel } from './job/SamplesPanel';
import './job/job.css';

const REFRESH_MS = 3_000;
const CHECKPOINTS_MS = 5_000;
/** "Not polling": loaded when the page opens (or the job's status changes), then idle. */
const IDLE_MS = 3_600_000;
/** Points per metric in the initial history (downsampled on the server); live points add to it. */
const HISTORY_POINTS = 500;

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
}

/**
 * `/jobs/<id>`: one job: its status and why, actions (pause, resume, cancel, clone), usage,
 * live charts, checkpoints, logs, sampled completions and events.
 */
export function JobPage({ jobId }: { jobId: string }) {
  const { api, tenant } = useSession();
  const [job, setJob] = useState<Job | null>(null);
  const [loadError, setLoadError] = useState<ApiError | null>(null);
  const [series, setSeries] = useState<SeriesMap>({});
  const [metricsError, setMetricsError] = useState('');
  const [events, setEvents] = useState<JobEvent[]>([]);
  const [stream, setStream] = useState<StreamState>('connecting');
  const [checkpoints, setCheckpoints] = useState<Checkpoint[] | null>(null);
  const [checkpointsError, setCheckpointsError] = useState('');
  /** The clone form's starting checkpoint while it is open; null when closed. */
  const [cloneFrom, setCloneFrom] = useState<string | null>(null);
  const [deleting, setDeleting] = useState(false);

  const jobRef = useRef<Job | null>(null);
  useEffect(() => {
    jobRef.current = job;
  }, [job]);
  // The seq of the newest status event shown. A response (a GET, or an action's) made
  // before that event carries an older status; it must not overwrite the event's.
  const statusSeq = useRef(0);
  const mergeResponse = useCallback((fresh: Job) => {
    setJob((prev) => {
      if (!prev) return fresh;
      const progress = keepLatestProgress(prev.progress, fresh.progress);
      return fresh.last_event_seq < statusSeq.current
        ? { ...fresh, progress, status: prev.status, status_reason: prev.status_reason }
        : { ...fresh, progress };
    });
  }, []);

  const fetchJob = useCallback(
    async (signal?: AbortSignal) => {
      const fresh = await api.getJob(jobId, signal);
      setLoadError(null);
      mergeResponse(fresh);
    },
    [api, jobId, mergeResponse],
  );

  const terminal = job !== null && isTerminal(job.status);
  usePolling(fetchJob, REFRESH_MS, [fetchJob], {
    enabled: !terminal && loadError?.status !== 404,
    onError: (e) => setLoadError(asApiError(e)),
  });

  // Checkpoints: polled while the job runs and reloaded at each status change (a pause
  // records one); a finished job's are loaded once.
  const loadCheckpoints = useCallback(
    async (signal: AbortSignal) => {
      setCheckpoints(await api.listCheckpoints(jobId, signal));
      setCheckpointsError('');
    },
    [api, jobId],
  );
  usePolling(loadCheckpoints, terminal ? IDLE_MS : CHECKPOINTS_MS, [loadCheckpoints, job?.status], {
    enabled: job !== null,
    onError: (e) => setCheckpointsError(asApiError(e).message),
  });

  // Metric history, fetched once (downsampled on the server); the socket adds to it from then on.
  useEffect(() => {
    const controller = new AbortController();
    api
      .getMetricHistory(jobId, HISTORY_POINTS, controller.signal)
      .then((res) => setSeries((live) => mergeSeriesMaps(normalizeSeries(res.series), live)))
      .catch((e: unknown) => {
        if (!isAbort(e)) setMetricsError(asApiError(e).message);
      });
    return () => controller.abort();
  }, [api, jobId]);

  // The event stream. after=0 replays the stored history of the kinds the events list
  // needs (metric history comes downsampled over REST above), then stays live for all.
  useEffect(() => {
    const onEvents = (batch: JobEvent[]) => {
      setEvents((prev) => mergeEvents(prev, batch));
      setSeries((prev) => applyMetricEvents(prev, batch));
      setJob((prev) => {
        if (!prev) return prev;
        const progress = progressFromEvents(prev.progress, batch);
        return progress === prev.progress ? prev : { ...prev, progress };
      });
      let latest: { status: string; reason: string } | null = null;
      for (const e of batch) {
        if (e.kind !== 'status' || e.seq < statusSeq.current) continue;
        latest = e.data;
        statusSeq.current = e.seq;
      }
      if (latest) {
        const { status, reason } = latest;
        setJob((prev) => (prev ? { ...prev, status: status as JobStatus, status_reason: reason ?? '' } : prev));
        fetchJob().catch(() => {}); // progress, timestamps; polling reports failures
      }
    };
    const live = new JobStream({
      jobId,
      after: 0,
      replayKinds: ['status', 'log', 'samples'],
      onEvents,
      onState: setStream,
      shouldReconnect: () => !(jobRef.current && isTerminal(jobRef.current.status)),
    });
    // Deferred one tick: StrictMode's mount-unmount-mount in development would
    // otherwise open and at once abort a socket, which the browser logs.
    const timer = setTimeout(() => live.start(), 0);
    return () => {
      clearTimeout(timer);
      live.stop();
    };
  }, [jobId, fetchJob]);

  /** The job as an action's response left it (unless the stream has already shown a later status). */
  const applyAction = useCallback((updated: Job) => mergeResponse(updated), [mergeResponse]);
  const reload = useCallback(() => {
    fetchJob().catch(() => {}); // polling reports failures
  }, [fetchJob]);

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
