import { memo, useMemo, type ReactNode } from 'react';
import { niceTicks } from '../../charts/scale';
import { formatPercent, formatSeconds, type UtilPoint } from './timeline';

const W = 600;
const H = 150;
const PAD = { left: 44, right: 10, top: 8, bottom: 22 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

interface WindowChartProps {
  testId: string;
  name: string;
  /** A fraction per slice of the window, 0..1. */
  points: readonly UtilPoint[];
  since: number;
  now: number;
  /** The y axis: the whole 0..100%, or up to a round figure above the largest value (small fractions). */
  scale: 'full' | 'fit';
  /** Accessible summary; the figure's caption shows `value`. */
  label: string;
  value: ReactNode;
  help: string;
}

/** A fraction of the cluster over the window of engine time, as an area. */
export const WindowChart = memo(function WindowChart({
  testId,
  name,
  points,
  since,
  now,
  scale,
  label,
  value,
  help,
}: WindowChartProps) {
  const { area, line, ticks, top } = useMemo(() => {
    const largest = points.reduce((hi, p) => Math.max(hi, p.value), 0);
    const fitted = niceTicks(0, largest > 0 ? largest : 0.01, 2);
    const yTop = scale === 'full' ? 1 : Math.min(1, Math.max(fitted[fitted.length - 1] ?? 0.01, largest));
    const yTicks = scale === 'full' ? [0, 0.5, 1] : fitted.filter((t) => t <= yTop + 1e-12);
    const span = Math.max(1e-9, now - since);
    const sx = (t: number) => PAD.left + ((t - since) / span) * PLOT_W;
    const sy = (v: number) => PAD.top + (1 - v / yTop) * PLOT_H;
    let d = '';
    points.forEach((p, i) => {
      d += `${i === 0 ? 'M' : 'L'}${sx(p.t).toFixed(1)},${sy(p.value).toFixed(1)}`;
    });
    const first = points[0];
    const last = points[points.length - 1];
    const a = first && last ? `${d}L${sx(last.t).toFixed(1)},${sy(0)}L${sx(first.t).toFixed(1)},${sy(0)}Z` : '';
    return { area: a, line: d, ticks: yTicks.map((t) => ({ t, y: sy(t) })), top: yTop };
  }, [points, since, now, scale]);

  return (
    <figure className="chart cluster-window-chart" data-testid={testId} data-top={top}>
      <figcaption className="chart-head">
        <span className="chart-name">{name}</span>
        <span className="chart-value">{value}</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label}>
        {ticks.map(({ t, y }) => (
          <g key={t} className="chart-grid">
            <line x1={PAD.left} x2={W - PAD.right} y1={y} y2={y} />
            <text x={PAD.left - 6} y={y} dy="0.32em" textAnchor="end">
              {formatPercent(t)}
            </text>
          </g>
        ))}
        <g className="chart-axis">
          <text x={PAD.left} y={H - 6} textAnchor="start">
            −{formatSeconds(now - since)}
          </text>
          <text x={W - PAD.right} y={H - 6} textAnchor="end">
            now
          </text>
        </g>
        {area && <path className="cluster-util-area" d={area} />}
        {line && <path className="chart-line" d={line} />}
      </svg>
      <p className="cluster-help muted">{help}</p>
    </figure>
  );
});
