import { useId, useMemo, useState } from 'react';
import type { ChartLine } from '../charts/chartData';
import { MAX_SMOOTHING } from '../charts/ema';
import { groupMetrics } from '../charts/groups';
import { X_AXIS_LABELS, type XAxisMode } from '../charts/xAxis';
import { MetricChart, type ChartView } from './MetricChart';
import './metricBoard.css';

interface MetricBoardProps {
  /** Each metric's lines (one per job); a metric with no line is not shown. */
  linesByMetric: Readonly<Record<string, readonly ChartLine[]>>;
  /** The x axes the data can be drawn against (always "step"). */
  xAxes: readonly XAxisMode[];
  /** The charts' data-testid from the metric name. */
  testIdFor: (metric: string) => string;
  /** Each chart's accessible summary. */
  summaryFor: (metric: string, lines: readonly ChartLine[]) => string;
  /** Charts of one board share a cursor; two boards on a page would pass different keys. */
  syncKey: string;
  chartHeight?: number;
  /** Extra class on each chart (the compare page's wide ones). */
  chartClassName?: string;
}

/**
 * Every metric as a chart, in collapsible groups by prefix (critic/, actor/, ...), with the
 * controls a tracker has: a filter box, the x axis, EMA smoothing and a log scale.
 */
export function MetricBoard({
  linesByMetric,
  xAxes,
  testIdFor,
  summaryFor,
  syncKey,
  chartHeight,
  chartClassName,
}: MetricBoardProps) {
  const [filter, setFilter] = useState('');
  const [xChoice, setXChoice] = useState<XAxisMode>('step');
  const [smoothing, setSmoothing] = useState(0);
  const [logScale, setLogScale] = useState(false);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const ids = useId();

  const xMode = xAxes.includes(xChoice) ? xChoice : 'step';
  const view: ChartView = useMemo(
    () => ({ xMode, smoothing, logScale, syncKey }),
    [xMode, smoothing, logScale, syncKey],
  );
  const groups = useMemo(() => groupMetrics(Object.keys(linesByMetric), filter), [linesByMetric, filter]);
  const total = Object.keys(linesByMetric).length;
  const shown = groups.reduce((n, g) => n + g.metrics.length, 0);

  const toggle = (group: string) =>
    setCollapsed((prev) => {
      const next = new Set(prev);
      if (!next.delete(group)) next.add(group);
      return next;
    });

  return (
    <div className="metric-board">
      <div className="metric-controls" data-testid="metric-controls">
        <label className="inline-field metric-filter">
          <span>Filter</span>
          <input
            type="search"
            data-testid="metric-filter"
            placeholder="e.g. score mean"
            value={filter}
            onChange={(e) => setFilter(e.target.value)}
          />
        </label>
        <label className="inline-field">
          <span>X axis</span>
          <select data-testid="x-axis" value={xMode} onChange={(e) => setXChoice(e.target.value as XAxisMode)}>
            {xAxes.map((mode) => (
              <option key={mode} value={mode}>
                {X_AXIS_LABELS[mode]}
              </option>
            ))}
          </select>
        </label>
        <label className="inline-field metric-smoothing">
          <span id={`${ids}-smoothing`}>Smoothing</span>
          <input
            type="range"
            data-testid="smoothing"
            min={0}
            max={MAX_SMOOTHING}
            step={0.01}
            value={smoothing}
            aria-labelledby={`${ids}-smoothing`}
            aria-valuetext={smoothing === 0 ? 'off' : smoothing.toFixed(2)}
            onChange={(e) => setSmoothing(Number(e.target.value))}
          />
          <output className="metric-smoothing-value">{smoothing === 0 ? 'off' : smoothing.toFixed(2)}</output>
        </label>
        <label className="check-field">
          <input
            type="checkbox"
            data-testid="log-scale"
            checked={logScale}
            onChange={(e) => setLogScale(e.target.checked)}
          />
          <span>Log scale</span>
        </label>
        <span className="muted metric-count" data-testid="metric-count" role="status">
          {filter ? `${shown} of ${total} metrics` : `${total} metrics`}
        </span>
      </div>
      <p className="muted metric-hint">
        Drag across a chart to zoom, double-click to reset; a focused chart takes the arrow keys, + and − and 0.
      </p>

      {groups.length === 0 && <p className="muted">No metric matches “{filter}”.</p>}
      {groups.map((group) => {
        const open = !collapsed.has(group.name);
        const panelId = `${ids}-group-${group.name}`;
        return (
          <section key={group.name} className="metric-group" data-testid="metric-group" data-group={group.name}>
            <h3 className="metric-group-head">
              <button
                type="button"
                className="metric-group-toggle"
                data-testid="group-toggle"
                aria-expanded={open}
                aria-controls={panelId}
                onClick={() => toggle(group.name)}
              >
                <span aria-hidden="true" className="metric-group-caret">
                  {open ? '▾' : '▸'}
                </span>
                {group.name}
                <span className="muted metric-group-count">
                  {group.metrics.length === group.total
                    ? ` (${group.total})`
                    : ` (${group.metrics.length} of ${group.total})`}
                </span>
              </button>
            </h3>
            {open && (
              <div className="charts" id={panelId}>
                {group.metrics.map((metric) => {
                  const lines = linesByMetric[metric]!;
                  return (
                    <MetricChart
                      key={metric}
                      name={metric}
                      lines={lines}
                      view={view}
                      testId={testIdFor(metric)}
                      summary={summaryFor(metric, lines)}
                      height={chartHeight}
                      className={chartClassName}
                    />
                  );
                })}
              </div>
            )}
          </section>
        );
      })}
    </div>
  );
}
