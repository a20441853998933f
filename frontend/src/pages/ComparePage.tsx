import { useQueries, useQueryClient } from '@tanstack/react-query';
import { useMemo, useRef } from 'react';
import { Link, useLocation, useNavigate } from 'react-router';
import type { Job } from '../api/types';
import type { ChartLine } from '../charts/chartData';
import { chartTestId, metricUnit, type SeriesMap } from '../charts/series';
import { commonXAxes, jobClocks } from '../charts/xAxis';
import { EngineModeBadge, SimulatedNote } from '../components/EngineMode';
import { MetricBoard } from '../components/MetricBoard';
import { StatusChip } from '../components/StatusChip';
import { asApiError } from '../query/client';
import { jobPath } from '../routing/routes';
import { useSession } from '../session';
import { jobQuery, metricsQuery } from './job/jobQueries';
import { assignColors, COMPARE_MAX_POINTS, lineColor, metricsPresent } from './compare/compare';
import { comparePath, parseCompareIds } from './jobs/listing';
import './compare/compare.css';

/** A compared job once both its reads have answered (or failed). */
interface Loaded {
  job: Job | null;
  series: SeriesMap;
  error: string;
}

/**
 * The answers of [job, metrics, job, metrics, ...] reads, one entry per job: undefined while
 * either is in flight. Module-level, so useQueries keeps its result while nothing changes.
 */
function pairUp(results: readonly { data?: unknown; error: unknown; isPending: boolean }[]): (Loaded | undefined)[] {
  const out: (Loaded | undefined)[] = [];
  for (let i = 0; i + 1 < results.length; i += 2) {
    const [job, metrics] = [results[i]!, results[i + 1]!];
    if (job.isPending && !job.error) out.push(undefined);
    else if (metrics.isPending && !metrics.error) out.push(undefined);
    else {
      const failed = job.error ?? metrics.error;
      out.push({
        job: (job.data as Job | undefined) ?? null,
        series: (metrics.data as SeriesMap | undefined) ?? {},
        error: failed ? asApiError(failed).message : '',
      });
    }
  }
  return out;
}

/** `/compare?jobs=<id>,<id>`: the selected jobs' curves, one line per job on every metric's chart. */
export function ComparePage() {
  const { api, tenant } = useSession();
  const { search } = useLocation();
  const navigate = useNavigate();
  const ids = useMemo(() => parseCompareIds(search), [search]);
  const idsKey = ids.join(',');
  const client = useQueryClient();
  // The same cache entries as the job page's: opening a compared job shows it at once.
  const results = useQueries({
    queries: ids.flatMap((jobId) => {
      const read = { api, client, tenant: tenant.slug, jobId };
      return [jobQuery(read), metricsQuery(read, COMPARE_MAX_POINTS)];
    }),
    combine: pairUp,
  });
  const loaded = useMemo(
    () => Object.fromEntries(ids.flatMap((id, i) => (results[i] ? [[id, results[i]]] : []))),
    [idsKey, results], // idsKey stands for ids
  );

  // A job keeps its colour while it is compared, whichever others come and go.
  const colorIndex = useRef<Record<string, number>>({});
  const colors = useMemo(() => {
    colorIndex.current = assignColors(ids, colorIndex.current);
    return Object.fromEntries(ids.map((id) => [id, lineColor(colorIndex.current[id]!)]));
  }, [idsKey]); // idsKey stands for ids
  const label = (id: string) => loaded[id]?.job?.name || id;

  const present = useMemo(() => metricsPresent(ids.map((id) => loaded[id]?.series)), [ids, loaded]);
  const allLoaded = ids.every((id) => loaded[id] !== undefined);
  const linesByMetric = useMemo(() => {
    const clocks = Object.fromEntries(ids.map((id) => [id, jobClocks(loaded[id]?.series ?? {})]));
    const out: Record<string, ChartLine[]> = {};
    for (const metric of present) {
      out[metric] = ids
        .filter((id) => (loaded[id]?.series[metric]?.length ?? 0) > 0)
        .map((id) => ({
          id,
          label: loaded[id]?.job?.name || id,
          color: colors[id]!,
          points: loaded[id]!.series[metric]!,
          clocks: clocks[id],
        }));
    }
    return out;
  }, [ids, loaded, present, colors]);
  const xAxes = useMemo(
    () => commonXAxes(ids.filter((id) => loaded[id]).map((id) => loaded[id]!.series)),
    [ids, loaded],
  );

  const remove = (id: string) => {
    const rest = ids.filter((x) => x !== id);
    navigate(rest.length ? comparePath(rest) : '/', { replace: rest.length > 0 });
  };

  return (
    <>
      <div className="page-head">
        <h1>Compare runs</h1>
        <div className="page-actions">
          <Link to="/" className="btn">
            ← Jobs
          </Link>
        </div>
      </div>

      {ids.length === 0 ? (
        <p className="muted empty" data-testid="compare-empty">
          No jobs to compare. Select two or more on the <Link to="/">jobs list</Link> and press “Compare”.
        </p>
      ) : (
        <>
          {ids.some((id) => loaded[id]?.job?.engine_mode === 'simulated') && (
            <SimulatedNote subject="Simulated runs" />
          )}
          <div className="compare-layout">
            {present.length > 0 ? (
              <MetricBoard
                linesByMetric={linesByMetric}
                xAxes={xAxes}
                testIdFor={(metric) => `compare-${chartTestId(metric)}`}
                summaryFor={(metric, lines) =>
                  `${metric}${metricUnit(metric) ? ` (${metricUnit(metric)})` : ''}: ${lines.length} of ${ids.length} jobs have data (${lines
                    .map((l) => l.label)
                    .join(', ')})`
                }
                syncKey={`compare-${idsKey}`}
                chartHeight={240}
                chartClassName="compare-chart"
              />
            ) : (
              <p className="muted empty">{allLoaded ? 'None of these jobs has reported metrics yet.' : 'Loading…'}</p>
            )}

            <ul className="compare-legend" aria-label="Jobs compared" data-testid="compare-legend">
              {ids.map((id) => {
                const entry = loaded[id];
                const lastStep = latestStep(entry?.series);
                return (
                  <li
                    key={id}
                    className="compare-legend-item"
                    data-testid="compare-legend-item"
                    data-job-id={id}
                    data-color={colors[id]}
                  >
                    <span className="legend-swatch" style={{ background: colors[id] }} aria-hidden="true" />
                    <span className="legend-body">
                      <Link to={jobPath(id)} className="legend-name">
                        {label(id)}
                      </Link>
                      <span className="legend-meta">
                        {entry?.job && <StatusChip job={entry.job} />}
                        {entry?.job && <EngineModeBadge mode={entry.job.engine_mode} />}
                        <span className="legend-value">
                          {lastStep !== null ? `step ${lastStep}` : entry ? 'no data' : 'loading…'}
                        </span>
                      </span>
                      {entry?.error && (
                        <span className="legend-error" role="alert">
                          {entry.error}
                        </span>
                      )}
                    </span>
                    <button
                      type="button"
                      className="btn btn-quiet legend-remove"
                      aria-label={`Remove ${label(id)} from the comparison`}
                      onClick={() => remove(id)}
                    >
                      ×
                    </button>
                  </li>
                );
              })}
            </ul>
          </div>
        </>
      )}
    </>
  );
}

/** The last step any of a job's series reached; null before it has a point. */
function latestStep(series: SeriesMap | undefined): number | null {
  let last: number | null = null;
  for (const points of Object.values(series ?? {})) {
    const step = points[points.length - 1]?.[0];
    if (step !== undefined && (last === null || step > last)) last = step;
  }
  return last;
}
