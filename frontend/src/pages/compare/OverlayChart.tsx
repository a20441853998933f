import { useMemo } from 'react';
import type { Point } from '../../api/types';
import { downsampleMinMax } from '../../charts/downsample';
import { niceTicks } from '../../charts/scale';
import { chartTestId, metricUnit } from '../../charts/series';
import { formatValue } from '../../format';

// Same frame as components/LineChart (which draws one series), widened for a single
// large chart, with one path per job.
const W = 800;
const H = 340;
const PAD = { left: 60, right: 16, top: 12, bottom: 28 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

export interface OverlayLine {
  id: string;
  label: string;
  color: string;
  points: readonly Point[];
}

/** Several series of one metric over training steps, overlaid on shared axes. */
export function OverlayChart({ name, lines }: { name: string; lines: readonly OverlayLine[] }) {
  const drawn = useMemo(() => lines.map((l) => ({ ...l, drawn: downsampleMinMax(l.points) })), [lines]);

  const geometry = useMemo(() => {
    let yMin = Infinity;
    let yMax = -Infinity;
    let xMin = Infinity;
    let xMax = -Infinity;
    for (const l of drawn) {
      for (const [x, y] of l.drawn) {
        if (y < yMin) yMin = y;
        if (y > yMax) yMax = y;
        if (x < xMin) xMin = x;
        if (x > xMax) xMax = x;
      }
    }
    if (!Number.isFinite(yMin)) return null;
    const ticks = niceTicks(yMin, yMax, 5);
    const lo = Math.min(ticks[0] ?? yMin, yMin);
    const hi = Math.max(ticks[ticks.length - 1] ?? yMax, yMax);
    const sx = (x: number) => PAD.left + (xMax === xMin ? PLOT_W / 2 : ((x - xMin) / (xMax - xMin)) * PLOT_W);
    const sy = (y: number) => PAD.top + (hi === lo ? PLOT_H / 2 : (1 - (y - lo) / (hi - lo)) * PLOT_H);
    const paths = drawn.map((l) => {
      let d = '';
      l.drawn.forEach(([x, y], i) => {
        d += `${i === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
      });
      return d;
    });
    return { ticks, xMin, xMax, sx, sy, paths };
  }, [drawn]);

  const unit = metricUnit(name);
  const withData = lines.filter((l) => l.points.length > 0).length;
  const summary = `${name}${unit ? ` (${unit})` : ''}: ${withData} of ${lines.length} jobs have data`;

  return (
    <figure className="chart compare-chart" data-testid={`compare-${chartTestId(name)}`}>
      <figcaption className="chart-head">
        <span className="chart-name">
          {name}
          {unit && <span className="chart-unit"> ({unit})</span>}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={summary}>
        {geometry && (
          <>
            {geometry.ticks.map((t) => (
              <g key={t} className="chart-grid">
                <line x1={PAD.left} x2={W - PAD.right} y1={geometry.sy(t)} y2={geometry.sy(t)} />
                <text x={PAD.left - 6} y={geometry.sy(t)} dy="0.32em" textAnchor="end">
                  {formatValue(t)}
                </text>
              </g>
            ))}
            <g className="chart-axis">
              <text x={PAD.left} y={H - 8} textAnchor="start">
                {geometry.xMin}
              </text>
              <text x={W - PAD.right} y={H - 8} textAnchor="end">
                {geometry.xMax}
              </text>
              <text x={PAD.left + PLOT_W / 2} y={H - 8} textAnchor="middle">
                step
              </text>
            </g>
            {drawn.map((l, i) =>
              l.drawn.length === 1 ? (
                <circle
                  key={l.id}
                  data-testid="compare-line"
                  data-job-id={l.id}
                  cx={geometry.sx(l.drawn[0]![0])}
                  cy={geometry.sy(l.drawn[0]![1])}
                  r={3.5}
                  fill={l.color}
                />
              ) : l.drawn.length > 1 ? (
                <path
                  key={l.id}
                  data-testid="compare-line"
                  data-job-id={l.id}
                  d={geometry.paths[i]}
                  fill="none"
                  stroke={l.color}
                  strokeWidth={2}
                  strokeLinejoin="round"
                />
              ) : null,
            )}
          </>
        )}
      </svg>
      {!geometry && <p className="muted">No data for this metric yet.</p>}
    </figure>
  );
}
