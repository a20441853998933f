import { memo, useMemo, useState, type PointerEvent } from 'react';
import type { Point } from '../api/types';
import { downsampleMinMax } from '../charts/downsample';
import { CARD_FRAME, chartGeometry, type ChartFrame } from '../charts/frame';
import { nearestIndex } from '../charts/scale';
import { chartTestId, metricUnit } from '../charts/series';
import { formatValue } from '../format';

export interface ChartSeries {
  id: string;
  /** Sorted by step; downsampled here for drawing. */
  points: readonly Point[];
  /** Its own colour (several series); without one, the chart's accent line. */
  color?: string;
}

interface LineChartProps {
  /** The metric: the caption, its unit and (by default) the test id. */
  name: string;
  /** One series (the job page)... */
  points?: readonly Point[];
  /** ...or several on shared axes (the compare page). */
  series?: readonly ChartSeries[];
  frame?: ChartFrame;
  className?: string;
  testId?: string;
  /** data-testid of each series' line (with data-series-id), when they must be told apart. */
  seriesTestId?: string;
  /** Accessible summary; by default the latest value of a single series. */
  summary?: string;
  /** Shown under the frame while no series has a point. */
  emptyText?: string;
}

/**
 * A metric over training steps as inline SVG: one series (a job page card, with its latest
 * value and a hover read-out) or several on shared axes (the compare page).
 */
export const LineChart = memo(function LineChart({
  name,
  points: onlyPoints,
  series: manySeries,
  frame = CARD_FRAME,
  className,
  testId,
  seriesTestId,
  summary,
  emptyText,
}: LineChartProps) {
  const series = useMemo(
    () => manySeries ?? (onlyPoints ? [{ id: name, points: onlyPoints }] : []),
    [manySeries, onlyPoints, name],
  );
  const drawn = useMemo(() => series.map((s) => downsampleMinMax(s.points)), [series]);
  const geometry = useMemo(() => chartGeometry(drawn, frame), [drawn, frame]);
  const [hover, setHover] = useState<number | null>(null);

  const { width: W, height: H, pad: PAD } = frame;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const single = series.length === 1 ? series[0]! : null;
  const singleDrawn = single ? drawn[0]! : [];
  const last = single?.points[single.points.length - 1];
  const unit = metricUnit(name);
  const hovered = single && hover !== null ? singleDrawn[hover] : undefined;

  const onPointerMove = (event: PointerEvent<SVGSVGElement>) => {
    if (!geometry || !single) return;
    const rect = event.currentTarget.getBoundingClientRect();
    const px = ((event.clientX - rect.left) / rect.width) * W;
    const { xMin, xMax } = geometry;
    const step = xMax === xMin ? xMin : xMin + ((px - PAD.left) / plotW) * (xMax - xMin);
    setHover(nearestIndex(singleDrawn, step));
  };

  const label =
    summary ??
    (last
      ? `${name}: ${single!.points.length} points, latest ${formatValue(last[1])}${unit ? ` ${unit}` : ''} at step ${last[0]}`
      : `${name}: no data yet`);
  const points = series.reduce((n, s) => n + s.points.length, 0);

  return (
    <figure
      className={className ? `chart ${className}` : 'chart'}
      data-testid={testId ?? chartTestId(name)}
      data-points={points}
    >
      <figcaption className="chart-head">
        <span className="chart-name">
          {name}
          {unit && <span className="chart-unit"> ({unit})</span>}
        </span>
        {single && (
          <span className="chart-value">
            {hovered ? `step ${hovered[0]}: ${formatValue(hovered[1])}` : last ? formatValue(last[1]) : '—'}
          </span>
        )}
      </figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        aria-label={label}
        onPointerMove={single ? onPointerMove : undefined}
        onPointerLeave={single ? () => setHover(null) : undefined}
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
              <text x={PAD.left} y={H - frame.axisLabelInset} textAnchor="start">
                {geometry.xMin}
              </text>
              <text x={W - PAD.right} y={H - frame.axisLabelInset} textAnchor="end">
                {geometry.xMax}
              </text>
              <text x={PAD.left + plotW / 2} y={H - frame.axisLabelInset} textAnchor="middle">
                step
              </text>
            </g>
            {series.map((s, i) => {
              const pts = drawn[i]!;
              const testProps = seriesTestId ? { 'data-testid': seriesTestId, 'data-series-id': s.id } : {};
              if (pts.length === 1) {
                const [x, y] = pts[0]!;
                return s.color ? (
                  <circle key={s.id} {...testProps} cx={geometry.sx(x)} cy={geometry.sy(y)} r={frame.pointRadius} fill={s.color} />
                ) : (
                  <circle key={s.id} {...testProps} className="chart-point" cx={geometry.sx(x)} cy={geometry.sy(y)} r={frame.pointRadius} />
                );
              }
              if (pts.length === 0) return null;
              return s.color ? (
                <path
                  key={s.id}
                  {...testProps}
                  d={geometry.paths[i]}
                  fill="none"
                  stroke={s.color}
                  strokeWidth={2}
                  strokeLinejoin="round"
                />
              ) : (
                <path key={s.id} {...testProps} className="chart-line" d={geometry.paths[i]} />
              );
            })}
            {hovered && (
              <g className="chart-hover">
                <line x1={geometry.sx(hovered[0])} x2={geometry.sx(hovered[0])} y1={PAD.top} y2={PAD.top + plotH} />
                <circle cx={geometry.sx(hovered[0])} cy={geometry.sy(hovered[1])} r={3} />
              </g>
            )}
          </>
        )}
      </svg>
      {!geometry && emptyText && <p className="muted">{emptyText}</p>}
    </figure>
  );
});
