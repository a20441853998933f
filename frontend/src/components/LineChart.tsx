import { memo, useMemo, useState, type PointerEvent } from 'react';
import type { Point } from '../api/types';
import { downsampleMinMax } from '../charts/downsample';
import { nearestIndex, niceTicks } from '../charts/scale';
import { chartTestId, metricUnit } from '../charts/series';
import { formatValue } from '../format';

const W = 400;
const H = 180;
const PAD = { left: 52, right: 12, top: 10, bottom: 24 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

interface LineChartProps {
  name: string;
  /** The full series, sorted by step; it is downsampled here for drawing. */
  points: readonly Point[];
}

/** One metric over training steps, drawn as inline SVG. */
export const LineChart = memo(function LineChart({ name, points }: LineChartProps) {
  const drawn = useMemo(() => downsampleMinMax(points), [points]);
  const [hover, setHover] = useState<number | null>(null);

  const geometry = useMemo(() => {
    if (drawn.length === 0) return null;
    let yMin = Infinity;
    let yMax = -Infinity;
    for (const [, v] of drawn) {
      if (v < yMin) yMin = v;
      if (v > yMax) yMax = v;
    }
    const ticks = niceTicks(yMin, yMax, 4);
    const lo = Math.min(ticks[0] ?? yMin, yMin);
    const hi = Math.max(ticks[ticks.length - 1] ?? yMax, yMax);
    const xMin = drawn[0]![0];
    const xMax = drawn[drawn.length - 1]![0];
    const sx = (x: number) => PAD.left + (xMax === xMin ? PLOT_W / 2 : ((x - xMin) / (xMax - xMin)) * PLOT_W);
    const sy = (y: number) => PAD.top + (hi === lo ? PLOT_H / 2 : (1 - (y - lo) / (hi - lo)) * PLOT_H);
    let d = '';
    for (let i = 0; i < drawn.length; i++) {
      const [x, y] = drawn[i]!;
      d += `${i === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
    }
    return { ticks, xMin, xMax, sx, sy, d };
  }, [drawn]);

  const last = points[points.length - 1];
  const unit = metricUnit(name);
  const hovered = hover !== null ? drawn[hover] : undefined;

  const onPointerMove = (event: PointerEvent<SVGSVGElement>) => {
    if (!geometry) return;
    const rect = event.currentTarget.getBoundingClientRect();
    const px = ((event.clientX - rect.left) / rect.width) * W;
    const { xMin, xMax } = geometry;
    const step = xMax === xMin ? xMin : xMin + ((px - PAD.left) / PLOT_W) * (xMax - xMin);
    setHover(nearestIndex(drawn, step));
  };

  const summary = last
    ? `${name}: ${points.length} points, latest ${formatValue(last[1])}${unit ? ` ${unit}` : ''} at step ${last[0]}`
    : `${name}: no data yet`;

  return (
    <figure className="chart" data-testid={chartTestId(name)} data-points={points.length}>
      <figcaption className="chart-head">
        <span className="chart-name">
          {name}
          {unit && <span className="chart-unit"> ({unit})</span>}
        </span>
        <span className="chart-value">
          {hovered
            ? `step ${hovered[0]}: ${formatValue(hovered[1])}`
            : last
              ? formatValue(last[1])
              : '—'}
        </span>
      </figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        aria-label={summary}
        onPointerMove={onPointerMove}
        onPointerLeave={() => setHover(null)}
      >
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
              <text x={PAD.left} y={H - 6} textAnchor="start">
                {geometry.xMin}
              </text>
              <text x={W - PAD.right} y={H - 6} textAnchor="end">
                {geometry.xMax}
              </text>
              <text x={PAD.left + PLOT_W / 2} y={H - 6} textAnchor="middle">
                step
              </text>
            </g>
            {drawn.length === 1 ? (
              <circle className="chart-point" cx={geometry.sx(drawn[0]![0])} cy={geometry.sy(drawn[0]![1])} r={3} />
            ) : (
              <path className="chart-line" d={geometry.d} />
            )}
            {hovered && (
              <g className="chart-hover">
                <line x1={geometry.sx(hovered[0])} x2={geometry.sx(hovered[0])} y1={PAD.top} y2={PAD.top + PLOT_H} />
                <circle cx={geometry.sx(hovered[0])} cy={geometry.sy(hovered[1])} r={3} />
              </g>
            )}
          </>
        )}
      </svg>
    </figure>
  );
});
