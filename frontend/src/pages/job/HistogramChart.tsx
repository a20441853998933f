import { useId } from 'react';
import { describeHistogram, formatEdge, type Histogram } from './histogram';

const WIDTH = 320;
const HEIGHT = 150;
const PAD = { left: 34, right: 8, top: 8, bottom: 40 };

/**
 * A small bar chart of one histogram, drawn as SVG: a title, axis labels, and the counts per
 * bin as its text alternative (read by screen readers, shown to all as the bars' tooltips).
 */
export function HistogramChart({
  title,
  xLabel,
  histogram,
  testId,
}: {
  title: string;
  xLabel: string;
  histogram: Histogram;
  testId: string;
}) {
  const id = useId();
  const { bins } = histogram;
  const maxCount = Math.max(1, ...bins.map((b) => b.count));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = bins.length ? plotW / bins.length : plotW;
  const summary = `${title}: ${describeHistogram(histogram)}`;

  return (
    <figure className="histogram" data-testid={testId} data-total={histogram.total}>
      <figcaption id={`${id}-title`}>{title}</figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={`${id}-title`}
        aria-describedby={`${id}-desc`}
      >
        <desc id={`${id}-desc`}>{summary}</desc>
        <line className="histogram-axis" x1={PAD.left} x2={PAD.left} y1={PAD.top} y2={PAD.top + plotH} />
        <line
          className="histogram-axis"
          x1={PAD.left}
          x2={PAD.left + plotW}
          y1={PAD.top + plotH}
          y2={PAD.top + plotH}
        />
        <text className="histogram-tick" x={PAD.left - 4} y={PAD.top + 8} textAnchor="end">
          {maxCount}
        </text>
        <text className="histogram-tick" x={PAD.left - 4} y={PAD.top + plotH} textAnchor="end">
          0
        </text>
        {bins.map((b, i) => {
          const h = (b.count / maxCount) * plotH;
          const x = PAD.left + i * slot;
          return (
            <g key={b.label} data-testid="histogram-bin" data-count={b.count} data-label={b.label}>
              <rect className="histogram-bar" x={x + 2} y={PAD.top + plotH - h} width={Math.max(1, slot - 4)} height={h}>
                <title>{`${b.label}: ${b.count}`}</title>
              </rect>
              {bins.length <= 6 && (
                <text className="histogram-tick" x={x + slot / 2} y={PAD.top + plotH + 12} textAnchor="middle">
                  {b.label}
                </text>
              )}
            </g>
          );
        })}
        {bins.length > 6 && (
          <>
            <text className="histogram-tick" x={PAD.left} y={PAD.top + plotH + 12} textAnchor="start">
              {formatEdge(bins[0]?.lo ?? 0)}
            </text>
            <text className="histogram-tick" x={PAD.left + plotW} y={PAD.top + plotH + 12} textAnchor="end">
              {formatEdge(histogram.bins.at(-1)?.hi ?? 0)}
            </text>
          </>
        )}
        <text className="histogram-label" x={PAD.left + plotW / 2} y={HEIGHT - 6} textAnchor="middle">
          {xLabel}
        </text>
        <text
          className="histogram-label"
          x={10}
          y={PAD.top + plotH / 2}
          textAnchor="middle"
          transform={`rotate(-90 10 ${PAD.top + plotH / 2})`}
        >
          samples
        </text>
      </svg>
    </figure>
  );
}
