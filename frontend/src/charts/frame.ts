import type { Point } from '../api/types';
import { niceTicks } from './scale';

/** The SVG box a line chart is drawn in (viewBox units; the SVG scales to its container). */
export interface ChartFrame {
  width: number;
  height: number;
  pad: { left: number; right: number; top: number; bottom: number };
  /** About how many y-axis ticks. */
  ticks: number;
  /** Baseline of the x-axis labels above the bottom edge. */
  axisLabelInset: number;
  /** Radius of a series that is a single point. */
  pointRadius: number;
}

/** A card in a grid of charts (the job page). */
export const CARD_FRAME: ChartFrame = {
  width: 400,
  height: 180,
  pad: { left: 52, right: 12, top: 10, bottom: 24 },
  ticks: 4,
  axisLabelInset: 6,
  pointRadius: 3,
};

/** One large chart (the compare page). */
export const WIDE_FRAME: ChartFrame = {
  width: 800,
  height: 340,
  pad: { left: 60, right: 16, top: 12, bottom: 28 },
  ticks: 5,
  axisLabelInset: 8,
  pointRadius: 3.5,
};

export interface ChartGeometry {
  ticks: number[];
  xMin: number;
  xMax: number;
  sx: (x: number) => number;
  sy: (y: number) => number;
  /** One SVG path per series ("" for an empty one). */
  paths: string[];
}

/**
 * Shared axes for several series (already downsampled): x from the smallest to the largest
 * step of any, y over nice ticks covering every value. Null when no series has a point.
 */
export function chartGeometry(series: readonly (readonly Point[])[], frame: ChartFrame): ChartGeometry | null {
  let yMin = Infinity;
  let yMax = -Infinity;
  let xMin = Infinity;
  let xMax = -Infinity;
  for (const points of series) {
    for (const [x, y] of points) {
      if (y < yMin) yMin = y;
      if (y > yMax) yMax = y;
      if (x < xMin) xMin = x;
      if (x > xMax) xMax = x;
    }
  }
  if (!Number.isFinite(yMin)) return null;
  const plotW = frame.width - frame.pad.left - frame.pad.right;
  const plotH = frame.height - frame.pad.top - frame.pad.bottom;
  const ticks = niceTicks(yMin, yMax, frame.ticks);
  const lo = Math.min(ticks[0] ?? yMin, yMin);
  const hi = Math.max(ticks[ticks.length - 1] ?? yMax, yMax);
  const sx = (x: number) => frame.pad.left + (xMax === xMin ? plotW / 2 : ((x - xMin) / (xMax - xMin)) * plotW);
  const sy = (y: number) => frame.pad.top + (hi === lo ? plotH / 2 : (1 - (y - lo) / (hi - lo)) * plotH);
  const paths = series.map((points) => {
    let d = '';
    for (let i = 0; i < points.length; i++) {
      const [x, y] = points[i]!;
      d += `${i === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`;
    }
    return d;
  });
  return { ticks, xMin, xMax, sx, sy, paths };
}
