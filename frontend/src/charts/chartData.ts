import type { Point } from '../api/types';
import { emaSmooth } from './ema';
import { alignSeries, xValues, type Clock, type XAxisMode } from './xAxis';

/** One line of a chart: a job's series of one metric. */
export interface ChartLine {
  id: string;
  label: string;
  color: string;
  /** Sorted by step. */
  points: readonly Point[];
  /** This job's running totals for the wall-time and token axes, where it reports them. */
  clocks?: Partial<Record<Exclude<XAxisMode, 'step'>, Clock>>;
}

/** uPlot's aligned data: x, then for each line its raw values and its smoothed values. */
export type ChartColumns = [number[], ...(number | null)[][]];

/**
 * The columns a chart draws: the lines on one x array (the chosen axis), each line as two
 * columns, raw and EMA-smoothed (at weight 0 the smoothed column equals the raw one and is
 * hidden). Smoothing runs per line over its own points, so a gap from another job does not
 * bend it.
 */
export function buildColumns(lines: readonly ChartLine[], mode: XAxisMode, smoothing: number): ChartColumns {
  const aligned = alignSeries(
    lines.map((line) => ({
      xs: xValues(line.points, mode, mode === 'step' ? undefined : line.clocks?.[mode]),
      ys: line.points.map((p) => p[1]),
    })),
  );
  const [xs, ...columns] = aligned;
  const out: ChartColumns = [xs];
  for (const raw of columns) {
    // emaSmooth skips nulls (the steps only another job has), carrying the average over them.
    out.push(raw, smoothing > 0 ? emaSmooth(raw, smoothing) : raw);
  }
  return out;
}

/**
 * The y scale for "log": a true logarithm (uPlot distr 3) when every value is positive; an
 * arcsinh scale (distr 4, log-like away from zero, linear through it) when a loss, an
 * advantage or a KL can be zero or negative, which a logarithm cannot draw.
 */
export function logDistr(columns: readonly (readonly (number | null)[])[]): 3 | 4 {
  for (const column of columns) {
    for (const v of column) if (v !== null && v <= 0) return 4;
  }
  return 3;
}

/** How many points the lines hold together (what the chart's data-points attribute reports). */
export function pointCount(lines: readonly ChartLine[]): number {
  return lines.reduce((n, l) => n + l.points.length, 0);
}

/**
 * The value of `column` nearest to index `idx` (its own, else the closest non-null within
 * `reach` indexes either side): on aligned data a job may have no value at the hovered x.
 */
export function nearestValue(column: readonly (number | null)[], idx: number, reach = 64): number | null {
  for (let d = 0; d <= reach; d++) {
    const before = column[idx - d];
    if (before !== undefined && before !== null) return before;
    const after = column[idx + d];
    if (after !== undefined && after !== null) return after;
  }
  return null;
}

/**
 * The x range after a keyboard zoom: `factor` < 1 zooms in, > 1 out, around `centre`, kept
 * inside the data's extent [lo, hi]. Null when the result would be the whole extent (reset).
 */
export function zoomRange(
  current: { min: number; max: number },
  centre: number,
  factor: number,
  lo: number,
  hi: number,
): { min: number; max: number } | null {
  const width = Math.min(hi - lo, (current.max - current.min) * factor);
  if (!(width > 0) || width >= hi - lo) return null;
  let min = centre - width / 2;
  min = Math.max(lo, Math.min(min, hi - width));
  return { min, max: min + width };
}
