import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Link } from 'react-router';
import { ApiErrorNotice } from '../../components/ApiErrorNotice';
import { EngineModeBadge, SimulatedNote } from '../../components/EngineMode';
import type { ClusterTimeline } from '../../api/types';
import { asApiError } from '../../query/client';
import { queryKeys } from '../../query/keys';
import { jobPath } from '../../routing/routes';
import { useSession } from '../../session';
import { effectiveMfu, formatSpeedup, meanValue, verlExplanation } from './efficiency';
import { PatternDefs, patternFill, TimelineChart } from './TimelineChart';
import {
  currentShares,
  currentUtilisation,
  formatPercent,
  formatSeconds,
  jobColor,
  KIND_GROUPS,
  kindLegend,
  legendJobs,
  lostNodeLines,
  OTHER_TENANT_LABEL,
  utilisation,
  viewStart,
  WINDOWS,
} from './timeline';
import { WindowChart } from './WindowChart';
import './cluster.css';

export const CLUSTER_REFRESH_MS = 2000;

/** `/cluster`: the shared cluster as it is assembled, sub-stage by sub-stage, like a jigsaw. */
export function ClusterPage() {
  const { api, tenant } = useSession();
  const [windowS, setWindowS] = useState<number>(WINDOWS[0]!.seconds);
  const timelineQuery = useQuery({
    queryKey: queryKeys.cluster(tenant.slug, windowS),
    queryFn: ({ signal }) => api.clusterTimeline(windowS, signal),
    refetchInterval: CLUSTER_REFRESH_MS,
    // The previous window stays drawn (marked stale below) until the new one comes back.
    placeholderData: keepPreviousData,
  });
  const timeline = timelineQuery.data ?? null;
  const error = timelineQuery.error ? asApiError(timelineQuery.error) : null;

  const derived = useMemo(() => {
    if (!timeline) return null;
    const { spans, num_devices: n, now_s: now } = timeline;
    const since = viewStart(timeline.since_s, spans);
    return {
      since,
      util: utilisation(spans, n, since, now, 60),
      mfu: effectiveMfu(timeline.steps, n, timeline.peak_flops, since, now, 60),
      windowText: formatSeconds(now - since),
      now: currentUtilisation(spans, n),
      shares: currentShares(spans, n),
      jobs: legendJobs(spans),
    };
  }, [timeline]);

  // A freshly chosen window is only shown once its data came back.
  const stale = timeline !== null && Math.abs(timeline.now_s - timeline.since_s - windowS) > 1;

  return (
    <section className="cluster-page" data-testid="cluster-page">
      <div className="page-head">
        <div>
          <h1>Cluster</h1>
          <p className="muted cluster-sub">
            The shared cluster, piece by piece: every sub-stage of every job on the devices it ran on. Times are
            the engine&apos;s clock.
          </p>
        </div>
        <label className="cluster-window">
          <span>Window</span>
          <select data-testid="cluster-window" value={windowS} onChange={(e) => setWindowS(Number(e.target.value))}>
            {WINDOWS.map((w) => (
              <option key={w.seconds} value={w.seconds}>
                last {w.label}
              </option>
            ))}
          </select>
        </label>
      </div>

      {error && <ApiErrorNotice title={`Could not load the cluster timeline: ${error.message}`} error={error} testId="cluster-error" />}
      {!timeline && !error && <p className="muted">Loading…</p>}

      {timeline && derived && (
        <div className={`cluster-layout${stale ? ' cluster-stale' : ''}`} aria-busy={stale}>
          <div className="cluster-main">
            <p className="cluster-summary" data-testid="cluster-summary">
              {timeline.num_devices} × {timeline.device_type.toUpperCase()} · engine time {formatSeconds(timeline.now_s)}{' '}
              · {timeline.spans.length} sub-stages in the last {formatSeconds(timeline.now_s - timeline.since_s)}{' '}
              <EngineModeBadge mode={timeline.engine_mode} />
            </p>
            {timeline.engine_mode === 'simulated' && <SimulatedNote subject="Simulated engine" />}
            {timeline.lost_devices.length > 0 && (
              <div className="cluster-lost" role="alert" data-testid="cluster-lost">
                <strong>Devices lost.</strong> Nothing is placed on them until a node joins again; the jobs that ran
                there resume from their checkpoints on what remains, or wait.
                <ul>
                  {lostNodeLines(timeline.lost_devices, timeline.now_s).map((line) => (
                    <li key={line} data-testid="cluster-lost-node">
                      {line}
                    </li>
                  ))}
                </ul>
              </div>
            )}
            <TimelineChart timeline={timeline} />
            {timeline.spans.length === 0 && (
              <p className="muted" data-testid="cluster-empty">
                Nothing ran on the cluster in this window.
              </p>
            )}
            <h2>Utilisation and efficiency</h2>
            <div className="cluster-util">
              <div className="cluster-util-charts">
                <WindowChart
                  testId="cluster-util-chart"
                  name="Utilisation"
                  points={derived.util}
                  since={derived.since}
                  now={timeline.now_s}
                  scale="full"
                  label={`Cluster utilisation over the last ${derived.windowText} of engine time, mean ${formatPercent(meanValue(derived.util))}`}
                  value={
                    <span data-testid="cluster-util-mean" data-value={meanValue(derived.util).toFixed(4)}>
                      mean {formatPercent(meanValue(derived.util))}
                    </span>
                  }
                  help="Share-weighted device-time of every sub-stage, over all devices."
                />
                <WindowChart
                  testId="cluster-mfu-chart"
                  name="Effective MFU"
                  points={derived.mfu}
                  since={derived.since}
                  now={timeline.now_s}
                  scale="fit"
                  label={`Effective MFU over the last ${derived.windowText} of engine time, mean ${formatPercent(meanValue(derived.mfu))}`}
                  value={
                    <span data-testid="cluster-mfu-mean" data-value={meanValue(derived.mfu).toFixed(4)}>
                      mean {formatPercent(meanValue(derived.mfu))}
                    </span>
                  }
                  help="Training-equivalent FLOPs of the finished steps (6 × parameters × tokens, each step spread over its own time) over what every device could do at peak. A step counts once it ends."
                />
              </div>
              <div className="cluster-now">
                <VerlReadout timeline={timeline} />
                <p className="cluster-now-value">
                  <span className="muted">Now</span>{' '}
                  <strong data-testid="cluster-util-now" data-value={derived.now.toFixed(4)}>
                    {formatPercent(derived.now)}
                  </strong>{' '}
                  <span className="muted">of the cluster busy</span>
                </p>
                <h3>Share of the cluster now</h3>
                {derived.shares.length === 0 ? (
                  <p className="muted">Nothing running.</p>
                ) : (
                  <ul className="cluster-shares" data-testid="cluster-shares">
                    {derived.shares.map((s) => (
                      <li key={s.key} data-testid="cluster-share-item" data-job={s.job ?? ''}>
                        <span className="cluster-swatch" style={{ background: jobColor(s.job) }} aria-hidden="true" />
                        <span className="cluster-share-name">{s.job === null ? OTHER_TENANT_LABEL : s.name}</span>
                        <span className="cluster-share-bar" aria-hidden="true">
                          <span style={{ width: `${s.fraction * 100}%`, background: jobColor(s.job) }} />
                        </span>
                        <span className="cluster-share-value">
                          {formatPercent(s.fraction)} <span className="muted">({s.devices.toFixed(2)} dev)</span>
                        </span>
                      </li>
                    ))}
                  </ul>
                )}
              </div>
            </div>
          </div>
          <aside className="cluster-side" aria-label="Legend">
            <h2>Jobs</h2>
            {derived.jobs.length === 0 ? (
              <p className="muted">No jobs in this window.</p>
            ) : (
              <ul className="cluster-legend" data-testid="cluster-legend-jobs">
                {derived.jobs.map((j) => (
                  <li key={j.key} data-testid="cluster-legend-job" data-job={j.job ?? ''}>
                    <span className="cluster-swatch" style={{ background: j.color }} aria-hidden="true" />
                    {j.job === null ? (
                      <span className="muted">{OTHER_TENANT_LABEL}</span>
                    ) : (
                      <Link to={jobPath(j.job)} data-testid="cluster-job-link">
                        {j.name}
                      </Link>
                    )}
                    {j.running && <span className="cluster-running-tag">running</span>}
                  </li>
                ))}
              </ul>
            )}
            <h2>Sub-stages</h2>
            <KindLegend />
          </aside>
        </div>
      )}
    </section>
  );
}

/** Throughput of the window's finished steps against verl's estimated time for the same steps. */
function VerlReadout({ timeline }: { timeline: ClusterTimeline }) {
  const estimate = timeline.verl_estimate;
  const help = verlExplanation(estimate, formatSeconds);
  return (
    <div className="cluster-verl" data-testid="cluster-verl" data-speedup={estimate.speedup ?? ''}>
      <p className="cluster-now-value" title={help}>
        <strong className="cluster-verl-value" data-testid="cluster-verl-speedup">
          {formatSpeedup(estimate.speedup)}
        </strong>{' '}
        <span className="muted">throughput vs verl (estimated)</span>
      </p>
      {estimate.speedup === null && estimate.note && <p className="muted cluster-help">{estimate.note}</p>}
      <details>
        <summary>How is this estimated?</summary>
        <p className="cluster-help" data-testid="cluster-verl-help">
          {help}
        </p>
      </details>
    </div>
  );
}

function KindLegend() {
  const prefix = 'cluster-legend-pattern';
  const kinds = kindLegend();
  return (
    <ul className="cluster-legend cluster-kinds" data-testid="cluster-legend-kinds">
      {KIND_GROUPS.map((g) => {
        const id = `${prefix}-${g.group}`;
        const fill = patternFill(id, g.group);
        const letters = kinds.filter((k) => k.info.group === g.group);
        return (
          <li key={g.group} data-testid="cluster-legend-kind" data-group={g.group}>
            <svg width="28" height="16" aria-hidden="true" className="cluster-kind-swatch">
              <PatternDefs prefix={id} />
              <rect width="28" height="16" fill="#5d6675" />
              {fill && <rect width="28" height="16" fill={fill} />}
            </svg>
            <span>
              <strong>{g.label}</strong>
              {letters.length > 0 ? (
                <span className="muted">
                  {' '}
                  {letters.map((k) => `${k.info.letter} ${k.info.label}`).join(', ')}
                </span>
              ) : (
                <span className="muted"> {g.kinds}</span>
              )}
            </span>
          </li>
        );
      })}
      <li className="muted">Bar height is the span&apos;s share of its device; a running span has an outline.</li>
    </ul>
  );
}
