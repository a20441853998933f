import { useCallback, useEffect, useRef, useState } from 'react';
import { isAbort } from '../api/client';
import { ApiError } from '../api/errors';
import { isTerminal, type Job, type JobEvent, type JobStatus } from '../api/types';
import { applyMetricEvents, mergeSeriesMaps, normalizeSeries, orderMetricNames, type SeriesMap } from '../charts/series';
import { EventList } from '../components/EventList';
import { LineChart } from '../components/LineChart';
import { LiveIndicator } from '../components/LiveIndicator';
import { ProgressBar } from '../components/ProgressBar';
import { StatusChip } from '../components/StatusChip';
import { formatDateTime } from '../format';
import { usePolling } from '../hooks/usePolling';
import { mergeEvents } from '../live/eventLog';
import { JobStream, type StreamState } from '../live/jobStream';
import { Link } from '../routing/navigation';
import { canWrite, useSession } from '../session';

const REFRESH_MS = 3_000;

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, 'error', String(e));
}

/** `/jobs/<id>`: one job, its live charts and its events. */
export function JobPage({ jobId }: { jobId: string }) {
  const { api, tenant } = useSession();
  const [job, setJob] = useState<Job | null>(null);
  const [loadError, setLoadError] = useState<ApiError | null>(null);
  const [series, setSeries] = useState<SeriesMap>({});
  const [metricsError, setMetricsError] = useState('');
  const [events, setEvents] = useState<JobEvent[]>([]);
  const [stream, setStream] = useState<StreamState>('connecting');
  const [cancelState, setCancelState] = useState<{ busy: boolean; error: string }>({ busy: false, error: '' });

  const jobRef = useRef<Job | null>(null);
  useEffect(() => {
    jobRef.current = job;
  }, [job]);
  // Bumped by each status event. A GET that started before the latest status event
  // may carry an older status, so its status is not allowed to overwrite the event's.
  const statusGen = useRef(0);

  const fetchJob = useCallback(
    async (signal?: AbortSignal) => {
      const gen = statusGen.current;
      const fresh = await api.getJob(jobId, signal);
      setLoadError(null);
      setJob((prev) =>
        prev && gen !== statusGen.current
          ? { ...fresh, status: prev.status, status_reason: prev.status_reason }
          : fresh,
      );
    },
    [api, jobId],
  );

  const terminal = job !== null && isTerminal(job.status);
  usePolling(fetchJob, REFRESH_MS, [fetchJob], {
    enabled: !terminal && loadError?.status !== 404,
    onError: (e) => setLoadError(asApiError(e)),
  });

  // Metric history, fetched once; the socket adds to it from then on.
  useEffect(() => {
    const controller = new AbortController();
    api
      .getMetrics(jobId, controller.signal)
      .then((res) => setSeries((live) => mergeSeriesMaps(normalizeSeries(res.series), live)))
      .catch((e: unknown) => {
        if (!isAbort(e)) setMetricsError(asApiError(e).message);
      });
    return () => controller.abort();
  }, [api, jobId]);

  // The event stream. after=0 replays the stored history (the events list needs it;
  // metric points it repeats merge by step), then stays live.
  useEffect(() => {
    const onEvents = (batch: JobEvent[]) => {
      setEvents((prev) => mergeEvents(prev, batch));
      setSeries((prev) => applyMetricEvents(prev, batch));
      let latest: { status: string; reason: string } | null = null;
      for (const e of batch) if (e.kind === 'status') latest = e.data;
      if (latest) {
        const { status, reason } = latest;
        statusGen.current += 1;
        setJob((prev) => (prev ? { ...prev, status: status as JobStatus, status_reason: reason ?? '' } : prev));
        fetchJob().catch(() => {}); // progress, timestamps; polling reports failures
      }
    };
    const live = new JobStream({
      jobId,
      after: 0,
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

  const cancel = async () => {
    setCancelState({ busy: true, error: '' });
    try {
      const updated = await api.cancelJob(jobId);
      statusGen.current += 1;
      setJob(updated);
      setCancelState({ busy: false, error: '' });
    } catch (e) {
      setCancelState({ busy: false, error: asApiError(e).message });
    }
  };

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

  const names = orderMetricNames(Object.keys(series));
  const showCancel = !terminal && canWrite(tenant);

  return (
    <>
      <p className="breadcrumb">
        <Link to="/">Jobs</Link> / <span>{job.name}</span>
      </p>
      <div className="job-head">
        <div className="job-title">
          <h1>{job.name}</h1>
          <StatusChip job={job} showReason />
          <LiveIndicator state={stream} />
        </div>
        {showCancel && (
          <button
            type="button"
            className="btn btn-danger"
            data-testid="cancel-job"
            onClick={cancel}
            disabled={cancelState.busy || job.status === 'cancelling'}
          >
            {job.status === 'cancelling' ? 'Cancelling…' : cancelState.busy ? 'Cancelling…' : 'Cancel job'}
          </button>
        )}
      </div>

      {cancelState.error && (
        <div className="notice notice-error" role="alert">
          Cancel failed: {cancelState.error}
        </div>
      )}
      {loadError && (
        <div className="notice notice-error" role="alert">
          Could not refresh the job: {loadError.message}
        </div>
      )}

      <div className="job-meta">
        <ProgressBar progress={job.progress} />
        <dl>
          <div>
            <dt>Created</dt>
            <dd>{formatDateTime(job.created_at)}</dd>
          </div>
          <div>
            <dt>Started</dt>
            <dd>{formatDateTime(job.started_at)}</dd>
          </div>
          <div>
            <dt>Finished</dt>
            <dd>{formatDateTime(job.finished_at)}</dd>
          </div>
          <div>
            <dt>ID</dt>
            <dd>
              <code>{job.id}</code>
            </dd>
          </div>
        </dl>
      </div>

      <section aria-labelledby="metrics-title">
        <h2 id="metrics-title">Metrics</h2>
        {metricsError && (
          <div className="notice notice-error" role="alert">
            Could not load the metric history ({metricsError}); showing live points only.
          </div>
        )}
        {names.length === 0 ? (
          <p className="muted">No metrics yet.</p>
        ) : (
          <div className="charts">
            {names.map((name) => (
              <LineChart key={name} name={name} points={series[name]!} />
            ))}
          </div>
        )}
      </section>

      <EventList events={events} />

      <details className="spec-view">
        <summary>Spec</summary>
        <pre>{JSON.stringify(job.spec, null, 2)}</pre>
      </details>
    </>
  );
}
