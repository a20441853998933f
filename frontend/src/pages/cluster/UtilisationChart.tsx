import { memo, useMemo } from 'react';
import { formatPercent, formatSeconds, type UtilPoint } from './timeline';

const W = 600;
const H = 150;
const PAD = { left: 40, right: 10, top: 8, bottom: 22 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

interface UtilisationChartProps {
  points: readonly UtilPoint[];
  since: number;
  now: number;
}

/** The cluster's busy fraction of device-time over the window, as an area. */
export const UtilisationChart = memo(function UtilisationChart({ points, since, now }: UtilisationChartProps) {
  const span = Math.max(1e-9, now - since);
  const sx = (t: number) => PAD.left + ((t - since) / span) * PLOT_W;
  const sy = (v: number) => PAD.top + (1 - v) * PLOT_H;
  const { line, area, mean } = useMemo(() => {
    if (points.length === 0) return { line: '', area: '', mean: 0 };
    let d = '';
    points.forEach((p, i) => {
      d += `${i === 0 ? 'M' : 'L'}${sx(p.t).toFixed(1)},${sy(p.value).toFixed(1)}`;
    });
    const first = points[0]!;
    const last = points[points.length - 1]!;
    const a = `${d}L${sx(last.t).toFixed(1)},${sy(0)}L${sx(first.t).toFixed(1)},${sy(0)}Z`;
    return { line: d, area: a, mean: points.reduce((s, p) => s + p.value, 0) / points.length };
  }, [points, since, now]); // sx and sy depend on since and now only

  return (
    <figure className="chart cluster-util-chart" data-testid="cluster-util-chart" data-mean={mean.toFixed(4)}>
      <figcaption className="chart-head">
        <span className="chart-name">Utilisation over the window</span>
        <span className="chart-value">mean {formatPercent(mean)}</span>
      </figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        role="img"
        aria-label={`Cluster utilisation over the last ${formatSeconds(now - since)} of engine time, mean ${formatPercent(mean)}`}
      >
        {[0, 0.5, 1].map((v) => (
          <g key={v} className="chart-grid">
            <line x1={PAD.left} x2={W - PAD.right} y1={sy(v)} y2={sy(v)} />
            <text x={PAD.left - 6} y={sy(v)} dy="0.32em" textAnchor="end">
              {formatPercent(v)}
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
    </figure>
  );
});
