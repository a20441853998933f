import { useEffect, useMemo, useState } from 'react';
import { isAbort } from '../api/client';
import { ApiError } from '../api/errors';
import type { Job, Point } from '../api/types';
import { EngineModeBadge, SimulatedNote } from '../components/EngineMode';
import { LineChart, type ChartSeries } from '../components/LineChart';
import { StatusChip } from '../components/StatusChip';
import { WIDE_FRAME } from '../charts/frame';
import { chartTestId, metricUnit } from '../charts/series';
import { formatValue } from '../format';
import { Link, navigate, useLocationSearch } from '../routing/navigation';
import { jobPath } from '../routing/routes';
import { useSession } from '../session';
import { COMPARE_MAX_POINTS, COMPARE_METRICS, lineColor, metricsPresent } from './compare/compare';
import { comparePath, parseCompareIds } from './jobs/listing';
import './compare/compare.css';

interface Loaded {
  job: Job | null;
  series: Record<string, Point[]>;
  error: string;
}

/** `/compare?jobs=<id>,<id>`: the selected jobs' curves of one metric, overlaid. */
export function ComparePage() {
  const { api } = useSession();
  const search = useLocationSearch();
  const ids = useMemo(() => parseCompareIds(search), [search]);
  const idsKey = ids.join(',');
  const [loaded, setLoaded] = useState<Record<string, Loaded>>({});
  const [metric, setMetric] = useState<string | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    for (const id of ids) {
      const errorText = (e: unknown) => (e instanceof ApiError ? e.message : String(e));
      Promise.allSettled([
        api.getJob(id, controller.signal),
        api.getNamedMetrics(id, COMPARE_METRICS, COMPARE_MAX_POINTS, controller.signal),
      ]).then(([job, metrics]) => {
        if (controller.signal.aborted) return;
        const failed = [job, metrics].find((r) => r.status === 'rejected' && !isAbort(r.reason));
        setLoaded((prev) => ({
          ...prev,
          [id]: {
            job: job.status === 'fulfilled' ? job.value : null,
            series: metrics.status === 'fulfilled' ? (metrics.value.series ?? {}) : {},
            error: failed && failed.status === 'rejected' ? errorText(failed.reason) : '',
          },
        }));
      });
    }
    return () => controller.abort();
  }, [api, idsKey]); // idsKey stands for ids

  const present = useMemo(() => metricsPresent(ids.map((id) => loaded[id]?.series)), [ids, loaded]);
  const shown = metric && present.includes(metric) ? metric : (present[0] ?? null);
  const allLoaded = ids.every((id) => loaded[id] !== undefined);

  const lines: (ChartSeries & { label: string; color: string })[] = ids.map((id, i) => ({
    id,
    label: loaded[id]?.job?.name || id,
    color: lineColor(i),
    points: (shown && loaded[id]?.series[shown]) || [],
  }));

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
          <div className="compare-controls">
            <label className="inline-field">
              <span>Metric</span>
              <select
                data-testid="compare-metric"
                value={shown ?? ''}
                disabled={present.length === 0}
                onChange={(e) => setMetric(e.target.value)}
              >
                {present.length === 0 && <option value="">{allLoaded ? 'no metrics yet' : 'loading…'}</option>}
                {present.map((m) => (
                  <option key={m} value={m}>
                    {m}
                  </option>
                ))}
              </select>
            </label>
          </div>

          <div className="compare-layout">
            {shown ? (
              <LineChart
                name={shown}
                series={lines}
                frame={WIDE_FRAME}
                className="compare-chart"
                testId={`compare-${chartTestId(shown)}`}
                seriesTestId="compare-line"
                summary={`${shown}${metricUnit(shown) ? ` (${metricUnit(shown)})` : ''}: ${
                  lines.filter((l) => l.points.length > 0).length
                } of ${lines.length} jobs have data`}
                emptyText="No data for this metric yet."
              />
            ) : (
              <p className="muted empty">{allLoaded ? 'None of these jobs has reported metrics yet.' : 'Loading…'}</p>
            )}

            <ul className="compare-legend" aria-label="Jobs compared" data-testid="compare-legend">
              {lines.map((l) => {
                const entry = loaded[l.id];
                const last = l.points[l.points.length - 1];
                return (
                  <li key={l.id} className="compare-legend-item" data-testid="compare-legend-item" data-job-id={l.id}>
                    <span className="legend-swatch" style={{ background: l.color }} aria-hidden="true" />
                    <span className="legend-body">
                      <Link to={jobPath(l.id)} className="legend-name">
                        {l.label}
                      </Link>
                      <span className="legend-meta">
                        {entry?.job && <StatusChip job={entry.job} />}
                        {entry?.job && <EngineModeBadge mode={entry.job.engine_mode} />}
                        <span className="legend-value">
                          {last ? `${formatValue(last[1])} @ step ${last[0]}` : entry ? 'no data' : 'loading…'}
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
                      aria-label={`Remove ${l.label} from the comparison`}
                      onClick={() => remove(l.id)}
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
